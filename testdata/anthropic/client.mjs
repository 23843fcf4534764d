// Drives gpurun serve's Messages API with the official Anthropic client
// (cmd/gpurun's TestServeAnthropicClient runs it), greedy: a reply with
// thinking (a budget) whole and streamed, the token count of its prompt,
// a forced tool call whole and streamed, the conversation with the call
// answered, and an unknown model; first the model list. Prints one JSON object.
// Usage: node client.mjs BASE_URL MODEL API_KEY
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

const system = "You tell short stories.";
const messages = [{ role: "user", content: "Once upon a time" }];
const params = {
  model, system, messages, max_tokens: 24, temperature: 0,
  thinking: { type: "enabled", budget_tokens: 6 },
};

const blocksOf = (msg) => ({
  thinking: msg.content.filter((b) => b.type === "thinking").map((b) => b.thinking),
  text: msg.content.filter((b) => b.type === "text").map((b) => b.text),
  types: msg.content.map((b) => b.type),
});

const models = [];
for await (const m of client.models.list()) models.push(m.id);

const whole = await client.messages.create(params);

// Streamed: the events as they come, and the message the SDK assembles.
const stream = client.messages.stream(params);
const events = [];
let thinkingDeltas = "";
let textDeltas = "";
for await (const ev of stream) {
  events.push(ev.type === "content_block_start" ? `${ev.type}:${ev.content_block.type}` : ev.type);
  if (ev.type === "content_block_delta" && ev.delta.type === "thinking_delta") thinkingDeltas += ev.delta.thinking;
  if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") textDeltas += ev.delta.text;
}
const streamed = await stream.finalMessage();

const counted = await client.messages.countTokens({ model, system, messages, thinking: params.thinking });

// A forced tool call, whole and streamed, then answered.
const tools = [{
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] },
}];
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const toolParams = { model, max_tokens: 200, temperature: 0, tools, tool_choice: { type: "any" }, messages: ask };
const call = await client.messages.create(toolParams);
const callStream = client.messages.stream(toolParams);
const streamedCall = await callStream.finalMessage();
const use = call.content.find((b) => b.type === "tool_use");
const answered = await client.messages.create({
  model, max_tokens: 8, temperature: 0, tools,
  messages: [...ask, { role: "assistant", content: call.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use?.id ?? "none", content: "21 degrees" }] }],
});

let badModel = null;
try {
  await client.messages.create({ ...params, model: "no-such-model" });
} catch (e) {
  badModel = { status: e.status, type: e.error?.error?.type, name: e.constructor.name };
}

console.log(JSON.stringify({
  models,
  whole: { ...blocksOf(whole), stop: whole.stop_reason, usage: whole.usage, role: whole.role, type: whole.type },
  streamed: { ...blocksOf(streamed), stop: streamed.stop_reason, usage: streamed.usage },
  events, thinkingDeltas, textDeltas,
  counted: counted.input_tokens,
  call: { stop: call.stop_reason, uses: call.content.filter((b) => b.type === "tool_use") },
  streamedCall: { stop: streamedCall.stop_reason, uses: streamedCall.content.filter((b) => b.type === "tool_use") },
  answered: { stop: answered.stop_reason, types: answered.content.map((b) => b.type), inputTokens: answered.usage.input_tokens },
  callInputTokens: call.usage.input_tokens,
  badModel,
}));
