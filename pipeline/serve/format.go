package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/gpurun/gpurun/pipeline/chat"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// anyObject is the grammar of response_format json_object, shared so that
// its token masks are computed once.
var anyObject = constrain.JSONObject()

// grammarCache keeps the compiled grammars of recent json_schema formats,
// so that a schema sent again reuses its grammar and the token masks
// cached with it.
type grammarCache struct {
	mu sync.Mutex
	m  map[string]*constrain.Grammar
}

const maxGrammars = 64

// get returns the grammar of a response_format: nil for none or text.
func (c *grammarCache) get(f *responseFormat) (*constrain.Grammar, *apiError) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return anyObject, nil
	case "json_schema":
	default:
		return nil, badRequest("response_format.type", "invalid_value",
			fmt.Sprintf("response_format.type %q: want text, json_object or json_schema", f.Type))
	}
	if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 || string(f.JSONSchema.Schema) == "null" {
		return nil, badRequest("response_format.json_schema.schema", "invalid_value", "response_format.json_schema.schema is required")
	}
	var key bytes.Buffer
	if err := json.Compact(&key, f.JSONSchema.Schema); err != nil {
		return nil, badRequest("response_format.json_schema.schema", "invalid_value", "response_format.json_schema.schema: "+err.Error())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.m[key.String()]; ok {
		return g, nil
	}
	g, err := constrain.Compile(key.Bytes())
	if err != nil {
		code := "invalid_value"
		if errors.Is(err, constrain.ErrUnsupported) {
			code = "unsupported_schema"
		}
		return nil, badRequest("response_format.json_schema.schema", code, "response_format.json_schema.schema: "+err.Error())
	}
	if c.m == nil || len(c.m) >= maxGrammars {
		c.m = map[string]*constrain.Grammar{}
	}
	c.m[key.String()] = g
	return g, nil
}

// tools returns the grammar of a forced tool call (tool_choice required,
// or a named function) in the template's format: nil when the model may
// answer freely.
func (c *grammarCache) tools(spec *toolSpec, f chat.ToolFormat) (*constrain.Grammar, *apiError) {
	if spec == nil || spec.choice == "none" || spec.choice == "auto" {
		return nil, nil
	}
	if f == chat.NoTools {
		return nil, badRequest("tool_choice", "unsupported_value", "tool_choice "+spec.choice+": the model's chat template writes no tool calls this server reads")
	}
	tools := spec.tools
	if spec.choice == "function" {
		for _, t := range spec.tools {
			if t.Name == spec.name {
				tools = []constrain.Tool{t}
			}
		}
	}
	var key bytes.Buffer
	fmt.Fprintf(&key, "tools %d\x00", f)
	for _, t := range tools {
		key.WriteString(t.Name + "\x00")
		json.Compact(&key, t.Parameters)
		key.WriteByte(0)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.m[key.String()]; ok {
		return g, nil
	}
	g, err := chat.ToolGrammar(f, tools)
	if err != nil {
		code := "invalid_value"
		if errors.Is(err, constrain.ErrUnsupported) {
			code = "unsupported_schema"
		}
		return nil, badRequest("tools", code, "tools: "+err.Error())
	}
	if c.m == nil || len(c.m) >= maxGrammars {
		c.m = map[string]*constrain.Grammar{}
	}
	c.m[key.String()] = g
	return g, nil
}
