"""Drives a running quotaroute node with the official Python SDKs on translated web search
(behaviour §14): openai-python's chat stream with `web_search_options` on the Anthropic combo
`claude` (its annotations chunk), anthropic-python's `messages.stream` with the web search
server tool on the Gemini combo `gemini` (search blocks and citations accumulated by the SDK),
and google-genai with Google Search on `claude` (grounding_metadata, whole and streamed).

Usage: python sdk_search.py BASE_URL CLIENT_KEY
Prints one JSON object of what each SDK parsed; exits non-zero if any call failed.
"""

import json
import sys

import anthropic
import openai
from google import genai
from google.genai import types

base, key = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=20)
an = anthropic.Anthropic(api_key=key, base_url=base, max_retries=0, timeout=20)
gg = genai.Client(api_key=key, http_options=types.HttpOptions(
    base_url=base, retry_options=types.HttpRetryOptions(attempts=1)))
ASK = "what does the mock say?"
out, errors = {}, {}


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        errors[name] = f"{type(error).__name__}: {error}"


def chat_stream():
    content, annotations = "", []
    with oa.chat.completions.stream(model="claude", web_search_options={},
                                    messages=[{"role": "user", "content": ASK}]) as stream:
        for event in stream:
            if event.type != "chunk" or not event.chunk.choices:
                continue
            delta = event.chunk.choices[0].delta
            content += delta.content or ""
            annotations += getattr(delta, "annotations", None) or []
        final = stream.get_final_completion()
    cited = [content[a["url_citation"]["start_index"]:a["url_citation"]["end_index"]]
             for a in annotations]
    return {"content": content, "final": final.choices[0].message.content,
            "urls": [a["url_citation"]["url"] for a in annotations], "cited": cited}


def messages_stream():
    with an.messages.stream(model="gemini", max_tokens=6,
                            tools=[{"type": "web_search_20250305", "name": "web_search"}],
                            messages=[{"role": "user", "content": ASK}]) as stream:
        citations = [event.citation.url for event in stream if event.type == "citation"]
        final = stream.get_final_message()
    blocks = final.content
    text = [b for b in blocks if b.type == "text"]
    return {"types": [b.type for b in blocks],
            "query": next(b.input for b in blocks if b.type == "server_tool_use"),
            "results": [r.url for b in blocks if b.type == "web_search_tool_result" for r in b.content],
            "cited": [c.cited_text for b in text for c in (b.citations or [])],
            "citation_events": citations, "text": "".join(b.text for b in text)}


def grounding(metadata, text):
    support = metadata.grounding_supports[0]
    raw = text.encode()
    return {"queries": metadata.web_search_queries,
            "uris": [c.web.uri for c in metadata.grounding_chunks],
            "span": raw[support.segment.start_index or 0:support.segment.end_index].decode(),
            "segment": support.segment.text, "indices": support.grounding_chunk_indices}


SEARCH = types.GenerateContentConfig(tools=[types.Tool(google_search=types.GoogleSearch())])


def genai_whole():
    answer = gg.models.generate_content(model="claude", contents=ASK, config=SEARCH)
    return grounding(answer.candidates[0].grounding_metadata, answer.text)


def genai_stream():
    text, metadata = "", None
    for chunk in gg.models.generate_content_stream(model="claude", contents=ASK, config=SEARCH):
        text += chunk.text or ""
        if chunk.candidates and chunk.candidates[0].grounding_metadata is not None:
            metadata = chunk.candidates[0].grounding_metadata
    return grounding(metadata, text)


step("chat_stream", chat_stream)
step("messages_stream", messages_stream)
step("genai", genai_whole)
step("genai_stream", genai_stream)
print(json.dumps(out))
if errors:
    print(json.dumps(errors), file=sys.stderr)
    sys.exit(1)
