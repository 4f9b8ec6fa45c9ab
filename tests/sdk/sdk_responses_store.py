"""openai-python's stateful Responses flow on a Messages-only account (behaviour §14,
`[responses] store = true`): `responses.create`, then `previous_response_id` (JSON and
streamed), `responses.retrieve`, `responses.input_items.list` (one page, and paged with
`limit`/`after`), `responses.delete`; another client's key is told none of it exists.

Usage: python sdk_responses_store.py BASE_URL CLIENT_KEY OTHER_CLIENT_KEY
Prints one JSON object of what the SDK parsed; exits non-zero if any call failed.
"""

import json
import sys

import openai

base, key, other_key = sys.argv[1], sys.argv[2], sys.argv[3]
oa = openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=20)
other = openai.OpenAI(api_key=other_key, base_url=f"{base}/v1", max_retries=0, timeout=20)
out, errors = {}, {}


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        errors[name] = f"{type(error).__name__}: {error}"


def described(response):
    return {"id": response.id, "store": response.store, "text": response.output_text,
            "status": response.status, "previous_response_id": response.previous_response_id}


state = {}


def first():
    r1 = oa.responses.create(model="claude", max_output_tokens=6,
                             input="store52-sdk: remember the word tangerine")
    state["r1"] = r1.id
    return described(r1)


def second():
    r2 = oa.responses.create(model="claude", max_output_tokens=6,
                             previous_response_id=state["r1"], input="store52-sdk: which word?")
    state["r2"] = r2.id
    return described(r2)


def third_streamed():
    done, deltas = None, ""
    for event in oa.responses.create(model="claude", max_output_tokens=6, stream=True,
                                     previous_response_id=state["r2"],
                                     input="store52-sdk: and once more?"):
        if event.type == "response.output_text.delta":
            deltas += event.delta
        if event.type == "response.completed":
            done = event.response
    state["r3"] = done.id
    return {**described(done), "deltas": deltas}


def retrieved():
    return described(oa.responses.retrieve(state["r2"]))


def input_items():
    page = oa.responses.input_items.list(state["r2"])
    return {"items": [{"id": item.id, "type": item.type, "role": getattr(item, "role", None),
                       "text": "".join(part.text for part in (getattr(item, "content", None) or []))}
                      for item in page.data],
            "has_more": page.has_more, "first_id": page.first_id, "last_id": page.last_id}


def input_items_paged():
    # The SDK follows `after` itself, one item per page.
    return [item.id for item in oa.responses.input_items.list(state["r3"], limit=1, order="asc")]


def deleted():
    raw = oa.responses.with_raw_response.delete(state["r1"])
    return {"status": raw.status_code, "body": json.loads(raw.text)}


def gone_after_delete():
    try:
        oa.responses.retrieve(state["r1"])
    except openai.NotFoundError as error:
        return {"status": error.status_code}
    return {"status": 200}


def other_client():
    seen = {}
    try:
        other.responses.retrieve(state["r2"])
        seen["retrieve"] = 200
    except openai.NotFoundError as error:
        seen["retrieve"] = error.status_code
    try:
        other.responses.create(model="claude", max_output_tokens=6,
                               previous_response_id=state["r2"], input="steal")
        seen["continue"] = 200
    except openai.BadRequestError as error:
        seen["continue"] = error.status_code
        seen["continue_code"] = error.code
    return seen


for name, fn in [("first", first), ("second", second), ("third_streamed", third_streamed),
                 ("retrieved", retrieved), ("input_items", input_items),
                 ("input_items_paged", input_items_paged), ("other_client", other_client),
                 ("deleted", deleted), ("gone_after_delete", gone_after_delete)]:
    step(name, fn)
if errors:
    out["errors"] = errors
print(json.dumps(out))
sys.exit(1 if errors else 0)
