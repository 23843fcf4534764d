// Drives a gpurun server's tool calls with the official openai client
// (pipeline/serve's TestToolCallsOpenAIClient runs it): a chat completion
// that must call a tool, whole and streamed, then the conversation with
// the call answered, which ends in a final message. Prints one JSON object.
// Usage: node tools.mjs BASE_URL MODEL
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["c", "f"] } },
        required: ["city", "unit"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      description: "Adds two integers",
      parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] },
    },
  },
];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const params = { model, messages, tools, tool_choice: "required", temperature: 1, seed: 1 };

const whole = await client.chat.completions.create(params);
const msg = whole.choices[0].message;

// Streamed: the calls come as deltas, by index.
const stream = await client.chat.completions.create({ ...params, seed: 2, stream: true });
const streamed = [];
let streamFinish = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    for (const tc of c.delta?.tool_calls ?? []) {
      const cur = (streamed[tc.index] ??= { id: "", name: "", arguments: "" });
      if (tc.id) cur.id = tc.id;
      if (tc.function?.name) cur.name += tc.function.name;
      if (tc.function?.arguments) cur.arguments += tc.function.arguments;
    }
    if (c.finish_reason) streamFinish = c.finish_reason;
  }
}

// A named function is called.
const named = await client.chat.completions.create({ ...params, seed: 3, tool_choice: { type: "function", function: { name: "add" } } });

// Answer the call; the model then replies with a message.
const results = msg.tool_calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ temperature: 21 }) }));
const final = await client.chat.completions.create({
  model, tools, temperature: 0, max_tokens: 8,
  messages: [...messages, msg, ...results],
});

console.log(JSON.stringify({
  calls: msg.tool_calls,
  finish: whole.choices[0].finish_reason,
  streamed,
  streamFinish,
  named: named.choices[0].message.tool_calls,
  final: final.choices[0].message,
  finalFinish: final.choices[0].finish_reason,
  promptTokens: [whole.usage.prompt_tokens, final.usage.prompt_tokens],
}));
