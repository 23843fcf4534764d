package serve

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestCompletionsSpeculative: a server whose Config.Speculation drafts by
// prompt lookup or with a draft model answers greedy completions with
// llama.cpp's golden text.
func TestCompletionsSpeculative(t *testing.T) {
	draft := storiesModel(t, 2)
	for _, spec := range []*pipeline.Speculation{{Lookup: 2}, {Draft: draft, Tokens: 3}} {
		_, ts := newServer(t, Config{Speculation: spec})
		for _, tc := range testmodels.StoriesCases(t) {
			req := fmt.Sprintf(`{"model":%q,"prompt":%q,"temperature":0,"max_tokens":%d}`, modelID, tc.Prompt, len(tc.GeneratedIDs))
			resp, data := post(t, ts.URL+"/v1/completions", req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			var c completion
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatal(err)
			}
			if len(c.Choices) != 1 || c.Choices[0].Text != tc.GeneratedText {
				t.Errorf("%+v, %s: response %s\nwant text %q", spec, tc.Name, data, tc.GeneratedText)
			}
		}
	}
}
