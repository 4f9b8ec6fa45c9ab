"""Drives a running quotaroute node with the official Python SDKs across formats (behaviour
§14): openai-python (chat and responses) against the Anthropic-format combo `claude`, and
anthropic-python against the OpenAI-format combo `team`, streaming and not, with tool calls
(the mock calls a tool when the prompt says `mock-tool-call:NAME {args}`).

Usage: python sdk_translated.py BASE_URL CLIENT_KEY
Prints one JSON object of what each SDK parsed; exits non-zero if any call failed.
"""

import json
import sys

import anthropic
import openai

base, key = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=20)
an = anthropic.Anthropic(api_key=key, base_url=base, max_retries=0, timeout=20)

CALL = 'mock-tool-call:get_weather {"city":"Paris"}'
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
out, errors = {}, {}


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        errors[name] = f"{type(error).__name__}: {error}"


def chat():
    raw = oa.chat.completions.with_raw_response.create(
        model="claude", max_tokens=6, messages=[{"role": "user", "content": "hi"}])
    data = raw.parse()
    return {"content": data.choices[0].message.content, "finish": data.choices[0].finish_reason,
            "prompt_tokens": data.usage.prompt_tokens, "completion_tokens": data.usage.completion_tokens,
            "cached_tokens": data.usage.prompt_tokens_details.cached_tokens,
            "translated": raw.headers.get("x-quotaroute-translated")}


def chat_stream():
    content, usage, finish = "", None, None
    for chunk in oa.chat.completions.create(model="claude", max_tokens=6, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "hi"}]):
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    return {"content": content, "finish": finish, "completion_tokens": usage}


def chat_tool():
    data = oa.chat.completions.create(model="claude", max_tokens=6, tools=CHAT_TOOLS,
                                      messages=[{"role": "user", "content": CALL}])
    call = data.choices[0].message.tool_calls[0]
    follow = oa.chat.completions.create(model="claude", max_tokens=6, tools=CHAT_TOOLS, messages=[
        {"role": "user", "content": CALL},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    return {"finish": data.choices[0].finish_reason, "name": call.function.name,
            "arguments": json.loads(call.function.arguments), "id": call.id,
            "follow_up": follow.choices[0].message.content}


def chat_tool_stream():
    # The SDK's own accumulator (`stream` helper) assembles the pieces.
    with oa.chat.completions.stream(model="claude", max_tokens=6, tools=CHAT_TOOLS,
                                    messages=[{"role": "user", "content": CALL}]) as stream:
        pieces = 0
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                pieces += 1
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    return {"name": call.function.name, "arguments": json.loads(call.function.arguments),
            "pieces": pieces, "finish": final.choices[0].finish_reason}


def chat_refused():
    try:
        oa.chat.completions.create(model="claude", n=2, messages=[{"role": "user", "content": "hi"}])
    except openai.BadRequestError as error:
        return {"status": error.status_code, "code": error.code, "message": error.message}
    return {"status": 200}


def responses():
    data = oa.responses.create(model="claude", max_output_tokens=6, input="hi", instructions="be brief")
    return {"text": data.output_text, "status": data.status, "store": data.store,
            "input_tokens": data.usage.input_tokens, "output_tokens": data.usage.output_tokens}


def responses_stream():
    with oa.responses.stream(model="claude", max_output_tokens=6, input="hi") as stream:
        deltas = sum(1 for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    return {"text": final.output_text, "deltas": deltas, "output_tokens": final.usage.output_tokens}


def responses_tool():
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    data = oa.responses.create(model="claude", max_output_tokens=6, input=CALL, tools=tools)
    call = [item for item in data.output if item.type == "function_call"][0]
    follow = oa.responses.create(model="claude", max_output_tokens=6, tools=tools, input=[
        {"role": "user", "content": CALL},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    return {"name": call.name, "arguments": json.loads(call.arguments), "follow_up": follow.output_text}


def messages():
    raw = an.messages.with_raw_response.create(model="team", max_tokens=6,
                                               messages=[{"role": "user", "content": "hi"}])
    data = raw.parse()
    return {"text": data.content[0].text, "stop_reason": data.stop_reason,
            "input_tokens": data.usage.input_tokens, "output_tokens": data.usage.output_tokens,
            "translated": raw.headers.get("x-quotaroute-translated")}


def messages_stream():
    with an.messages.stream(model="team", max_tokens=6,
                            messages=[{"role": "user", "content": "hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {"text": text, "stop_reason": final.stop_reason, "output_tokens": final.usage.output_tokens}


def messages_tool():
    tools = [{"name": "get_weather", "description": "weather",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    with an.messages.stream(model="team", max_tokens=6, tools=tools,
                            messages=[{"role": "user", "content": CALL}]) as stream:
        final = stream.get_final_message()
    use = [block for block in final.content if block.type == "tool_use"][0]
    follow = an.messages.create(model="team", max_tokens=6, tools=tools, messages=[
        {"role": "user", "content": CALL},
        {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}])
    return {"name": use.name, "input": use.input, "stop_reason": final.stop_reason,
            "follow_up": follow.content[0].text}


LONG = "You answer questions about the weather, briefly. " * 120


def chat_cached():
    # The same long prompt twice: affinity keeps it on one account, whose cache it then reads.
    usage = []
    for _ in range(2):
        data = oa.chat.completions.create(model="claude", max_tokens=6, messages=[
            {"role": "system", "content": LONG}, {"role": "user", "content": "and today?"}])
        usage.append({"prompt_tokens": data.usage.prompt_tokens,
                      "cached_tokens": data.usage.prompt_tokens_details.cached_tokens})
    return usage


def messages_cached():
    usage = []
    for _ in range(2):
        data = an.messages.create(model="team", max_tokens=6, system=LONG,
                                  messages=[{"role": "user", "content": "and today?"}])
        usage.append({"input_tokens": data.usage.input_tokens,
                      "cache_read_input_tokens": data.usage.cache_read_input_tokens})
    return usage


def responses_reasoning():
    # Thinking (reasoning on) comes back as a sealed reasoning item; sent back with the next
    # turn, it reaches the account that made it, which accepts its signature.
    first = oa.responses.create(model="claude", max_output_tokens=6, store=False,
                                reasoning={"effort": "low"}, include=["reasoning.encrypted_content"],
                                input=[{"role": "user", "content": "think, then answer"}])
    reasoning = [item for item in first.output if item.type == "reasoning"][0]
    history = [{"role": "user", "content": "think, then answer"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "again"})
    second = oa.responses.with_raw_response.create(
        model="claude", max_output_tokens=6, store=False, reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"], input=history)
    return {"summary": reasoning.summary[0].text, "sealed": reasoning.encrypted_content[:5],
            "second": second.parse().output_text}


def messages_refused():
    try:
        # Anthropic's code execution runs on no OpenAI API (web search does: by Responses).
        an.messages.create(model="team", max_tokens=6,
                           tools=[{"type": "code_execution_20250522", "name": "code_execution"}],
                           messages=[{"role": "user", "content": "hi"}])
    except anthropic.BadRequestError as error:
        return {"status": error.status_code, "type": error.body["error"]["type"],
                "code": error.body["error"].get("code")}
    return {"status": 200}


for name, fn in [("chat", chat), ("chat_stream", chat_stream), ("chat_tool", chat_tool),
                 ("chat_tool_stream", chat_tool_stream), ("chat_refused", chat_refused),
                 ("responses", responses), ("responses_stream", responses_stream),
                 ("responses_tool", responses_tool), ("messages", messages),
                 ("messages_stream", messages_stream), ("messages_tool", messages_tool),
                 ("messages_refused", messages_refused), ("chat_cached", chat_cached),
                 ("messages_cached", messages_cached), ("responses_reasoning", responses_reasoning)]:
    step(name, fn)
if errors:
    out["errors"] = errors
print(json.dumps(out))
sys.exit(1 if errors else 0)
