package serve

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/internal/badsampling"
)

// TestBadSamplingRequests runs the shared table of invalid sampling values
// (internal/badsampling, also run through the Go API and the CLI) through
// both endpoints: each is a 400 with an OpenAI-style error object naming
// the parameter (NaN, which JSON cannot hold, is a 400 for invalid JSON).
func TestBadSamplingRequests(t *testing.T) {
	_, ts := newServer(t, Config{})
	keys := map[badsampling.Param][]string{
		badsampling.Temperature: {"temperature"},
		badsampling.TopP:        {"top_p"},
		badsampling.TopK:        {"top_k"},
		badsampling.Count:       {"max_tokens", "max_completion_tokens", "n"},
	}
	for _, c := range badsampling.Cases() {
		for _, key := range keys[c.Param] {
			for _, ep := range []struct{ path, body string }{
				{"/v1/completions", `{"model":"stories260K","prompt":"a","%s":%s}`},
				{"/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"%s":%s}`},
			} {
				t.Run(c.Name+"/"+key+ep.path, func(t *testing.T) {
					body := fmt.Sprintf(ep.body, key, c.JSON())
					resp, data := post(t, ts.URL+ep.path, body)
					var e struct {
						Error apiError `json:"error"`
					}
					if err := json.Unmarshal(data, &e); err != nil {
						t.Fatalf("status %d, body %q: %v", resp.StatusCode, data, err)
					}
					code, param := "invalid_value", any(key)
					if c.JSON() == "NaN" {
						code, param = "invalid_json", e.Error.Param
					}
					if resp.StatusCode != 400 || e.Error.Code != code || e.Error.Param != param || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
						t.Errorf("%s: status %d, error %+v; want 400 %s for %q", body, resp.StatusCode, e.Error, code, key)
					}
				})
			}
		}
	}
}
