// Drives a running quotaroute node with the official Node SDKs on hosts that do not serve their
// API (behaviour §14, providers' `apis`): on a chat-only host, openai-node's Responses API (and
// @anthropic-ai/sdk's thinking); on a responses-only host, @anthropic-ai/sdk's Messages and
// openai-node's Chat Completions.
// Streaming and not, with a tool call streamed in pieces and its result sent back (the mock
// calls a tool when the prompt says `mock-tool-call:NAME {args}`). Model `team`.
//
// Usage: node node_sdks_hosts.mjs BASE_URL CLIENT_KEY chat|responses
// Prints one JSON object of what each SDK parsed; exits non-zero if any call failed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [base, key, host] = process.argv.slice(2);
const out = {};
const errors = {};
async function step(name, fn) {
  try {
    out[name] = await fn();
  } catch (error) {
    errors[name] = `${error?.constructor?.name ?? 'Error'}: ${error?.message ?? error}`;
  }
}
const oa = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0, timeout: 20_000 });
const an = new Anthropic({ apiKey: key, baseURL: base, maxRetries: 0, timeout: 20_000 });
const model = 'team';
const CALL = 'mock-tool-call:get_weather {"city":"Paris"}';
const params = { type: 'object', properties: { city: { type: 'string' } } };
const responsesTools = [{ type: 'function', name: 'get_weather', parameters: params }];
const chatTools = [{ type: 'function', function: { name: 'get_weather', parameters: params } }];
const messagesTools = [{ name: 'get_weather', input_schema: params }];

if (host === 'chat') {
  await step('responses', async () => {
    const { data, response } = await oa.responses.create({ model, max_output_tokens: 6, input: 'hi', instructions: 'be brief' }).withResponse();
    return { text: data.output_text, status: data.status, input_tokens: data.usage.input_tokens, output_tokens: data.usage.output_tokens, translated: response.headers.get('x-quotaroute-translated') };
  });
  await step('responses_stream', async () => {
    const stream = oa.responses.stream({ model, max_output_tokens: 6, input: 'hi' });
    let deltas = 0;
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') deltas += 1;
    }
    const final = await stream.finalResponse();
    return { text: final.output_text, deltas, output_tokens: final.usage.output_tokens };
  });
  await step('responses_tool', async () => {
    const data = await oa.responses.create({ model, max_output_tokens: 6, input: CALL, tools: responsesTools });
    const call = data.output.find((item) => item.type === 'function_call');
    const follow = await oa.responses.create({ model, max_output_tokens: 6, tools: responsesTools, input: [
      { role: 'user', content: CALL },
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }] });
    return { name: call.name, arguments: JSON.parse(call.arguments), follow_up: follow.output_text };
  });
  await step('responses_tool_stream', async () => {
    const stream = oa.responses.stream({ model, max_output_tokens: 6, input: CALL, tools: responsesTools });
    let pieces = 0;
    for await (const event of stream) {
      if (event.type === 'response.function_call_arguments.delta') pieces += 1;
    }
    const final = await stream.finalResponse();
    const call = final.output.find((item) => item.type === 'function_call');
    return { name: call.name, arguments: JSON.parse(call.arguments), pieces };
  });
  await step('responses_reasoning_stream', async () => {
    const stream = oa.responses.stream({ model, max_output_tokens: 6, reasoning: { effort: 'low', summary: 'auto' }, input: 'think, then answer' });
    let summary = '';
    for await (const event of stream) {
      if (event.type === 'response.reasoning_summary_text.delta') summary += event.delta;
    }
    const final = await stream.finalResponse();
    return { summary, kinds: final.output.map((item) => item.type), text: final.output_text };
  });
  await step('messages_thinking_stream', async () => {
    const stream = an.messages.stream({ model, max_tokens: 1030, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'think, then answer' }] });
    let thinking = '';
    stream.on('thinking', (piece) => { thinking += piece; });
    const final = await stream.finalMessage();
    return { thinking, kinds: final.content.map((block) => block.type) };
  });
} else {
  await step('messages', async () => {
    const { data, response } = await an.messages.create({ model, max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    return { text: data.content[0].text, stop_reason: data.stop_reason, input_tokens: data.usage.input_tokens, output_tokens: data.usage.output_tokens, translated: response.headers.get('x-quotaroute-translated') };
  });
  await step('messages_stream', async () => {
    const stream = an.messages.stream({ model, max_tokens: 6, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    stream.on('text', (piece) => { text += piece; });
    const final = await stream.finalMessage();
    return { text, stop_reason: final.stop_reason, output_tokens: final.usage.output_tokens, kinds: final.content.map((block) => block.type) };
  });
  await step('messages_tool', async () => {
    const stream = an.messages.stream({ model, max_tokens: 6, tools: messagesTools, messages: [{ role: 'user', content: CALL }] });
    let pieces = 0;
    stream.on('inputJson', () => { pieces += 1; });
    const final = await stream.finalMessage();
    const use = final.content.find((block) => block.type === 'tool_use');
    const follow = await an.messages.create({ model, max_tokens: 6, tools: messagesTools, messages: [
      { role: 'user', content: CALL },
      { role: 'assistant', content: [use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }] });
    return { name: use.name, input: use.input, pieces, stop_reason: final.stop_reason, follow_up: follow.content[0].text };
  });
  await step('messages_thinking_stream', async () => {
    const stream = an.messages.stream({ model, max_tokens: 1030, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'think, then answer' }] });
    let thinking = '';
    stream.on('thinking', (piece) => { thinking += piece; });
    const final = await stream.finalMessage();
    return { thinking, kinds: final.content.map((block) => block.type) };
  });
  await step('chat', async () => {
    const { data, response } = await oa.chat.completions.create({ model, max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    return { content: data.choices[0].message.content, finish: data.choices[0].finish_reason, completion_tokens: data.usage.completion_tokens, translated: response.headers.get('x-quotaroute-translated') };
  });
  await step('chat_stream', async () => {
    const stream = await oa.chat.completions.create({ model, max_tokens: 6, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    let content = '';
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.choices.length) content += chunk.choices[0].delta.content ?? '';
      if (chunk.usage) usage = chunk.usage.completion_tokens;
    }
    return { content, completion_tokens: usage };
  });
  await step('chat_tool', async () => {
    const stream = oa.chat.completions.stream({ model, max_tokens: 6, tools: chatTools, messages: [{ role: 'user', content: CALL }] });
    let pieces = 0;
    stream.on('tool_calls.function.arguments.delta', () => { pieces += 1; });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0].message.tool_calls[0];
    const follow = await oa.chat.completions.create({ model, max_tokens: 6, tools: chatTools, messages: [
      { role: 'user', content: CALL },
      { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: call.function }] },
      { role: 'tool', tool_call_id: call.id, content: 'sunny' }] });
    return { name: call.function.name, arguments: JSON.parse(call.function.arguments), pieces, finish: final.choices[0].finish_reason, follow_up: follow.choices[0].message.content };
  });
}

if (Object.keys(errors).length) out.errors = errors;
console.log(JSON.stringify(out));
process.exit(Object.keys(errors).length ? 1 : 0);
