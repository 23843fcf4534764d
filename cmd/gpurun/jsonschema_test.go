package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunJSONSchema: `run --json-schema FILE` prints JSON that validates
// against FILE's schema (github.com/santhosh-tekuri/jsonschema), sampled
// and greedy, "object" gives an object, and a schema outside the subset
// fails naming the keyword.
func TestRunJSONSchema(t *testing.T) {
	dir := testmodels.Dir(t)
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.model")
	schema := `{"type":"object","properties":{"title":{"type":"string","maxLength":20},"stars":{"enum":[1,2,3,4,5]},"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":2}},"required":["title","stars"]}`
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	val, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--temperature", "0"}, {"--seed", "3"}, {"--seed", "4", "--temperature", "1.5"}} {
		res := runJSON(t, append([]string{model, "--tokenizer", tok, "-p", "Once upon a time", "--max-cache", "512", "--max-tokens", "-1", "--json-schema", file}, args...)...)
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(res.Text))
		if err != nil {
			t.Errorf("%v: %q does not parse: %v", args, res.Text, err)
			continue
		}
		if err := val.Validate(v); err != nil {
			t.Errorf("%v: %q does not validate: %v", args, res.Text, err)
		}
		if res.Metrics.StopReason != "stop_token" {
			t.Errorf("%v: stop reason %q", args, res.Metrics.StopReason)
		}
	}
	res := runJSON(t, model, "--tokenizer", tok, "-p", "Once", "--max-cache", "512", "--max-tokens", "-1", "--json-schema", "object", "--seed", "5")
	if v, err := jsonschema.UnmarshalJSON(strings.NewReader(res.Text)); err != nil {
		t.Errorf("object: %q: %v", res.Text, err)
	} else if _, ok := v.(map[string]any); !ok {
		t.Errorf("object: %q is not an object", res.Text)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"type":"string","format":"email"}`), 0o644)
	if _, errOut, err := runCLI(t, "", "run", model, "--tokenizer", tok, "-p", "x", "--json-schema", bad); err == nil || !strings.Contains(errOut+err.Error(), `"format"`) {
		t.Errorf("unsupported keyword: %v, %s", err, errOut)
	}
}
