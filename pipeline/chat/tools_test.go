package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestToolsMatchJinja2: the published templates that carry tool formats
// render tools, assistant tool calls and tool results as jinja2 renders
// them when given what transformers is given (tools as a list of OpenAI
// tool objects, tool calls with their arguments as objects).
func TestToolsMatchJinja2(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"add","description":"Sum","parameters":{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["b","a"]}}}`),
	}
	call := ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"c"}`}
	msgs := []Message{{Role: System, Content: "Use tools."}, {Role: User, Content: "Weather in Paris?"},
		{Role: Assistant, ToolCalls: []ToolCall{call}}, {Role: Tool, Content: `{"temp": 21}`, ToolCallID: "call_1"}}
	// What transformers is given for the same messages.
	py := []map[string]any{
		{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Paris", "unit": "c"}}}}},
		{"role": "tool", "content": `{"temp": 21}`, "tool_call_id": "call_1"},
	}
	var jobs []job
	for _, tc := range []struct{ file, bos, eos string }{
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"},
		{"Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>"},
	} {
		src, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 4} {
			for _, gen := range []bool{true, false} {
				jobs = append(jobs, job{Template: string(src), Messages: msgs[:n], PyMessages: py[:n], Tools: tools, AddGenerationPrompt: gen,
					BOS: tc.bos, EOS: tc.eos, Now: "2026-01-02T03:04:05", name: tc.file})
			}
		}
	}
	compare(t, jobs)
}
