package main

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestServeOllamaClient: the ollama npm client (testdata/ollama,
// installed by .ci/setup) drives gpurun serve's ollama API on stories260K
// with testdata/anthropic/think.jinja (its generation prompt opens a
// <think> block) and --reasoning-budget 6. Greedy: with think true the
// reply's thinking is exactly the model's first 6 tokens (read through
// the OpenAI route with reasoning_format none) and its answer comes
// apart, the same whole and streamed as NDJSON parts; think false gives
// no thinking; a forced tool call comes back as tool_calls with
// arguments valid for the tool, whole and streamed, and the conversation
// with its result renders longer; a format schema gives JSON of it; raw
// generate returns a context; the listings name the model; an unknown
// model is a 404 ResponseError. A second server on embed/gemma-embedding
// answers the client's embed with the vectors gpurun's Go API gives.
func TestServeOllamaClient(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "ollama"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "ollama"))
	}
	if err != nil {
		ci.Missing(t, "node and the ollama package of testdata/ollama (bash .ci/setup installs them): %v", err)
	}
	think, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "anthropic", "think.jinja"))
	url := startServe(t, storiesTask(t), "--backend", "cpu", "--api-key", "k3y", "--name", "stories", "--chat-template", think, "--reasoning-budget", "6")
	embedPath := testmodels.Path(t, "embed", "gemma-embedding.gguf")
	embedURL := startServe(t, embedPath, "--backend", "cpu", "--name", "gemma-embed")

	cmd := exec.Command(node, filepath.Join(pkg, "client.mjs"), url, "stories", "k3y", embedURL, "gemma-embed")
	cmd.Dir = pkg
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s", err, stderr)
	}
	t.Logf("client saw: %s", out)
	type call struct {
		Function struct {
			Name      string `json:"name"`
			Arguments struct {
				City *string `json:"city"`
			} `json:"arguments"`
		} `json:"function"`
	}
	var got struct {
		Whole struct {
			Thinking   *string `json:"thinking"`
			Content    string  `json:"content"`
			Done       bool    `json:"done"`
			Reason     string  `json:"reason"`
			EvalCount  int     `json:"evalCount"`
			PromptEval int     `json:"promptCount"`
		} `json:"whole"`
		Streamed struct {
			Thinking  string `json:"thinking"`
			Content   string `json:"content"`
			Parts     int    `json:"parts"`
			Done      bool   `json:"done"`
			Reason    string `json:"reason"`
			EvalCount int    `json:"evalCount"`
		} `json:"streamed"`
		NoThink struct {
			Thinking *string `json:"thinking"`
			Content  string  `json:"content"`
		} `json:"noThink"`
		Call struct {
			Calls []call `json:"calls"`
		} `json:"call"`
		StreamedCalls []call `json:"streamedCalls"`
		Answered      struct {
			Content     string `json:"content"`
			PromptCount int    `json:"promptCount"`
			CallPrompt  int    `json:"callPromptCount"`
		} `json:"answered"`
		Structured string `json:"structured"`
		Generated  struct {
			Response string `json:"response"`
			Context  int    `json:"context"`
			Done     bool   `json:"done"`
		} `json:"generated"`
		List []string `json:"list"`
		PS   []struct {
			Name string `json:"name"`
		} `json:"ps"`
		Version string `json:"version"`
		Show    struct {
			Capabilities []string `json:"capabilities"`
			Arch         string   `json:"arch"`
			Template     int      `json:"template"`
		} `json:"show"`
		BadModel *struct {
			Status int    `json:"status"`
			Name   string `json:"name"`
		} `json:"badModel"`
		Embed *struct {
			Model      string      `json:"model"`
			Embeddings [][]float32 `json:"embeddings"`
			Count      int         `json:"count"`
		} `json:"embed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}

	// The model's first 6 tokens without a budget, the thinking left in
	// the content.
	body := `{"model":"stories","max_tokens":6,"temperature":0,"reasoning_format":"none","messages":[` +
		`{"role":"system","content":"You tell short stories."},{"role":"user","content":"Once upon a time"}]}`
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k3y")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&first)
	resp.Body.Close()
	if err != nil || len(first.Choices) != 1 {
		t.Fatalf("the unbudgeted reply: %+v, %v", first, err)
	}
	want := strings.TrimSpace(first.Choices[0].Message.Content)
	if want == "" || strings.Contains(want, "think>") {
		t.Fatalf("the model's first 6 tokens %q", want)
	}

	w := got.Whole
	if w.Thinking == nil || strings.TrimSpace(*w.Thinking) != want {
		t.Errorf("thinking %v, want the model's first 6 tokens %q", w.Thinking, want)
	}
	if w.Content == "" || strings.Contains(w.Content, "think>") || !w.Done || w.Reason != "length" || w.EvalCount != 24 || w.PromptEval < 10 {
		t.Errorf("whole: %+v", w)
	}
	s := got.Streamed
	if w.Thinking != nil && (s.Thinking != *w.Thinking || s.Content != w.Content) || s.Parts < 3 || !s.Done || s.Reason != w.Reason || s.EvalCount != w.EvalCount {
		t.Errorf("streamed %+v\nwhole %+v", s, w)
	}
	if got.NoThink.Thinking != nil || got.NoThink.Content == "" || strings.Contains(got.NoThink.Content, "think>") {
		t.Errorf("think false: %+v", got.NoThink)
	}
	for i, calls := range [][]call{got.Call.Calls, got.StreamedCalls} {
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments.City == nil || len([]rune(*calls[0].Function.Arguments.City)) > 12 {
			t.Errorf("tool call %d: %+v", i, calls)
		}
	}
	if got.Answered.PromptCount <= got.Answered.CallPrompt {
		t.Errorf("answered: %+v", got.Answered)
	}
	var named struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal([]byte(got.Structured), &named); err != nil || named.Name == nil || len([]rune(*named.Name)) > 8 {
		t.Errorf("format schema: %q (%v)", got.Structured, err)
	}
	if got.Generated.Response == "" || got.Generated.Context < 12 || !got.Generated.Done {
		t.Errorf("generate: %+v", got.Generated)
	}
	if !slices.Equal(got.List, []string{"stories"}) || len(got.PS) != 1 || got.PS[0].Name != "stories" || got.Version == "" {
		t.Errorf("list %v, ps %+v, version %q", got.List, got.PS, got.Version)
	}
	if !slices.Equal(got.Show.Capabilities, []string{"completion", "tools", "thinking"}) || got.Show.Arch != "llama" || got.Show.Template == 0 {
		t.Errorf("show: %+v", got.Show)
	}
	if b := got.BadModel; b == nil || b.Status != 404 || b.Name != "ResponseError" {
		t.Errorf("unknown model: %+v", b)
	}

	e := got.Embed
	if e == nil || e.Model != "gemma-embed" || len(e.Embeddings) != 2 {
		t.Fatalf("embed: %+v", e)
	}
	m, err := gpurun.Open(context.Background(), embedPath, gpurun.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i, text := range []string{"once upon a time", "a cat sat"} {
		v, err := m.Embed(context.Background(), text, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Embeddings[i]) != len(v) {
			t.Fatalf("embedding %d: %d values, want %d", i, len(e.Embeddings[i]), len(v))
		}
		for j := range v {
			if math.Abs(float64(e.Embeddings[i][j]-v[j])) > 1e-6 {
				t.Fatalf("embedding %d value %d: %g, the Go API's %g", i, j, e.Embeddings[i][j], v[j])
			}
		}
	}
}

// TestEmbedCommand: gpurun embed prints one JSON array per input, the
// Go API's normalized embedding (raw with --no-normalize), from -p or
// from standard input; a generative model is a one-line error.
func TestEmbedCommand(t *testing.T) {
	path := testmodels.Path(t, "embed", "qwen3-embedding.gguf")
	m, err := gpurun.Open(context.Background(), path, gpurun.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	texts := []string{"once upon a time", "a cat sat"}
	for _, tc := range []struct {
		stdin     string
		args      []string
		normalize bool
	}{
		{"", []string{"-p", texts[0], "-p", texts[1]}, true},
		{texts[0] + "\n" + texts[1] + "\n", nil, true},
		{"", []string{"--no-normalize", "-p", texts[0], "-p", texts[1]}, false},
	} {
		r := mustExe(t, tc.stdin, append([]string{"embed", path, "--backend", "cpu"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 {
			t.Fatalf("%v: %q", tc.args, r.stdout)
		}
		for i, line := range lines {
			var got []float32
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatal(err)
			}
			want, err := m.Embed(context.Background(), texts[i], tc.normalize)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%v: input %d: %v, want %v", tc.args, i, got, want)
			}
		}
	}
	r := exe(t, "", "embed", testmodels.Path(t, "arch", "llama.gguf"), "--backend", "cpu", "-p", "hi")
	if last := strings.TrimSpace(r.stderr); r.code != 1 || !strings.HasSuffix(last, "llama.gguf: not an embedding model (its file declares no pooling type)") {
		t.Errorf("a generative model: exit %d, %q", r.code, r.stderr)
	}
}
