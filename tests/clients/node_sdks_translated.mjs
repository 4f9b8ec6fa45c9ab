// Drives a running quotaroute node with the official Node SDKs across formats (behaviour §14):
// openai-node (chat and responses) against the Anthropic-format combo `claude`, and
// @anthropic-ai/sdk against the OpenAI-format combo `team`, streaming and not, with tool calls
// (the mock calls a tool when the prompt says `mock-tool-call:NAME {args}`).
//
// Usage: node node_sdks_translated.mjs BASE_URL CLIENT_KEY
// Prints one JSON object of what each SDK parsed; exits non-zero if any call failed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [base, key] = process.argv.slice(2);
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
const CALL = 'mock-tool-call:get_weather {"city":"Paris"}';
const chatTools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

await step('chat', async () => {
  const data = await oa.chat.completions.create({ model: 'claude', max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] });
  return { content: data.choices[0].message.content, completion_tokens: data.usage.completion_tokens, finish: data.choices[0].finish_reason };
});

await step('chat_stream_tool', async () => {
  const stream = oa.chat.completions.stream({ model: 'claude', max_tokens: 6, tools: chatTools, messages: [{ role: 'user', content: CALL }] });
  let pieces = 0;
  stream.on('tool_calls.function.arguments.delta', () => { pieces += 1; });
  const final = await stream.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  return { name: call.function.name, arguments: JSON.parse(call.function.arguments), pieces, finish: final.choices[0].finish_reason };
});

await step('responses_stream', async () => {
  const stream = oa.responses.stream({ model: 'claude', max_output_tokens: 6, input: 'hi' });
  let deltas = 0;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') deltas += 1;
  }
  const final = await stream.finalResponse();
  return { text: final.output_text, deltas, output_tokens: final.usage.output_tokens, store: final.store };
});

await step('responses_tool', async () => {
  const data = await oa.responses.create({ model: 'claude', max_output_tokens: 6, input: CALL, tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }] });
  const call = data.output.find((item) => item.type === 'function_call');
  return { name: call.name, arguments: JSON.parse(call.arguments) };
});

await step('messages', async () => {
  const data = await an.messages.create({ model: 'team', max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] });
  return { text: data.content[0].text, stop_reason: data.stop_reason, output_tokens: data.usage.output_tokens };
});

await step('messages_stream_tool', async () => {
  const stream = an.messages.stream({ model: 'team', max_tokens: 6, tools: [{ name: 'get_weather', input_schema: { type: 'object' } }], messages: [{ role: 'user', content: CALL }] });
  let pieces = 0;
  stream.on('inputJson', () => { pieces += 1; });
  const final = await stream.finalMessage();
  const use = final.content.find((block) => block.type === 'tool_use');
  return { name: use.name, input: use.input, pieces, stop_reason: final.stop_reason };
});

await step('messages_error', async () => {
  try {
    await an.messages.create({ model: 'team', max_tokens: 6, tools: [{ type: 'code_execution_20250522', name: 'code_execution' }], messages: [{ role: 'user', content: 'hi' }] });
    return { status: 200 };
  } catch (error) {
    return { status: error.status, code: error.error?.error?.code };
  }
});

// The same long prompt twice: affinity keeps it on one account, whose cache the second reads;
// each SDK sees the cache read in its own terms.
const LONG = 'You answer questions about the weather, briefly. '.repeat(120);
await step('cached', async () => {
  const chat = [];
  const messages = [];
  for (let i = 0; i < 2; i++) {
    const c = await oa.chat.completions.create({ model: 'claude', max_tokens: 6, messages: [{ role: 'system', content: LONG }, { role: 'user', content: 'and today?' }] });
    chat.push(c.usage.prompt_tokens_details.cached_tokens);
    const m = await an.messages.create({ model: 'team', max_tokens: 6, system: LONG, messages: [{ role: 'user', content: 'and today?' }] });
    messages.push(m.usage.cache_read_input_tokens);
  }
  return { chat, messages };
});

if (Object.keys(errors).length) out.errors = errors;
console.log(JSON.stringify(out));
process.exit(Object.keys(errors).length ? 1 : 0);
