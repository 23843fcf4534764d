package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/pipeline"
)

// TestResponseFormat: chat and text completions with response_format
// json_schema (whole and streamed) and json_object return content that
// parses and validates (github.com/santhosh-tekuri/jsonschema), at a
// temperature and at 0; a schema outside the subset gets a 400 naming
// the keyword.
func TestResponseFormat(t *testing.T) {
	_, ts := newServer(t, Config{Model: storiesModelWith(t, pipeline.Options{MaxCache: 1024, Slots: 2})})
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"},"pets":{"type":"array","items":{"enum":["cat","dog"]},"maxItems":3}},"required":["name","age","pets"]}`
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
	check := func(what, content string, validate bool) {
		t.Helper()
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", what, content, err)
			return
		}
		if _, ok := v.(map[string]any); !ok {
			t.Errorf("%s: %q is not an object", what, content)
		}
		if validate {
			if err := val.Validate(v); err != nil {
				t.Errorf("%s: %q does not validate: %v", what, content, err)
			}
		}
	}
	msgs := `[{"role":"user","content":"Tell me about a person."}]`
	for _, temp := range []string{"0", "1"} {
		for seed := range 3 {
			for _, format := range []string{
				fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"person","schema":%s,"strict":true}}`, schema),
				`{"type":"json_object"}`,
			} {
				validate := strings.Contains(format, "json_schema")
				body := fmt.Sprintf(`{"model":%q,"messages":%s,"temperature":%s,"seed":%d,"response_format":%s}`, modelID, msgs, temp, seed, format)
				resp, data := post(t, ts.URL+"/v1/chat/completions", body)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				var got completion
				if err := json.Unmarshal(data, &got); err != nil {
					t.Fatal(err)
				}
				if r := got.Choices[0].FinishReason; r == nil || *r != "stop" {
					t.Errorf("finish_reason %v, want stop", r)
				}
				check("chat "+format, got.Choices[0].Message.Content, validate)
				// Streamed: the deltas join into the same kind of document.
				resp2, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(strings.TrimSuffix(body, "}")+`,"stream":true}`))
				if err != nil {
					t.Fatal(err)
				}
				var text strings.Builder
				for _, ch := range readEvents(t, resp2.Body) {
					if len(ch.Choices) == 1 {
						text.WriteString(ch.Choices[0].Delta.Content)
					}
				}
				resp2.Body.Close()
				check("streamed "+format, text.String(), validate)
				// Text completions take it too.
				resp, data = post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Once","temperature":%s,"seed":%d,"response_format":%s}`, modelID, temp, seed, format))
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				if err := json.Unmarshal(data, &got); err != nil {
					t.Fatal(err)
				}
				check("completion "+format, got.Choices[0].Text, validate)
			}
		}
	}
	for _, tc := range []struct{ format, want string }{
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a+"}}}`, `"pattern"`},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"oneOf":[{"type":"string"}]}}}`, `"oneOf"`},
		{`{"type":"json_schema","json_schema":{"name":"x"}}`, "schema is required"},
		{`{"type":"yaml"}`, `"yaml"`},
	} {
		resp, data := post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"response_format":%s}`, modelID, msgs, tc.format))
		if resp.StatusCode != 400 || !bytes.Contains(data, []byte(strings.ReplaceAll(tc.want, `"`, `\"`))) {
			t.Errorf("%s: status %d, %s; want 400 naming %s", tc.format, resp.StatusCode, data, tc.want)
		}
	}
}
