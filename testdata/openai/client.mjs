// Drives a gpurun serve with the official openai client (cmd/gpurun's
// TestServeOpenAIClient runs it): lists the models, then asks for one chat
// completion whole and streamed, greedy. Prints one JSON object.
// Usage: node client.mjs BASE_URL MODEL API_KEY PROMPT MAX_TOKENS
import OpenAI from "openai";

const [baseURL, model, apiKey, prompt, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const messages = [{ role: "user", content: prompt }];
const params = { model, messages, temperature: 0, max_tokens: Number(maxTokens) };

const models = [];
for await (const m of client.models.list()) models.push(m.id);

const whole = await client.chat.completions.create(params);

const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
let streamed = "";
let finish = null;
let streamUsage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) streamUsage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}

let badModel = null;
try {
  await client.chat.completions.create({ ...params, model: "no-such-model" });
} catch (e) {
  badModel = { status: e.status, code: e.code ?? null };
}

console.log(JSON.stringify({
  models,
  text: whole.choices[0].message.content,
  finish: whole.choices[0].finish_reason,
  usage: whole.usage,
  streamed,
  streamFinish: finish,
  streamUsage,
  chunks,
  badModel,
}));
