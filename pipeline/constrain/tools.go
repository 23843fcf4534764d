package constrain

import (
	"encoding/json"
	"fmt"
)

// Tool is a function a model may call: its name and the JSON schema of its
// arguments (nil: any object).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolCall is the grammar of one call of one of tools, written as
// prefix + {"name":"NAME",ARGS_KEY:ARGUMENTS} + suffix, the arguments
// valid against the tool's parameters (Llama 3.1: no prefix or suffix,
// ARGS_KEY "parameters"; Hermes and Qwen: "<tool_call>\n", "arguments",
// "\n</tool_call>").
func ToolCall(tools []Tool, prefix, argsKey, suffix string) (*Grammar, error) {
	head := func(name string) string {
		return `{"name":` + string(mustJSON(name)) + `,` + string(mustJSON(argsKey)) + `:`
	}
	return ToolCallLayout(tools, prefix, head, "}", suffix)
}

// ToolCallLayout is ToolCall for any layout: prefix, then for the tool
// called head(name), its arguments and tail, then suffix (Mistral:
// "[TOOL_CALLS]", name + "[ARGS]", "", ""). The heads of two tools must
// differ before either ends.
func ToolCallLayout(tools []Tool, prefix string, head func(name string) string, tail, suffix string) (*Grammar, error) {
	if len(tools) == 0 || len(tools) > maxEnum {
		return nil, fmt.Errorf("%w: %d tools, want 1 to %d", ErrSchema, len(tools), maxEnum)
	}
	g := &Grammar{}
	sw := &node{kind: kSwitch}
	keys := &node{kind: kLiteral}
	seen := map[string]bool{}
	for _, t := range tools {
		if t.Name == "" || seen[t.Name] {
			return nil, fmt.Errorf("%w: tool name %q empty or repeated", ErrSchema, t.Name)
		}
		seen[t.Name] = true
		params := g.anyNode(DefaultMaxDepth - 1).obj
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
			var v any
			if err := json.Unmarshal(t.Parameters, &v); err != nil {
				return nil, fmt.Errorf("%w: tool %s: %w", ErrSchema, t.Name, err)
			}
			var err error
			if params, err = g.compile(v, "/tools/"+t.Name); err != nil {
				return nil, err
			}
		}
		keys.lits = append(keys.lits, []byte(head(t.Name)))
		parts := []*node{params}
		if tail != "" {
			parts = append(parts, g.literal(tail))
		}
		sw.next = append(sw.next, g.newNode(&node{kind: kSeq, parts: parts}))
	}
	sw.keys = g.newNode(keys)
	g.newNode(sw)
	var parts []*node
	if prefix != "" {
		parts = append(parts, g.literal(prefix))
	}
	parts = append(parts, sw)
	if suffix != "" {
		parts = append(parts, g.literal(suffix))
	}
	g.root = g.newNode(&node{kind: kSeq, parts: parts})
	return g, nil
}

func (g *Grammar) literal(s string) *node {
	return g.newNode(&node{kind: kLiteral, lits: [][]byte{[]byte(s)}})
}
