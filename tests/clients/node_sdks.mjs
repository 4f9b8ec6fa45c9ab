// Drives a running quotaroute node with the official Node SDKs: openai-node and
// @anthropic-ai/sdk (versions pinned in package.json next to this file).
//
// Usage: node node_sdks.mjs BASE_URL CLIENT_KEY
// Prints one JSON object with what each call returned (text, token counts, ids, and the
// x-quotaroute-connection that served, where the SDK exposes the response headers); exits
// non-zero if any call failed (the object then holds an `errors` map too).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [base, key] = process.argv.slice(2);
if (!base || !key) {
  console.error('usage: node node_sdks.mjs BASE_URL CLIENT_KEY');
  process.exit(2);
}

const out = {};
const errors = {};
async function step(name, fn) {
  try {
    out[name] = await fn();
  } catch (error) {
    errors[name] = `${error?.constructor?.name ?? 'Error'}: ${error?.message ?? error}`;
    console.error(`${name} failed:`, error);
  }
}
const served = (response) => response.headers.get('x-quotaroute-connection');
const user = [{ role: 'user', content: 'say pong' }];

const oa = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0, timeout: 20_000 });
const an = new Anthropic({ apiKey: key, baseURL: base, maxRetries: 0, timeout: 20_000 });

await step('openai_chat', async () => {
  const { data, response } = await oa.chat.completions
    .create({ model: 'team', messages: user })
    .withResponse();
  return {
    id: data.id,
    content: data.choices[0].message.content,
    finish_reason: data.choices[0].finish_reason,
    prompt_tokens: data.usage.prompt_tokens,
    completion_tokens: data.usage.completion_tokens,
    connection: served(response),
  };
});

await step('openai_chat_stream', async () => {
  const { data: stream, response } = await oa.chat.completions
    .create({ model: 'team', messages: user, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  let content = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    chunks += 1;
    const choice = chunk.choices[0];
    if (choice?.delta?.content) content += choice.delta.content;
    if (choice?.finish_reason) finish = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  return {
    content,
    chunks,
    finish_reason: finish,
    completion_tokens: usage?.completion_tokens ?? null,
    connection: served(response),
  };
});

let responseId = null;
await step('openai_responses', async () => {
  const { data, response } = await oa.responses
    .create({ model: 'team', input: 'say pong' })
    .withResponse();
  responseId = data.id;
  return {
    id: data.id,
    status: data.status,
    text: data.output_text,
    input_tokens: data.usage?.input_tokens ?? null,
    output_tokens: data.usage?.output_tokens ?? null,
    connection: served(response),
  };
});

await step('openai_responses_stream', async () => {
  const { data: stream, response } = await oa.responses
    .create({ model: 'team', input: 'say pong', stream: true })
    .withResponse();
  const types = [];
  let text = '';
  let completed = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') completed = event.response;
  }
  return {
    text,
    events: types.length,
    event_types: [...new Set(types)],
    completed_id: completed?.id ?? null,
    output_tokens: completed?.usage?.output_tokens ?? null,
    connection: served(response),
  };
});

await step('openai_responses_retrieve', async () => {
  if (!responseId) throw new Error('responses.create gave no id');
  const { data, response } = await oa.responses.retrieve(responseId).withResponse();
  return { id: data.id, status: data.status, text: data.output_text, connection: served(response) };
});

await step('openai_model', async () => {
  const model = await oa.models.retrieve('team');
  return { id: model.id, object: model.object, owned_by: model.owned_by };
});

await step('openai_embeddings', async () => {
  // openai-node asks for base64 unless told otherwise; ask for floats so the values are
  // checkable whatever the upstream does with encoding_format.
  const { data, response } = await oa.embeddings
    .create({ model: 'team', input: 'hello', encoding_format: 'float' })
    .withResponse();
  const embedding = data.data[0].embedding;
  return {
    count: data.data.length,
    dimensions: embedding.length,
    numeric: embedding.every((x) => typeof x === 'number' && Number.isFinite(x)),
    prompt_tokens: data.usage?.prompt_tokens ?? null,
    connection: served(response),
  };
});

await step('openai_embeddings_default', async () => {
  // The SDK's default: it sends encoding_format "base64" and decodes a base64 string of
  // little-endian float32s. Recorded, not asserted (the mock answers floats whatever it is asked).
  const data = await oa.embeddings.create({ model: 'team', input: 'hello' });
  return { count: data.data.length, dimensions: data.data[0].embedding.length };
});

await step('anthropic_message', async () => {
  const { data, response } = await an.messages
    .create({ model: 'claude', max_tokens: 16, messages: user })
    .withResponse();
  return {
    id: data.id,
    text: data.content.map((block) => block.text ?? '').join(''),
    stop_reason: data.stop_reason,
    input_tokens: data.usage.input_tokens,
    output_tokens: data.usage.output_tokens,
    connection: served(response),
  };
});

await step('anthropic_stream', async () => {
  const { data: stream, response } = await an.messages
    .create({ model: 'claude', max_tokens: 16, messages: user, stream: true })
    .withResponse();
  const types = [];
  let text = '';
  let inputTokens = null;
  let outputTokens = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'message_start') inputTokens = event.message.usage.input_tokens;
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    if (event.type === 'message_delta') outputTokens = event.usage.output_tokens;
  }
  return {
    text,
    events: types.length,
    event_types: [...new Set(types)],
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    connection: served(response),
  };
});

await step('anthropic_stream_helper', async () => {
  const final = await an.messages.stream({ model: 'claude', max_tokens: 16, messages: user }).finalMessage();
  return {
    text: final.content.map((block) => block.text ?? '').join(''),
    output_tokens: final.usage.output_tokens,
  };
});

await step('anthropic_count_tokens', async () => {
  const { data, response } = await an.messages
    .countTokens({ model: 'claude', messages: user })
    .withResponse();
  return { input_tokens: data.input_tokens, connection: served(response) };
});

await step('anthropic_model', async () => {
  const model = await an.models.retrieve('claude');
  return { id: model.id, type: model.type, display_name: model.display_name };
});

const ok = Object.keys(errors).length === 0;
if (!ok) out.errors = errors;
console.log(JSON.stringify(out));
process.exitCode = ok ? 0 : 1;
