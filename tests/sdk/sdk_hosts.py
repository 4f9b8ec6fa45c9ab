"""Drives a running quotaroute node with the official Python SDKs on hosts that do not serve
their API (behaviour §14, providers' `apis`): on a chat-only host, openai-python's Responses
API; on a responses-only host, anthropic-python's Messages and openai-python's Chat
Completions. Streaming and not, with a tool call streamed in pieces and its result sent back
(the mock calls a tool when the prompt says `mock-tool-call:NAME {args}`). Model `team`.

Usage: python sdk_hosts.py BASE_URL CLIENT_KEY chat|responses
Prints one JSON object of what each SDK parsed; exits non-zero if any call failed.
"""

import json
import sys

import anthropic
import openai

base, key, host = sys.argv[1], sys.argv[2], sys.argv[3]
oa = openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=20)
an = anthropic.Anthropic(api_key=key, base_url=base, max_retries=0, timeout=20)

MODEL = "team"
CALL = 'mock-tool-call:get_weather {"city":"Paris"}'
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}}
out, errors = {}, {}


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        errors[name] = f"{type(error).__name__}: {error}"


def responses():
    raw = oa.responses.with_raw_response.create(model=MODEL, max_output_tokens=6, input="hi",
                                                instructions="be brief")
    data = raw.parse()
    return {"text": data.output_text, "status": data.status,
            "input_tokens": data.usage.input_tokens, "output_tokens": data.usage.output_tokens,
            "translated": raw.headers.get("x-quotaroute-translated")}


def responses_stream():
    with oa.responses.stream(model=MODEL, max_output_tokens=6, input="hi") as stream:
        deltas = sum(1 for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    return {"text": final.output_text, "deltas": deltas, "output_tokens": final.usage.output_tokens}


RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": PARAMS}]


def responses_tool():
    data = oa.responses.create(model=MODEL, max_output_tokens=6, input=CALL, tools=RESPONSES_TOOLS)
    call = [item for item in data.output if item.type == "function_call"][0]
    follow = oa.responses.create(model=MODEL, max_output_tokens=6, tools=RESPONSES_TOOLS, input=[
        {"role": "user", "content": CALL},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    return {"name": call.name, "arguments": json.loads(call.arguments), "follow_up": follow.output_text}


def responses_tool_stream():
    with oa.responses.stream(model=MODEL, max_output_tokens=6, input=CALL, tools=RESPONSES_TOOLS) as stream:
        pieces = sum(1 for event in stream if event.type == "response.function_call_arguments.delta")
        final = stream.get_final_response()
    call = [item for item in final.output if item.type == "function_call"][0]
    return {"name": call.name, "arguments": json.loads(call.arguments), "pieces": pieces}


def responses_reasoning():
    # A reasoning chat host's `reasoning_content` comes back as a reasoning item; sent back
    # with the next turn, it is left out (a chat host takes no reasoning back).
    first = oa.responses.create(model=MODEL, max_output_tokens=6, store=False,
                                reasoning={"effort": "low", "summary": "auto"},
                                input=[{"role": "user", "content": "think, then answer"}])
    reasoning = [item for item in first.output if item.type == "reasoning"][0]
    history = [{"role": "user", "content": "think, then answer"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "again"})
    second = oa.responses.create(model=MODEL, max_output_tokens=6, store=False,
                                 reasoning={"effort": "low"}, input=history)
    return {"kinds": [item.type for item in first.output], "summary": reasoning.summary[0].text,
            "second": second.output_text}


def messages():
    raw = an.messages.with_raw_response.create(model=MODEL, max_tokens=6,
                                               messages=[{"role": "user", "content": "hi"}])
    data = raw.parse()
    return {"text": data.content[0].text, "stop_reason": data.stop_reason,
            "input_tokens": data.usage.input_tokens, "output_tokens": data.usage.output_tokens,
            "translated": raw.headers.get("x-quotaroute-translated")}


def messages_stream():
    with an.messages.stream(model=MODEL, max_tokens=6, system="be brief",
                            messages=[{"role": "user", "content": "hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {"text": text, "stop_reason": final.stop_reason, "output_tokens": final.usage.output_tokens,
            "kinds": [block.type for block in final.content]}


def messages_tool():
    tools = [{"name": "get_weather", "description": "weather", "input_schema": PARAMS}]
    with an.messages.stream(model=MODEL, max_tokens=6, tools=tools,
                            messages=[{"role": "user", "content": CALL}]) as stream:
        pieces = sum(1 for event in stream if event.type == "input_json")
        final = stream.get_final_message()
    use = [block for block in final.content if block.type == "tool_use"][0]
    follow = an.messages.create(model=MODEL, max_tokens=6, tools=tools, messages=[
        {"role": "user", "content": CALL},
        {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}])
    return {"name": use.name, "input": use.input, "stop_reason": final.stop_reason, "pieces": pieces,
            "follow_up": follow.content[0].text}


def messages_thinking():
    # Thinking on: the host's reasoning summary comes back as a thinking block, which the
    # next turn sends back (the host gets its turns without it: it checks no signature).
    thinking = {"type": "enabled", "budget_tokens": 1024}
    first = an.messages.create(model=MODEL, max_tokens=1030, thinking=thinking,
                               messages=[{"role": "user", "content": "think, then answer"}])
    block = [block for block in first.content if block.type == "thinking"][0]
    second = an.messages.create(model=MODEL, max_tokens=1030, thinking=thinking, messages=[
        {"role": "user", "content": "think, then answer"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "again"}])
    return {"kinds": [b.type for b in first.content], "thinking": block.thinking,
            "second_kinds": [b.type for b in second.content],
            "second_text": [b.text for b in second.content if b.type == "text"][0][:21]}


def chat():
    raw = oa.chat.completions.with_raw_response.create(
        model=MODEL, max_tokens=6, messages=[{"role": "user", "content": "hi"}])
    data = raw.parse()
    return {"content": data.choices[0].message.content, "finish": data.choices[0].finish_reason,
            "prompt_tokens": data.usage.prompt_tokens, "completion_tokens": data.usage.completion_tokens,
            "translated": raw.headers.get("x-quotaroute-translated")}


def chat_stream():
    content, usage, finish = "", None, None
    for chunk in oa.chat.completions.create(model=MODEL, max_tokens=6, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "hi"}]):
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    return {"content": content, "finish": finish, "completion_tokens": usage}


def chat_tool():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                               "parameters": PARAMS}}]
    with oa.chat.completions.stream(model=MODEL, max_tokens=6, tools=tools,
                                    messages=[{"role": "user", "content": CALL}]) as stream:
        pieces = sum(1 for event in stream if event.type == "tool_calls.function.arguments.delta")
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    follow = oa.chat.completions.create(model=MODEL, max_tokens=6, tools=tools, messages=[
        {"role": "user", "content": CALL},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    return {"name": call.function.name, "arguments": json.loads(call.function.arguments),
            "pieces": pieces, "finish": final.choices[0].finish_reason,
            "follow_up": follow.choices[0].message.content}


STEPS = {
    "chat": [("responses", responses), ("responses_stream", responses_stream),
             ("responses_tool", responses_tool), ("responses_tool_stream", responses_tool_stream),
             ("responses_reasoning", responses_reasoning)],
    "responses": [("messages", messages), ("messages_stream", messages_stream),
                  ("messages_tool", messages_tool), ("messages_thinking", messages_thinking),
                  ("chat", chat), ("chat_stream", chat_stream),
                  ("chat_tool", chat_tool)],
}
for name, fn in STEPS[host]:
    step(name, fn)
if errors:
    out["errors"] = errors
print(json.dumps(out))
sys.exit(1 if errors else 0)
