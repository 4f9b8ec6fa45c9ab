// Drives a running quotaroute node with the official @google/genai SDK (Gemini accounts).
// Usage: node node_genai.mjs BASE_URL CLIENT_KEY MODEL
// Prints one JSON object with what each call returned; exits non-zero on any SDK error.
import { GoogleGenAI, Type } from '@google/genai';

const [base, key, model] = process.argv.slice(2);
const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });
const out = {};

const answer = await ai.models.generateContent({ model, contents: 'hello' });
out.generate = {
  text: answer.text,
  prompt_tokens: answer.usageMetadata.promptTokenCount,
  output_tokens: answer.usageMetadata.candidatesTokenCount,
};

const pieces = [];
let usage = null;
for await (const chunk of await ai.models.generateContentStream({ model, contents: 'hello' })) {
  pieces.push(chunk.text ?? '');
  if (chunk.usageMetadata) usage = chunk.usageMetadata.candidatesTokenCount;
}
out.stream = { text: pieces.join(''), chunks: pieces.length, output_tokens: usage };

const called = await ai.models.generateContent({
  model,
  contents: 'mock-tool-call:lookup {"q":"x"}',
  config: {
    tools: [{
      functionDeclarations: [{
        name: 'lookup',
        description: 'Looks a word up.',
        parameters: { type: Type.OBJECT, properties: { q: { type: Type.STRING } }, required: ['q'] },
      }],
    }],
  },
});
const calls = called.functionCalls ?? [];
out.tool = { name: calls[0]?.name ?? null, args: calls[0]?.args ?? null };

const counted = await ai.models.countTokens({ model, contents: 'hello there' });
out.count_tokens = counted.totalTokens;

console.log(JSON.stringify(out));
