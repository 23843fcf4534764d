package serve

import (
	"encoding/json"
	"testing"
)

// TestOmittedSamplingFields lists what a request that leaves the sampling
// fields out generates with: OpenAI's documented defaults (temperature 1,
// top_p 1, no token limit but the context), in the one GenerateOptions
// type, and a random seed unless the request gives one.
func TestOmittedSamplingFields(t *testing.T) {
	for _, c := range []struct {
		body        string
		temperature float32
		topK        int
		topP        float32
		maxTokens   int
	}{
		{`{"model":"m"}`, 1, 0, 0, 0},
		{`{"model":"m","temperature":0}`, 0, 0, 0, 0},
		{`{"model":"m","top_k":1,"temperature":0.7}`, 0, 0, 0, 0},
		{`{"model":"m","temperature":0.5,"top_p":0.9,"top_k":5,"max_tokens":7}`, 0.5, 5, 0.9, 7},
	} {
		var f samplingFields
		if err := json.Unmarshal([]byte(c.body), &f); err != nil {
			t.Fatal(err)
		}
		smp, apiErr := f.validate("m")
		if apiErr != nil {
			t.Fatalf("%s: %v", c.body, apiErr)
		}
		o := smp.options()
		if o.Temperature != c.temperature || o.TopK != c.topK || o.TopP != c.topP || o.MaxTokens != c.maxTokens {
			t.Errorf("%s: Temperature %v, TopK %d, TopP %v, MaxTokens %d; want %v, %d, %v, %d", c.body, o.Temperature, o.TopK, o.TopP, o.MaxTokens, c.temperature, c.topK, c.topP, c.maxTokens)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", c.body, err)
		}
	}
}
