// Sends a WAV file to a gpurun server with the official openai client: a
// greedy chat completion whose user message is the text BEFORE, the WAV
// file at AUDIO_PATH as an input_audio part (base64, format wav), then the
// text AFTER, whole and streamed. Prints one JSON object {text, streamed, finish}.
// Usage: node audio.mjs BASE_URL MODEL AUDIO_PATH BEFORE AFTER MAX_TOKENS
import OpenAI from "openai";
import { readFileSync } from "node:fs";

const [baseURL, model, audioPath, before, after, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const data = readFileSync(audioPath).toString("base64");
const messages = [
  {
    role: "user",
    content: [
      { type: "text", text: before },
      { type: "input_audio", input_audio: { data, format: "wav" } },
      { type: "text", text: after },
    ],
  },
];
const params = { model, messages, temperature: 0, max_tokens: Number(maxTokens) };
const whole = await client.chat.completions.create(params);
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
console.log(JSON.stringify({ text: whole.choices[0].message.content, streamed, finish: whole.choices[0].finish_reason }));
