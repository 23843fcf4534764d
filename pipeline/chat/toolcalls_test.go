package chat

import (
	"encoding/json"
	"testing"
)

// TestParseToolCalls: replies in each template's tool-call syntax (as the
// Llama 3.1 and Qwen templates write an assistant's calls) become calls
// with compact arguments; anything else stays content.
func TestParseToolCalls(t *testing.T) {
	for _, tc := range []struct {
		f       ToolFormat
		reply   string
		content string
		calls   []ToolCall
	}{
		{ToolsLlama3, `{"name": "get_weather", "parameters": {"city": "Paris", "n": [1, 2]}}`, "", []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris","n":[1,2]}`}}},
		{ToolsLlama3, `<|python_tag|>{"name": "f", "arguments": {}}`, "", []ToolCall{{Name: "f", Arguments: `{}`}}},
		{ToolsLlama3, `The weather is fine.`, `The weather is fine.`, nil},
		{ToolsLlama3, `{"name": "f", "parameters": "x"}`, `{"name": "f", "parameters": "x"}`, nil},
		{ToolsHermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", "", []ToolCall{{Name: "add", Arguments: `{"a":1,"b":2}`}}},
		{ToolsHermes, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": true}}\n</tool_call>", "Let me check.",
			[]ToolCall{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x":true}`}}},
		{ToolsHermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}", nil},
		{ToolsHermes, "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", nil},
		{ToolsMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, "", []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{ToolsMistral, `Sure.[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{}[TOOL_CALLS]b[ARGS]{"x": 1}`, "Sure.", []ToolCall{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x":1}`}}},
		{ToolsMistral, `[TOOL_CALLS]a[ARGS]{"x": `, `[TOOL_CALLS]a[ARGS]{"x": `, nil},
		{NoTools, `{"name": "f", "parameters": {}}`, `{"name": "f", "parameters": {}}`, nil},
	} {
		content, calls := ParseToolCalls(tc.f, tc.reply)
		if content != tc.content || len(calls) != len(tc.calls) {
			t.Errorf("%q: content %q, calls %+v; want %q, %+v", tc.reply, content, calls, tc.content, tc.calls)
			continue
		}
		for i := range calls {
			if calls[i] != tc.calls[i] {
				t.Errorf("%q: call %d %+v, want %+v", tc.reply, i, calls[i], tc.calls[i])
			}
		}
	}
}

// FuzzParseToolCalls: any reply parses without panicking, and every call
// found has a name and arguments that are a JSON object.
func FuzzParseToolCalls(f *testing.F) {
	f.Add(`{"name": "f", "parameters": {"a": 1}}`)
	f.Add("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>")
	f.Add("<tool_call><tool_call></tool_call>")
	f.Add(`x[TOOL_CALLS]a[CALL_ID]123456789[ARGS]{"b": [1]}[TOOL_CALLS]`)
	f.Fuzz(func(t *testing.T, reply string) {
		for _, fm := range []ToolFormat{ToolsLlama3, ToolsHermes, ToolsMistral} {
			_, calls := ParseToolCalls(fm, reply)
			for _, c := range calls {
				var obj map[string]any
				if c.Name == "" || json.Unmarshal([]byte(c.Arguments), &obj) != nil {
					t.Fatalf("%q: call %+v", reply, c)
				}
			}
		}
	})
}
