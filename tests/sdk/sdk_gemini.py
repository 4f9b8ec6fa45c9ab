"""Drives a running quotaroute node with the official google-genai Python SDK (Gemini accounts).

Usage: sdk_gemini.py BASE_URL CLIENT_KEY MODEL
Prints one JSON object with what each call returned; exits non-zero on any SDK error.
"""
import base64
import json
import sys

from google import genai
from google.genai import types

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}

client = genai.Client(
    api_key=key,
    http_options=types.HttpOptions(base_url=base, retry_options=types.HttpRetryOptions(attempts=1)),
)

answer = client.models.generate_content(model=model, contents="hello")
out["generate"] = {
    "text": answer.text,
    "prompt_tokens": answer.usage_metadata.prompt_token_count,
    "output_tokens": answer.usage_metadata.candidates_token_count,
}

pieces = []
usage = None
for chunk in client.models.generate_content_stream(model=model, contents="hello"):
    pieces.append(chunk.text or "")
    if chunk.usage_metadata is not None:
        usage = chunk.usage_metadata.candidates_token_count
out["stream"] = {"text": "".join(pieces), "chunks": len(pieces), "output_tokens": usage}

lookup = types.FunctionDeclaration(
    name="lookup",
    description="Looks a word up.",
    parameters=types.Schema(
        type="OBJECT", properties={"q": types.Schema(type="STRING")}, required=["q"]
    ),
)
config = types.GenerateContentConfig(
    tools=[types.Tool(function_declarations=[lookup])],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)
called = client.models.generate_content(
    model=model, contents='mock-tool-call:lookup {"q":"x"}', config=config
)
calls = called.function_calls or []
out["tool"] = {"name": calls[0].name if calls else None, "args": dict(calls[0].args) if calls else None}

# A thinking tool turn and the next one with the model's turn as the SDK holds it: a
# thoughtSignature is bytes to the SDK (decoded from base64, sent back URL-safe).
thinking = types.GenerateContentConfig(
    tools=[types.Tool(function_declarations=[lookup])],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=512),
)
asked = types.Content(role="user", parts=[types.Part(text='mock-tool-call:lookup {"q":"y"}')])
first = client.models.generate_content(model=model, contents=[asked], config=thinking)
model_turn = first.candidates[0].content
signatures = [p.thought_signature for p in model_turn.parts or [] if p.thought_signature]
result = types.Content(
    role="user",
    parts=[types.Part.from_function_response(name="lookup", response={"result": "y"})],
)
client.models.generate_content(model=model, contents=[asked, model_turn, result], config=thinking)
out["signed_turn"] = {"signatures": [base64.b64encode(s).decode()[:4] for s in signatures]}

counted = client.models.count_tokens(model=model, contents="hello there")
out["count_tokens"] = counted.total_tokens

try:
    client.models.generate_content(model="no-such-model", contents="x")
    out["not_found"] = None
except genai.errors.ClientError as error:
    out["not_found"] = {"code": error.code, "status": error.status}

print(json.dumps(out))
