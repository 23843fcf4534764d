// Drives gpurun serve's ollama API with the ollama npm client
// (cmd/gpurun's TestServeOllamaClient runs it), greedy: a chat whose
// thinking (the server's --reasoning-budget) comes apart from the answer,
// whole and streamed; the same with think false; a forced tool call
// (tool_choice, gpurun's extension), whole and streamed, and the
// conversation with its result; a reply in a JSON schema; a raw generate;
// the model listings; an unknown model; and, given a second server's URL,
// embeddings. Prints one JSON object.
// Usage: node client.mjs BASE_URL MODEL API_KEY [EMBED_URL EMBED_MODEL]
import { Ollama } from "ollama";

const [host, model, apiKey, embedHost, embedModel] = process.argv.slice(2);
const ollama = new Ollama({ host, headers: { Authorization: `Bearer ${apiKey}` } });

const messages = [
  { role: "system", content: "You tell short stories." },
  { role: "user", content: "Once upon a time" },
];
const options = { temperature: 0, num_predict: 24 };

const whole = await ollama.chat({ model, messages, think: true, options, keep_alive: "10m" });

// Streamed (NDJSON): the parts as they come.
let thinking = "", content = "", parts = 0, last = null;
for await (const part of await ollama.chat({ model, messages, think: true, options, stream: true })) {
  parts++;
  thinking += part.message.thinking ?? "";
  content += part.message.content;
  last = part;
}

const noThink = await ollama.chat({ model, messages, think: false, options });

// A forced tool call, whole and streamed, then answered.
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] },
  },
}];
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const toolParams = { model, messages: ask, tools, tool_choice: "required", think: false, options: { temperature: 0, num_predict: 200 } };
const call = await ollama.chat(toolParams);
const streamedCalls = [];
for await (const part of await ollama.chat({ ...toolParams, stream: true })) {
  streamedCalls.push(...(part.message.tool_calls ?? []));
}
const answered = await ollama.chat({
  model, tools, think: false, options: { temperature: 0, num_predict: 8 },
  messages: [...ask, call.message, { role: "tool", content: "21 degrees", tool_name: "get_weather" }],
});

const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 } }, required: ["name"] };
const structured = await ollama.chat({ model, messages: ask, format: schema, think: false, options: { temperature: 0, num_predict: 40 } });

const generated = await ollama.generate({ model, prompt: "Once upon a time", raw: true, options: { temperature: 0, num_predict: 12 } });

const list = await ollama.list();
const ps = await ollama.ps();
const version = await ollama.version();
const show = await ollama.show({ model });

let badModel = null;
try {
  await ollama.chat({ model: "no-such-model", messages });
} catch (e) {
  badModel = { status: e.status_code, message: e.error, name: e.name };
}

let embed = null;
if (embedHost) {
  const client = new Ollama({ host: embedHost });
  const res = await client.embed({ model: embedModel, input: ["once upon a time", "a cat sat"] });
  embed = { model: res.model, embeddings: res.embeddings, count: res.prompt_eval_count };
}

console.log(JSON.stringify({
  whole: { thinking: whole.message.thinking ?? null, content: whole.message.content, done: whole.done, reason: whole.done_reason, evalCount: whole.eval_count, promptCount: whole.prompt_eval_count },
  streamed: { thinking, content, parts, done: last?.done, reason: last?.done_reason, evalCount: last?.eval_count },
  noThink: { thinking: noThink.message.thinking ?? null, content: noThink.message.content },
  call: { calls: call.message.tool_calls ?? [], content: call.message.content },
  streamedCalls,
  answered: { content: answered.message.content, calls: answered.message.tool_calls ?? [], promptCount: answered.prompt_eval_count, callPromptCount: call.prompt_eval_count },
  structured: structured.message.content,
  generated: { response: generated.response, context: generated.context?.length ?? 0, done: generated.done },
  list: list.models.map((m) => m.name),
  ps: ps.models.map((m) => ({ name: m.name, expires: String(m.expires_at) })),
  version: version.version,
  show: { capabilities: show.capabilities, arch: show.model_info?.["general.architecture"] ?? null, template: show.template.length },
  badModel,
  embed,
}));
