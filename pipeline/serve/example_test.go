package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/pipeline/serve"
)

// Serve stories260K with two KV caches over one copy of the weights and
// ask for a greedy text completion.
func Example() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../../../shared/models/stories260K.bin",
		gpurun.WithTokenizer("../../../shared/models/tok512.model"), gpurun.WithBackend("cpu"),
		gpurun.WithMaxCache(128), gpurun.WithParallel(2))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := serve.New(serve.Config{Model: m.Pipeline(), ModelID: "stories260K"})
	if err != nil {
		log.Fatal(err)
	}
	// gpurun serve calls s.Serve(ctx, listener, grace) instead.
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "stories260K", "prompt": "Once upon a time", "temperature": 0, "max_tokens": 8}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status)
	fmt.Printf("%q %s\n", out.Choices[0].Text, out.Choices[0].FinishReason)
	fmt.Println(out.Usage.PromptTokens, out.Usage.CompletionTokens)
	// Output:
	// 200 OK
	// ", there was a little girl" length
	// 5 8
}
