package chat

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/gpurun/gpurun/pipeline/constrain"
)

// ToolFormat is how a model writes a tool call, told by its template.
type ToolFormat int

const (
	// NoTools: the template writes no tool calls.
	NoTools ToolFormat = iota
	// ToolsLlama3: the reply is the JSON object {"name": NAME,
	// "parameters": ARGS} (Llama 3.1, 3.2).
	ToolsLlama3
	// ToolsHermes: each call is <tool_call>\n{"name": NAME, "arguments":
	// ARGS}\n</tool_call> (Qwen 2.5, Qwen 3, Hermes).
	ToolsHermes
	// ToolsMistral: each call is [TOOL_CALLS]NAME[ARGS]ARGS, optionally
	// with [CALL_ID]ID before [ARGS] (Mistral Small 3.2; call ids are 9
	// letters and digits).
	ToolsMistral
)

// ToolFormat tells the template's tool-call format from its source.
func (t *Template) ToolFormat() ToolFormat {
	switch {
	case strings.Contains(t.source, "[TOOL_CALLS]"):
		return ToolsMistral
	case strings.Contains(t.source, "<tool_call>"):
		return ToolsHermes
	case strings.Contains(t.source, `"parameters": `) && strings.Contains(t.source, "tool_call.name"):
		return ToolsLlama3
	}
	return NoTools
}

// ToolGrammar is the grammar of one call of one of tools in format f, for
// generation forced to call a tool.
func ToolGrammar(f ToolFormat, tools []constrain.Tool) (*constrain.Grammar, error) {
	switch f {
	case ToolsHermes:
		return constrain.ToolCall(tools, "<tool_call>\n", "arguments", "\n</tool_call>")
	case ToolsMistral:
		return constrain.ToolCallLayout(tools, "[TOOL_CALLS]", func(name string) string { return name + "[ARGS]" }, "", "")
	}
	return constrain.ToolCall(tools, "", "parameters", "")
}

// ParseToolCalls finds the tool calls of a reply in format f: the calls,
// with their arguments as compact JSON text, and the text outside them.
// A reply without a well-formed call is all content.
func ParseToolCalls(f ToolFormat, reply string) (content string, calls []ToolCall) {
	switch f {
	case ToolsHermes:
		rest := reply
		var out strings.Builder
		for {
			i := strings.Index(rest, "<tool_call>")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], "</tool_call>")
			if j < 0 {
				break
			}
			c, ok := parseCall(rest[i+len("<tool_call>"):i+j], "arguments")
			if !ok {
				break
			}
			out.WriteString(rest[:i])
			calls = append(calls, c)
			rest = rest[i+j+len("</tool_call>"):]
		}
		if len(calls) == 0 {
			return reply, nil
		}
		out.WriteString(rest)
		return strings.TrimSpace(out.String()), calls
	case ToolsMistral:
		i := strings.Index(reply, "[TOOL_CALLS]")
		if i < 0 {
			return reply, nil
		}
		for _, seg := range strings.Split(reply[i+len("[TOOL_CALLS]"):], "[TOOL_CALLS]") {
			name, args, ok := strings.Cut(seg, "[ARGS]")
			name, _, _ = strings.Cut(name, "[CALL_ID]")
			var buf bytes.Buffer
			if !ok || name == "" || !strings.HasPrefix(strings.TrimSpace(args), "{") || json.Compact(&buf, []byte(strings.TrimSpace(args))) != nil {
				return reply, nil
			}
			calls = append(calls, ToolCall{Name: name, Arguments: buf.String()})
		}
		return strings.TrimSpace(reply[:i]), calls
	case ToolsLlama3:
		text := strings.TrimPrefix(strings.TrimSpace(reply), "<|python_tag|>")
		if c, ok := parseCall(text, "parameters"); ok {
			return "", []ToolCall{c}
		}
	}
	return reply, nil
}

// parseCall reads {"name": NAME, argsKey: {...}} (or "arguments").
func parseCall(text, argsKey string) (ToolCall, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(strings.TrimSpace(text)), &obj) != nil {
		return ToolCall{}, false
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return ToolCall{}, false
	}
	args, ok := obj[argsKey]
	if !ok {
		args, ok = obj["arguments"]
	}
	var buf bytes.Buffer
	if !ok || len(args) == 0 || args[0] != '{' || json.Compact(&buf, args) != nil {
		return ToolCall{}, false
	}
	return ToolCall{Name: name, Arguments: buf.String()}, true
}
