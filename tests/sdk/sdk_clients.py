"""Drives a running quotaroute node with the official OpenAI and Anthropic Python SDKs.

Usage: sdk_clients.py BASE_URL CLIENT_KEY
Prints one JSON object with what each call returned; exits non-zero on any SDK error.
"""
import json
import sys

import anthropic
import openai

base, key = sys.argv[1], sys.argv[2]
out = {}

oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
raw = oa.chat.completions.with_raw_response.create(
    model="team", messages=[{"role": "user", "content": "hello"}]
)
chat = raw.parse()
out["openai_chat"] = {
    "content": chat.choices[0].message.content,
    "prompt_tokens": chat.usage.prompt_tokens,
    "connection": raw.headers.get("x-quotaroute-connection"),
}

stream = oa.chat.completions.create(
    model="team", messages=[{"role": "user", "content": "hello"}], stream=True
)
pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
out["openai_stream"] = {"content": "".join(pieces), "chunks": len(pieces)}

stream = oa.chat.completions.create(
    model="team",
    messages=[{"role": "user", "content": "hello"}],
    stream=True,
    stream_options={"include_usage": True},
)
usage = None
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage.completion_tokens
out["openai_stream_usage"] = usage

try:
    oa.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    out["openai_not_found"] = None
except openai.NotFoundError as error:
    out["openai_not_found"] = error.status_code

an = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
message = an.messages.create(
    model="claude", max_tokens=32, messages=[{"role": "user", "content": "hello"}]
)
out["anthropic_message"] = {
    "text": message.content[0].text,
    "output_tokens": message.usage.output_tokens,
}
with an.messages.stream(
    model="claude", max_tokens=32, messages=[{"role": "user", "content": "hello"}]
) as stream:
    text = "".join(stream.text_stream)
    final = stream.get_final_message()
out["anthropic_stream"] = {"text": text, "output_tokens": final.usage.output_tokens}

print(json.dumps(out))
