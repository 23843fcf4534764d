// Reads a thinking model's reasoning apart from its answer with the
// official openai client (pipeline/serve's TestReasoningOpenAIClient runs
// it): a greedy chat completion with a thinking budget (reasoning_budget,
// an extension passed as an extra body field), whole and streamed.
// Prints one JSON object.
// Usage: node reasoning.mjs BASE_URL MODEL
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const params = {
  model, temperature: 0, max_tokens: 40,
  messages: [{ role: "user", content: "Once upon a time" }],
  reasoning_budget: 6,
};
const whole = await client.chat.completions.create(params);
const stream = await client.chat.completions.create({ ...params, stream: true });
let reasoning = "";
let content = "";
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    reasoning += c.delta?.reasoning_content ?? "";
    content += c.delta?.content ?? "";
  }
}
const msg = whole.choices[0].message;
console.log(JSON.stringify({ reasoning: msg.reasoning_content, content: msg.content, streamedReasoning: reasoning, streamedContent: content }));
