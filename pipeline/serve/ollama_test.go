package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// embedServer serves embed/gemma-embedding.gguf as modelID.
func embedServer(t *testing.T) (*pipeline.Model, string) {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "embed", "gemma-embedding.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{})
	t.Cleanup(func() { b.Close() })
	m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: b, MaxCache: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	_, ts := newServer(t, Config{Model: m})
	return m, ts.URL
}

// TestOpenAIEmbeddings: /v1/embeddings of token-id inputs equals
// llama.cpp's normalized embeddings (gemma-embedding, within 2e-5 as
// pipeline's golden test), in order, as floats and as base64; text
// inputs get the model's BOS and EOS; bad requests and a generative
// model get 4xx errors.
func TestOpenAIEmbeddings(t *testing.T) {
	g := testmodels.Embed(t, "gemma-embedding")
	m, url := embedServer(t)
	seqs := []testmodels.EmbedSequence{g.Sequences[3], g.Sequences[0]}
	ids, _ := json.Marshal([][]int{seqs[0].FedIDs, seqs[1].FedIDs})
	for _, format := range []string{"float", "base64"} {
		resp, data := post(t, url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":%s,"encoding_format":%q}`, modelID, ids, format))
		var got struct {
			Object string `json:"object"`
			Data   []struct {
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Usage struct {
				Prompt int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(data, &got) != nil || got.Object != "list" || len(got.Data) != 2 {
			t.Fatalf("%s: %d %s", format, resp.StatusCode, data)
		}
		if got.Usage.Prompt != len(seqs[0].FedIDs)+len(seqs[1].FedIDs) {
			t.Errorf("%s: %d prompt tokens", format, got.Usage.Prompt)
		}
		for i, d := range got.Data {
			var v []float32
			if format == "float" {
				if err := json.Unmarshal(d.Embedding, &v); err != nil {
					t.Fatal(err)
				}
			} else {
				var s string
				json.Unmarshal(d.Embedding, &s)
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil || len(b) != 4*g.NEmbdOut {
					t.Fatalf("base64 %q: %v", s, err)
				}
				for j := range g.NEmbdOut {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])))
				}
			}
			if d.Index != i {
				t.Errorf("%s: data[%d].index %d", format, i, d.Index)
			}
			if diff := testmodels.MaxAbsDiff(v, seqs[i].Normalized); !(diff <= 2e-5) {
				t.Errorf("%s: input %d off llama.cpp's by %.3g", format, i, diff)
			}
		}
	}
	// A text input: BOS + its tokens + EOS.
	resp, data := post(t, url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":"once upon a time","dimensions":16}`, modelID))
	var got struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &got) != nil || len(got.Data) != 1 || len(got.Data[0].Embedding) != 16 {
		t.Fatalf("text input: %d %s", resp.StatusCode, data)
	}
	text, _ := m.Encode("once upon a time")
	full, err := m.Embed(context.Background(), append(append([]int{1}, text...), 2), false)
	if err != nil {
		t.Fatal(err)
	}
	var ss float64
	for _, x := range full[:16] {
		ss += float64(x) * float64(x)
	}
	for j, x := range got.Data[0].Embedding {
		if want := full[j] / float32(math.Sqrt(ss)); math.Abs(float64(x-want)) > 1e-6 {
			t.Fatalf("dimensions 16: value %d is %g, want the first 16 of the embedding normalized, %g", j, x, want)
		}
	}
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"model":"stories260K"}`, 400},
		{`{"model":"stories260K","input":[]}`, 400},
		{`{"model":"stories260K","input":""}`, 400},
		{`{"model":"stories260K","input":"x","encoding_format":"hex"}`, 400},
		{`{"model":"stories260K","input":"x","dimensions":65}`, 400},
		{`{"model":"stories260K","input":[[1,100000]]}`, 400},
		{`{"model":"other","input":"x"}`, 404},
	} {
		if resp, data := post(t, url+"/v1/embeddings", tc.body); resp.StatusCode != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.body, resp.StatusCode, data, tc.code)
		}
	}
	_, ts := newServer(t, Config{})
	if resp, data := post(t, ts.URL+"/v1/embeddings", `{"model":"stories260K","input":"x"}`); resp.StatusCode != 400 || !strings.Contains(string(data), "not_an_embedding_model") {
		t.Errorf("a generative model: %d %s", resp.StatusCode, data)
	}
}

// TestOllamaEmbed: /api/embed gives normalized vectors of each input
// (the same as /v1/embeddings), /api/embeddings the raw one, and
// truncate false refuses an input past the cache.
func TestOllamaEmbed(t *testing.T) {
	_, url := embedServer(t)
	resp, data := post(t, url+"/api/embed", fmt.Sprintf(`{"model":"%s:latest","input":["once upon a time","a cat"]}`, modelID))
	var got struct {
		Model      string      `json:"model"`
		Embeddings [][]float32 `json:"embeddings"`
		Count      int         `json:"prompt_eval_count"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &got) != nil || len(got.Embeddings) != 2 || got.Model != modelID || got.Count < 6 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	_, data = post(t, url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":"a cat"}`, modelID))
	var openai struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	json.Unmarshal(data, &openai)
	if len(openai.Data) != 1 || testmodels.MaxAbsDiff(got.Embeddings[1], f64s(openai.Data[0].Embedding)) != 0 {
		t.Errorf("/api/embed and /v1/embeddings differ")
	}
	_, data = post(t, url+"/api/embeddings", fmt.Sprintf(`{"model":%q,"prompt":"a cat"}`, modelID))
	var legacy struct {
		Embedding []float32 `json:"embedding"`
	}
	json.Unmarshal(data, &legacy)
	var ss float64
	for _, x := range legacy.Embedding {
		ss += float64(x) * float64(x)
	}
	if len(legacy.Embedding) != 64 || math.Abs(math.Sqrt(ss)-1) < 1e-3 {
		t.Errorf("/api/embeddings: %d values of norm %g, want the raw (unnormalized) embedding", len(legacy.Embedding), math.Sqrt(ss))
	}
	long := strings.Repeat("once upon a time ", 40)
	if resp, data := post(t, url+"/api/embed", fmt.Sprintf(`{"model":%q,"input":%q,"truncate":false}`, modelID, long)); resp.StatusCode != 400 || !strings.Contains(string(data), `"error"`) {
		t.Errorf("truncate false past the cache: %d %s", resp.StatusCode, data)
	}
	if resp, data := post(t, url+"/api/embed", fmt.Sprintf(`{"model":%q,"input":%q}`, modelID, long)); resp.StatusCode != 200 {
		t.Errorf("truncated: %d %s", resp.StatusCode, data)
	}
	// An embedding model generates nothing.
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":false}`, modelID)
		if resp, data := post(t, url+path, body); resp.StatusCode != 400 || !strings.Contains(string(data), "embedding model") {
			t.Errorf("%s on an embedding model: %d %s", path, resp.StatusCode, data)
		}
	}
}

func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// ndjson reads an NDJSON body into its objects.
func ndjson(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}

// TestOllamaChat: /api/chat greedy equals /v1/chat/completions' reply
// (same template, same options), whole with stream false and as NDJSON
// lines by default, the last done with the counts; generate renders the
// prompt as a user turn, or raw, and returns a context that continues
// it; an empty chat is a load; errors are ollama's.
func TestOllamaChat(t *testing.T) {
	_, ts := newServer(t, Config{})
	url := ts.URL
	msgs := `[{"role":"system","content":"You tell stories."},{"role":"user","content":"Once upon a time"}]`
	_, data := post(t, url+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"temperature":0,"max_tokens":12}`, modelID, msgs))
	var c completion
	if json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 {
		t.Fatalf("openai: %s", data)
	}
	want := c.Choices[0].Message.Content
	opts := `"options":{"temperature":0,"num_predict":12,"num_ctx":4096}`
	resp, data := post(t, url+"/api/chat", fmt.Sprintf(`{"model":%q,"messages":%s,"stream":false,"keep_alive":"5m",%s}`, modelID, msgs, opts))
	var whole struct {
		Message struct {
			Role, Content string
		} `json:"message"`
		Done       bool   `json:"done"`
		DoneReason string `json:"done_reason"`
		EvalCount  int    `json:"eval_count"`
		PromptEval int    `json:"prompt_eval_count"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &whole) != nil {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	if whole.Message.Content != want || whole.Message.Role != "assistant" || !whole.Done || whole.DoneReason != "length" || whole.EvalCount != 12 || whole.PromptEval < 5 {
		t.Errorf("whole %+v, want content %q", whole, want)
	}
	resp, data = post(t, url+"/api/chat", fmt.Sprintf(`{"model":%q,"messages":%s,%s}`, modelID, msgs, opts))
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("streamed content type %q", ct)
	}
	lines := ndjson(t, data)
	var text strings.Builder
	for i, l := range lines {
		done := i == len(lines)-1
		if l["done"] != done {
			t.Fatalf("line %d: done %v", i, l["done"])
		}
		text.WriteString(l["message"].(map[string]any)["content"].(string))
	}
	if last := lines[len(lines)-1]; text.String() != want || len(lines) < 3 || last["done_reason"] != "length" || last["eval_count"] != 12.0 {
		t.Errorf("streamed %q in %d lines (last %v), want %q", text.String(), len(lines), lines[len(lines)-1], want)
	}

	// generate: raw, then continued through its context.
	resp, data = post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time","raw":true,"stream":false,%s}`, modelID, opts))
	var gen struct {
		Response string `json:"response"`
		Context  []int  `json:"context"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &gen) != nil || gen.Response == "" || len(gen.Context) < 12 {
		t.Fatalf("generate: %d %s", resp.StatusCode, data)
	}
	_, data = post(t, url+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time","temperature":0,"max_tokens":12}`, modelID))
	if json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 || c.Choices[0].Text != gen.Response {
		t.Errorf("raw generate %q, /v1/completions %s", gen.Response, data)
	}
	ctx, _ := json.Marshal(gen.Context)
	resp, data = post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":" The","raw":true,"stream":false,"context":%s,%s}`, modelID, ctx, opts))
	var more struct {
		Context    []int `json:"context"`
		PromptEval int   `json:"prompt_eval_count"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &more) != nil || more.PromptEval <= len(gen.Context) || len(more.Context) != more.PromptEval+12 {
		t.Errorf("continued generate: %d %s", resp.StatusCode, data)
	}
	resp, data = post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"Hi","system":"Be brief.","stream":false,%s}`, modelID, opts))
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"done":true`) {
		t.Errorf("templated generate: %d %s", resp.StatusCode, data)
	}

	if _, data := post(t, url+"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[],"keep_alive":0}`, modelID)); !strings.Contains(string(data), `"done_reason":"unload"`) {
		t.Errorf("unload: %s", data)
	}
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/api/chat", `{"model":"nope","messages":[]}`, 404},
		{"/api/chat", `{"messages":[]}`, 400},
		{"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}],"think":"max"}`, modelID), 400},
		{"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}],"format":"xml"}`, modelID), 400},
		{"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x","images":["aGk="]}]}`, modelID), 400},
		{"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}],"options":{"temperature":-1}}`, modelID), 400},
		{"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"x","suffix":"y"}`, modelID), 400},
		{"/api/embed", fmt.Sprintf(`{"model":%q,"input":"x"}`, modelID), 400},
		{"/api/show", `{"model":"nope"}`, 404},
	} {
		resp, data := post(t, url+tc.path, tc.body)
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode != tc.code || json.Unmarshal(data, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: %d %s, want %d and {\"error\": ...}", tc.path, tc.body, resp.StatusCode, data, tc.code)
		}
	}
}

// TestOllamaListing: tags, ps, version and show describe the served
// model.
func TestOllamaListing(t *testing.T) {
	_, ts := newServer(t, Config{})
	get := func(path string) map[string]any {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		return v
	}
	for _, path := range []string{"/api/tags", "/api/ps"} {
		ms := get(path)["models"].([]any)
		if len(ms) != 1 || ms[0].(map[string]any)["name"] != modelID {
			t.Errorf("%s: %v", path, ms)
		}
		if _, has := ms[0].(map[string]any)["expires_at"]; has != (path == "/api/ps") {
			t.Errorf("%s: expires_at %v", path, has)
		}
	}
	if v := get("/api/version")["version"]; v != OllamaVersion {
		t.Errorf("version %v", v)
	}
	_, data := post(t, ts.URL+"/api/show", fmt.Sprintf(`{"model":"%s:latest"}`, modelID))
	var show struct {
		Capabilities []string       `json:"capabilities"`
		ModelInfo    map[string]any `json:"model_info"`
	}
	if json.Unmarshal(data, &show) != nil || len(show.Capabilities) == 0 || show.Capabilities[0] != "completion" || show.ModelInfo["general.architecture"] != "llama" {
		t.Errorf("show: %s", data)
	}
}
