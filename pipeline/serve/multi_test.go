package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// twoModels are the sources of the multi-model tests: stories260K
// ("stories") and arch/llama.gguf with its LoRA adapter llama_r4
// ("llama", "llama:r4"), both rendering chat with the thinking test
// template (which also offers tools), each with a prefix cache; loads
// counts their loads.
func twoModels(t *testing.T, slots int) ([]ModelSource, map[string]*atomic.Int32) {
	tpl := thinkTemplates(t)["tags"]
	loads := map[string]*atomic.Int32{"stories": {}, "llama": {}}
	opts := func() pipeline.Options {
		return pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 768, Slots: slots, PrefixCacheBytes: 1 << 20}
	}
	stories := ModelSource{ID: "stories", Estimate: 1 << 20, Load: func(ctx context.Context) (Config, int64, func() error, error) {
		loads["stories"].Add(1)
		ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
		if err != nil {
			return Config{}, 0, nil, err
		}
		if ck.Tokenizer, err = os.ReadFile(testmodels.Path(t, "tok512.model")); err != nil {
			return Config{}, 0, nil, err
		}
		o := opts()
		m, err := pipeline.FromCheckpoint(ctx, ck, o)
		if err != nil {
			o.Backend.Close()
			return Config{}, 0, nil, err
		}
		return Config{Model: m, Template: tpl}, 0, func() error { m.Close(); return o.Backend.Close() }, nil
	}}
	llama := ModelSource{ID: "llama", Variants: []string{"llama:r4"}, Estimate: 1 << 20, Load: func(ctx context.Context) (Config, int64, func() error, error) {
		loads["llama"].Add(1)
		ck, err := gguf.Load(testmodels.Path(t, "arch", "llama.gguf"))
		if err != nil {
			return Config{}, 0, nil, err
		}
		a, err := checkpoint.LoadLoRA(filepath.Join(testmodels.Root(t), "testdata", "lora", "llama_r4.gguf"), &ck.Config)
		if err != nil {
			return Config{}, 0, nil, err
		}
		o := opts()
		ms, err := pipeline.FromCheckpointVariants(ctx, ck, o, [][]lora.Applied{nil, {{Adapter: a, Scale: 1}}})
		if err != nil {
			o.Backend.Close()
			return Config{}, 0, nil, err
		}
		return Config{Model: ms[0], Variants: map[string]*pipeline.Model{"llama:r4": ms[1]}, Template: tpl}, 0, func() error {
			for _, m := range ms {
				m.Close()
			}
			return o.Backend.Close()
		}, nil
	}}
	return []ModelSource{stories, llama}, loads
}

// alone is a Server holding only src's model (what a request's answer
// must equal).
func alone(t *testing.T, src ModelSource) *httptest.Server {
	cfg, _, closeFn, err := src.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFn() })
	cfg.ModelID = src.ID
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// send posts body to url+path; cancelAt >= 0 reads that many lines of
// a stream and then cancels (errCancelled).
func send(ctx context.Context, client *http.Client, url, path, body string, cancelAt int) (int, []byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if cancelAt >= 0 && resp.StatusCode == 200 {
		sc := bufio.NewScanner(resp.Body)
		for n := 0; n < cancelAt && sc.Scan(); {
			if strings.TrimSpace(sc.Text()) != "" {
				n++
			}
		}
		cancel()
		return resp.StatusCode, nil, errCancelled
	}
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// answer is what a response says, without what differs between runs
// (ids, times, usage: a cached prefix changes prompt_tokens_details).
func answer(t testing.TB, data []byte) string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Errorf("response %q: %v", data, err)
		return ""
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"id", "created", "created_at", "usage", "system_fingerprint", "total_duration", "load_duration",
				"prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"} {
				delete(v, k)
			}
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, data := get(t, url)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, data)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// psNames are the models /api/ps lists as loaded.
func psNames(t *testing.T, url string) string {
	t.Helper()
	var names []string
	for _, m := range getJSON(t, url+"/api/ps")["models"].([]any) {
		names = append(names, m.(map[string]any)["name"].(string))
	}
	return strings.Join(names, ",")
}

// TestMultiModels: a server of two real models in a budget that fits
// one: each request loads its model, evicting the other; /v1/models and
// /api/tags list all three ids, /api/ps the loaded one with its
// expires_at; keep_alive 0 unloads after the request; an unknown model is
// a 404 naming the ids; and every answer equals that of a server holding
// only that model.
func TestMultiModels(t *testing.T) {
	sources, loads := twoModels(t, 2)
	refs := map[string]*httptest.Server{}
	for _, src := range sources {
		refs[src.ID] = alone(t, src)
	}
	// Measure the two as the server counts them: the budget fits the
	// larger but not both.
	var sizes []int64
	for _, src := range sources {
		cfg, _, closeFn, err := src.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, ModelBytes(cfg))
		sources[len(sizes)-1].Estimate = sizes[len(sizes)-1]
		closeFn()
	}
	for _, c := range loads {
		c.Store(0)
	}
	budget := max(sizes[0], sizes[1]) + min(sizes[0], sizes[1])/2
	var logged []string
	var logMu sync.Mutex
	mu, err := NewMulti(MultiConfig{Models: sources, Budget: budget, KeepAlive: time.Hour, Log: func(f string, a ...any) {
		logMu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		logMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mu.Close() })
	ts := httptest.NewServer(mu)
	t.Cleanup(ts.Close)

	var ids []string
	for _, m := range getJSON(t, ts.URL+"/v1/models")["data"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if want := []string{"stories", "llama", "llama:r4"}; !slices.Equal(ids, want) {
		t.Fatalf("/v1/models %v, want %v", ids, want)
	}
	if n := len(getJSON(t, ts.URL+"/api/tags")["models"].([]any)); n != 3 {
		t.Fatalf("/api/tags lists %d models, want 3", n)
	}
	if got := psNames(t, ts.URL); got != "" {
		t.Fatalf("loaded before any request: %q", got)
	}

	reqs := []struct{ model, path, body, loaded string }{
		{"stories", "/v1/completions", `{"model":"stories","prompt":"Once upon a time","max_tokens":12,"temperature":0}`, "stories"},
		{"llama", "/v1/chat/completions", `{"model":"llama","messages":[{"role":"user","content":"Hi"}],"max_tokens":12,"temperature":0}`, "llama"},
		{"llama:r4", "/v1/chat/completions", `{"model":"llama:r4","messages":[{"role":"user","content":"Hi"}],"max_tokens":12,"temperature":0}`, "llama"},
		{"stories", "/api/generate", `{"model":"stories:latest","prompt":"Lily","stream":false,"options":{"temperature":0,"num_predict":12}}`, "stories"},
		{"llama", "/v1/messages", `{"model":"llama","max_tokens":12,"temperature":0,"messages":[{"role":"user","content":"Hi"}]}`, "llama"},
		{"stories", "/api/chat", `{"model":"stories","messages":[{"role":"user","content":"Hi"}],"stream":false,"keep_alive":0,"options":{"temperature":0,"num_predict":12}}`, ""},
	}
	for i, rq := range reqs {
		ref := strings.ReplaceAll(rq.body, `"stories:latest"`, `"stories"`)
		code, want, err := send(t.Context(), http.DefaultClient, refs[strings.TrimSuffix(rq.model, ":r4")].URL, rq.path, ref, -1)
		if err != nil || code != 200 {
			t.Fatalf("%d alone: %d %s %v", i, code, want, err)
		}
		code, got, err := send(t.Context(), http.DefaultClient, ts.URL, rq.path, rq.body, -1)
		if err != nil || code != 200 {
			t.Fatalf("%d: %d %s %v", i, code, got, err)
		}
		if a, b := answer(t, got), answer(t, want); a != b {
			t.Errorf("%d %s on %s: %s\nalone: %s", i, rq.path, rq.model, a, b)
		}
		if ps := psNames(t, ts.URL); ps != rq.loaded {
			t.Errorf("after request %d: loaded %q, want %q", i, ps, rq.loaded)
		}
	}
	// stories loaded 3 times (evicted twice, then unloaded by keep_alive
	// 0), llama twice (its adapter rode on the same load).
	if s, l := loads["stories"].Load(), loads["llama"].Load(); s != 3 || l != 2 {
		t.Errorf("loads: stories %d, llama %d; want 3, 2", s, l)
	}
	// A model kept for a time shows when it unloads.
	code, _, _ := send(t.Context(), http.DefaultClient, ts.URL, "/api/generate", `{"model":"llama","prompt":"","keep_alive":"10m","stream":false}`, -1)
	if code != 200 {
		t.Fatalf("ollama load: %d", code)
	}
	ps := getJSON(t, ts.URL+"/api/ps")["models"].([]any)
	if len(ps) != 1 {
		t.Fatalf("/api/ps %v", ps)
	}
	exp, err := time.Parse(time.RFC3339Nano, ps[0].(map[string]any)["expires_at"].(string))
	if d := time.Until(exp); err != nil || d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("expires_at %v (%v from now), want 10m ahead", exp, d)
	}
	for _, path := range []string{"/v1/chat/completions", "/api/chat", "/v1/messages"} {
		code, data, _ := send(t.Context(), http.DefaultClient, ts.URL, path, `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`, -1)
		if code != 404 || !strings.Contains(string(data), `\"stories\", \"llama\", \"llama:r4\"`) {
			t.Errorf("%s unknown model: %d %s", path, code, data)
		}
	}
	logMu.Lock()
	t.Logf("budget %d KiB (models %d and %d KiB); log: %s", budget>>10, sizes[0]>>10, sizes[1]>>10, strings.Join(logged, "; "))
	logMu.Unlock()
}

// vmHWM is this process's peak resident memory (Linux; "" elsewhere).
func vmHWM() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestMultiMixedLoad: two rounds of 64 concurrent clients over two models
// in a budget that fits one (so the models evict each other as the load
// moves, and the ollama clients' keep_alive 0 unloads idle ones), with
// a LoRA adapter, JSON schemas, forced tool calls, a long shared system
// prompt (cached prefixes), reasoning (the thinking template), ollama
// and Anthropic routes, and streams cancelled mid-way: every completed
// answer equals the one the same request gets alone (each client's
// request is first run on a server holding only its model; greedy). It
// logs p50/p99 latency, the loads and the process's peak RSS (measured,
// not asserted).
func TestMultiMixedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	start := time.Now()
	sources, loads := twoModels(t, 4)
	refs := map[string]*httptest.Server{}
	for _, src := range sources {
		refs[src.ID] = alone(t, src)
	}
	system := strings.Repeat("You are a careful storyteller. ", 3)
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer"}},"required":["name","age"]}`
	tool := `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}}`
	words := []string{"Lily", "a dog", "the sun", "Tom", "a boat", "the park", "Sue", "a cat"}
	type client struct {
		model, path, body string
		cancelAt          int
	}
	const clients, maxTokens = 64, 10
	var cs []client
	for i := range clients {
		w := words[i%len(words)]
		model := []string{"stories", "llama", "llama:r4"}[i%3]
		user := fmt.Sprintf(`[{"role":"system","content":%q},{"role":"user","content":"Tell me about %s."}]`, system, w)
		var c client
		switch i % 8 {
		case 0: // text completion
			c = client{model, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time %s","max_tokens":%d,"temperature":0}`, model, w, maxTokens), -1}
		case 1: // chat with reasoning and a cached system prompt
			c = client{model, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":%d,"temperature":0}`, model, user, maxTokens), -1}
		case 2: // a JSON schema
			c = client{model, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":24,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":%s}}}`, model, user, schema), -1}
		case 3: // a forced tool call
			c = client{model, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":32,"temperature":0,"tools":[%s],"tool_choice":"required"}`, model, user, tool), -1}
		case 4: // a stream cancelled after two chunks
			c = client{model, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":%d,"temperature":0,"stream":true}`, model, user, maxTokens), 2}
		case 5: // ollama, thinking, unloading the model when idle
			c = client{model, "/api/chat", fmt.Sprintf(`{"model":%q,"messages":%s,"stream":false,"think":true,"keep_alive":0,"options":{"temperature":0,"num_predict":%d}}`, model, user, maxTokens), -1}
		case 6: // Anthropic
			c = client{model, "/v1/messages", fmt.Sprintf(`{"model":%q,"system":%q,"messages":[{"role":"user","content":"Tell me about %s."}],"max_tokens":%d,"temperature":0}`, model, system, w, maxTokens), -1}
		case 7: // reasoning budget
			c = client{model, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":%d,"temperature":0,"reasoning_budget":3}`, model, user, maxTokens), -1}
		}
		cs = append(cs, c)
	}
	// Each client's answer alone.
	want := make([]string, clients)
	for i, c := range cs {
		if c.cancelAt >= 0 {
			continue
		}
		code, data, err := send(t.Context(), http.DefaultClient, refs[strings.TrimSuffix(c.model, ":r4")].URL, c.path, c.body, -1)
		if err != nil || code != 200 {
			t.Fatalf("client %d alone: %d %s %v", i, code, data, err)
		}
		want[i] = answer(t, data)
	}
	aloneTime := time.Since(start)

	var sizes []int64
	for _, src := range sources {
		cfg, _, closeFn, err := src.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, ModelBytes(cfg))
		sources[len(sizes)-1].Estimate = sizes[len(sizes)-1]
		closeFn()
	}
	for _, c := range loads {
		c.Store(0)
	}
	mu, err := NewMulti(MultiConfig{Models: sources, Budget: max(sizes[0], sizes[1]) + min(sizes[0], sizes[1])/2, KeepAlive: time.Hour, LoadWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mu.Close() })
	ts := httptest.NewServer(mu)
	t.Cleanup(ts.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var mx sync.Mutex
	var lat []time.Duration
	var completed, cancelled int
	loadStart := time.Now()
	const rounds = 2
	for range rounds {
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				code, data, err := send(t.Context(), hc, ts.URL, c.path, c.body, c.cancelAt)
				if c.cancelAt >= 0 {
					if err != errCancelled {
						t.Errorf("client %d: %d %s %v, want a cancelled stream", i, code, data, err)
					}
					mx.Lock()
					cancelled++
					mx.Unlock()
					return
				}
				if err != nil || code != 200 {
					t.Errorf("client %d (%s on %s): %d %s %v", i, c.path, c.model, code, data, err)
					return
				}
				if got := answer(t, data); got != want[i] {
					t.Errorf("client %d (%s on %s): %s\nalone: %s", i, c.path, c.model, got, want[i])
				}
				mx.Lock()
				completed++
				lat = append(lat, time.Since(t0))
				mx.Unlock()
			}()
		}
		wg.Wait()
	}
	wall := time.Since(loadStart)
	st := loadStats{latencies: lat}
	if completed+cancelled != rounds*clients {
		t.Errorf("%d completed and %d cancelled of %d", completed, cancelled, rounds*clients)
	}
	if loads["stories"].Load()+loads["llama"].Load() < 3 {
		t.Errorf("loads %d, %d: want both models loaded", loads["stories"].Load(), loads["llama"].Load())
	}
	t.Logf("%d rounds of %d clients: %d completed, %d cancelled in %v (alone first: %v); latency p50 %v p99 %v; loads stories %d llama %d; VmHWM %s",
		rounds, clients, completed, cancelled, wall.Round(time.Millisecond), aloneTime.Round(time.Millisecond),
		st.percentile(0.5).Round(time.Millisecond), st.percentile(0.99).Round(time.Millisecond),
		loads["stories"].Load(), loads["llama"].Load(), vmHWM())
}
