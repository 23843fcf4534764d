package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

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
