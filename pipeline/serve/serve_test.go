package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

const modelID = "stories260K"

// storiesModel is stories260K with tok512.model on the CPU backend with
// slots KV caches of 128 positions.
func storiesModel(t testing.TB, slots int) *pipeline.Model {
	t.Helper()
	return storiesModelWith(t, pipeline.Options{MaxCache: 128, Slots: slots})
}

// storiesModelWith is storiesModel with other options.
func storiesModelWith(t testing.TB, opts pipeline.Options) *pipeline.Model {
	t.Helper()
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Tokenizer, err = os.ReadFile(testmodels.Path(t, "tok512.model")); err != nil {
		t.Fatal(err)
	}
	if opts.Backend == nil {
		b := cpu.New(cpu.Options{})
		t.Cleanup(func() { b.Close() })
		opts.Backend = b
	}
	m, err := pipeline.FromCheckpoint(context.Background(), ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Model == nil {
		cfg.Model = storiesModel(t, 2)
	}
	cfg.ModelID = modelID
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t testing.TB, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

type completion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// readEvents reads an event stream's data lines until [DONE].
func readEvents(t testing.TB, r io.Reader) []completion {
	t.Helper()
	var out []completion
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		if data == "[DONE]" {
			return out
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, c)
	}
	t.Fatalf("stream ended without [DONE]: %v", sc.Err())
	return nil
}

// TestCompletionsGolden: greedy text completions of the golden prompts,
// whole and streamed, are llama.cpp's text, with its token counts.
func TestCompletionsGolden(t *testing.T) {
	_, ts := newServer(t, Config{})
	for _, tc := range testmodels.StoriesCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			req := fmt.Sprintf(`{"model":%q,"prompt":%q,"temperature":0,"max_tokens":%d}`, modelID, tc.Prompt, len(tc.GeneratedIDs))
			resp, data := post(t, ts.URL+"/v1/completions", req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			var c completion
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatal(err)
			}
			if c.Object != "text_completion" || c.Model != modelID || len(c.Choices) != 1 {
				t.Fatalf("response %s", data)
			}
			if got := c.Choices[0].Text; got != tc.GeneratedText {
				t.Errorf("text\n got %q\nwant %q", got, tc.GeneratedText)
			}
			if r := c.Choices[0].FinishReason; r == nil || *r != "length" {
				t.Errorf("finish_reason %v, want length", r)
			}
			want := usage{PromptTokens: len(tc.PromptIDs), CompletionTokens: len(tc.GeneratedIDs), TotalTokens: len(tc.PromptIDs) + len(tc.GeneratedIDs)}
			if c.Usage != nil && c.Usage.PromptTokensDetails.CachedTokens <= 1 {
				// The slot held another prompt, which shares BOS at most.
				want.PromptTokensDetails = c.Usage.PromptTokensDetails
			}
			if c.Usage == nil || *c.Usage != want {
				t.Errorf("usage %+v, want %+v", c.Usage, want)
			}
			// The stream repeats the prompt: all but its last token come
			// from the slot's cache.
			want.PromptTokensDetails.CachedTokens = len(tc.PromptIDs) - 1

			stream := strings.TrimSuffix(req, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
			resp2, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			defer resp2.Body.Close()
			if ct := resp2.Header.Get("Content-Type"); resp2.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("stream: status %d, type %q", resp2.StatusCode, ct)
			}
			chunks := readEvents(t, resp2.Body)
			var text strings.Builder
			for _, ch := range chunks[:len(chunks)-1] {
				text.WriteString(ch.Choices[0].Text)
			}
			if text.String() != tc.GeneratedText {
				t.Errorf("streamed text\n got %q\nwant %q", text.String(), tc.GeneratedText)
			}
			last := chunks[len(chunks)-1]
			if len(last.Choices) != 0 || last.Usage == nil || *last.Usage != want {
				t.Errorf("usage chunk %+v, want usage %+v", last, want)
			}
		})
	}
}

// TestChatPlain: a chat completion renders the plain format and stops at
// the next "User:" line; its text is the golden continuation of that
// rendering, which the completions route gives for the same prompt.
func TestChatPlain(t *testing.T) {
	_, ts := newServer(t, Config{})
	msgs := `[{"role":"system","content":"Be kind."},{"role":"user","content":"Once upon a time"}]`
	resp, data := post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"temperature":0,"max_tokens":40}`, modelID, msgs))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	// The plain format, as package chat documents it.
	prompt := "Be kind.\n\nUser: Once upon a time\nAssistant:"
	resp, data = post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%q,"temperature":0,"max_tokens":40,"stop":"\nUser:"}`, modelID, prompt))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var want completion
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if got, w := c.Choices[0].Message.Content, strings.TrimLeft(want.Choices[0].Text, " "); got != w || got == "" {
		t.Errorf("chat content %q, want %q", got, w)
	}
	// The same prompt again: all its tokens but the last come from the
	// slot's cache.
	if n := want.Usage.PromptTokensDetails.CachedTokens; n != want.Usage.PromptTokens-1 {
		t.Errorf("the repeated prompt had %d cached tokens, want %d", n, want.Usage.PromptTokens-1)
	}
	want.Usage.PromptTokensDetails = c.Usage.PromptTokensDetails
	if c.Object != "chat.completion" || c.Choices[0].Message.Role != "assistant" || *c.Usage != *want.Usage {
		t.Errorf("chat response %s, usage want %+v", data, want.Usage)
	}
	// Streamed: a role chunk, content chunks, a finish chunk.
	resp2, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":%s,"temperature":0,"max_tokens":40,"stream":true}`, modelID, msgs)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	chunks := readEvents(t, resp2.Body)
	if len(chunks) < 3 || chunks[0].Choices[0].Delta.Role != "assistant" || chunks[len(chunks)-1].Choices[0].FinishReason == nil {
		t.Fatalf("chunks %+v", chunks)
	}
	var text strings.Builder
	for _, ch := range chunks {
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("object %q", ch.Object)
		}
		text.WriteString(ch.Choices[0].Delta.Content)
	}
	if text.String() != c.Choices[0].Message.Content {
		t.Errorf("streamed %q, whole %q", text.String(), c.Choices[0].Message.Content)
	}
}

func TestRoutes(t *testing.T) {
	_, ts := newServer(t, Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		has          string
	}{
		{"GET", "/v1/models", 200, `"id":"stories260K"`},
		{"GET", "/v1/models/stories260K", 200, `"object":"model"`},
		{"GET", "/v1/models/gpt-4", 404, "model_not_found"},
		{"GET", "/health", 200, `"status":"ok"`},
		{"GET", "/v1/chat/completions", 405, "method_not_allowed"},
		{"GET", "/nope", 404, "unknown_url"},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(data), tc.has) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s, want %d with %s", tc.method, tc.path, resp.StatusCode, data, tc.status, tc.has)
		}
	}
}

// TestErrors: bad requests get OpenAI-shaped errors with their status.
func TestErrors(t *testing.T) {
	_, ts := newServer(t, Config{MaxBody: 4096})
	long := strings.Repeat("once upon a time there was a dog ", 40)
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
		param            string // when the error must name one
	}{
		{"malformed", "/v1/chat/completions", `{"model":`, 400, "invalid_json", ""},
		{"two values", "/v1/completions", `{"model":"stories260K","prompt":"a"} {}`, 400, "invalid_json", ""},
		{"not an object", "/v1/completions", `[1,2]`, 400, "invalid_json", ""},
		{"wrong type", "/v1/completions", `{"model":"stories260K","prompt":"a","max_tokens":"ten"}`, 400, "invalid_type", ""},
		{"no model", "/v1/completions", `{"prompt":"a"}`, 400, "missing_model", ""},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found", ""},
		{"no messages", "/v1/chat/completions", `{"model":"stories260K","messages":[]}`, 400, "invalid_value", ""},
		{"bad role", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"function","content":"x"}]}`, 400, "invalid_value", ""},
		{"image part", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "invalid_value", ""},
		{"no prompt", "/v1/completions", `{"model":"stories260K"}`, 400, "missing_prompt", ""},
		{"two prompts", "/v1/completions", `{"model":"stories260K","prompt":["a","b"]}`, 400, "invalid_value", ""},
		{"bad id", "/v1/completions", `{"model":"stories260K","prompt":[1,99999]}`, 400, "invalid_value", ""},
		{"temperature", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":-1}`, 400, "invalid_value", ""},
		{"temperature high", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":2.5}`, 400, "invalid_value", ""},
		{"top_p", "/v1/completions", `{"model":"stories260K","prompt":"a","top_p":1.5}`, 400, "invalid_value", ""},
		{"top_p 0", "/v1/completions", `{"model":"stories260K","prompt":"a","top_p":0}`, 400, "invalid_value", ""},
		{"top_k", "/v1/completions", `{"model":"stories260K","prompt":"a","top_k":-2}`, 400, "invalid_value", ""},
		{"max_tokens", "/v1/completions", `{"model":"stories260K","prompt":"a","max_tokens":0}`, 400, "invalid_value", ""},
		{"max_completion_tokens", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"max_completion_tokens":-5}`, 400, "invalid_value", ""},
		{"n", "/v1/completions", `{"model":"stories260K","prompt":"a","n":2}`, 400, "invalid_value", ""},
		{"stops", "/v1/completions", `{"model":"stories260K","prompt":"a","stop":["a","b","c","d","e"]}`, 400, "invalid_value", ""},
		{"stop type", "/v1/completions", `{"model":"stories260K","prompt":"a","stop":7}`, 400, "invalid_type", ""},
		{"too long", "/v1/completions", fmt.Sprintf(`{"model":"stories260K","prompt":%q}`, long), 400, "context_length_exceeded", "prompt"},
		{"too long ids", "/v1/completions", fmt.Sprintf(`{"model":"stories260K","prompt":[%s]}`, strings.Repeat("1,", 600)+"1"), 400, "context_length_exceeded", "prompt"},
		{"too long chat", "/v1/chat/completions", fmt.Sprintf(`{"model":"stories260K","messages":[{"role":"user","content":%q}],"stream":true}`, long), 400, "context_length_exceeded", "messages"},
		// OpenAI's fields this server does not implement are refused,
		// naming the field, unless they are at their neutral value.
		{"logprobs", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"logprobs":true}`, 400, "unsupported_parameter", "logprobs"},
		{"top_logprobs", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"top_logprobs":3}`, 400, "unsupported_parameter", "top_logprobs"},
		{"completion logprobs", "/v1/completions", `{"model":"stories260K","prompt":"a","logprobs":2}`, 400, "unsupported_parameter", "logprobs"},
		{"frequency_penalty", "/v1/completions", `{"model":"stories260K","prompt":"a","frequency_penalty":0.5}`, 400, "unsupported_parameter", "frequency_penalty"},
		{"presence_penalty", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"presence_penalty":-1}`, 400, "unsupported_parameter", "presence_penalty"},
		{"logit_bias", "/v1/completions", `{"model":"stories260K","prompt":"a","logit_bias":{"5":10}}`, 400, "unsupported_parameter", "logit_bias"},
		{"too big", "/v1/completions", fmt.Sprintf(`{"model":"stories260K","prompt":%q}`, strings.Repeat("x", 5000)), 413, "request_too_large", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := post(t, ts.URL+tc.path, tc.body)
			var e struct {
				Error apiError `json:"error"`
			}
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("status %d, body %q: %v", resp.StatusCode, data, err)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("status %d, error %+v; want %d %s", resp.StatusCode, e.Error, tc.status, tc.code)
			}
			if tc.param != "" && e.Error.Param != tc.param {
				t.Errorf("param %v, want %q", e.Error.Param, tc.param)
			}
		})
	}
}

// TestNeutralUnsupportedFields: the fields refused above are accepted at
// their neutral values, which clients send as defaults.
func TestNeutralUnsupportedFields(t *testing.T) {
	_, ts := newServer(t, Config{})
	for _, body := range []string{
		`{"model":"stories260K","prompt":"Once","max_tokens":2,"logprobs":null,"frequency_penalty":0,"presence_penalty":0.0,"logit_bias":{}}`,
		`{"model":"stories260K","messages":[{"role":"user","content":"a"}],"max_tokens":2,"logprobs":false,"top_logprobs":0,"logit_bias":null}`,
	} {
		path := "/v1/completions"
		if strings.Contains(body, "messages") {
			path = "/v1/chat/completions"
		}
		if resp, data := post(t, ts.URL+path, body); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", body, resp.StatusCode, data)
		}
	}
}

func TestAPIKeyAndCORS(t *testing.T) {
	_, ts := newServer(t, Config{APIKey: "sekrit", CORSOrigin: "https://app.example"})
	body := `{"model":"stories260K","prompt":"Once","max_tokens":2}`
	for _, tc := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer nope", 401}, {"sekrit", 401}, {"Bearer sekrit", 200}} {
		resp, data := post(t, ts.URL+"/v1/completions", body, "Authorization", tc.auth)
		if resp.StatusCode != tc.status {
			t.Errorf("Authorization %q: %d %s, want %d", tc.auth, resp.StatusCode, data, tc.status)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("no CORS header")
		}
	}
	resp, err := http.Get(ts.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("health without a key: %v %v", resp, err)
	}
	req, _ := http.NewRequest("OPTIONS", ts.URL+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	// Without CORSOrigin there are no CORS headers.
	_, ts2 := newServer(t, Config{})
	resp, err = http.Get(ts2.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS header without CORSOrigin")
	}
}

// TestQueueFull: with every running and waiting place taken, a request
// gets 429 with Retry-After.
func TestQueueFull(t *testing.T) {
	s, ts := newServer(t, Config{Model: storiesModel(t, 1), MaxQueue: 2})
	for range cap(s.admit) {
		s.admit <- struct{}{}
	}
	resp, data := post(t, ts.URL+"/v1/completions", `{"model":"stories260K","prompt":"Once"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(data), "queue_full") {
		t.Errorf("%d %v %s, want 429 with Retry-After", resp.StatusCode, resp.Header, data)
	}
	<-s.admit
	resp, data = post(t, ts.URL+"/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":3}`)
	if resp.StatusCode != 200 {
		t.Errorf("with a free place: %d %s", resp.StatusCode, data)
	}
}

// TestDisconnectCancels: a client leaving a stream mid-way ends its
// generation: the slot is free again at once (the model has one) while
// the cancelled request, unlimited, would otherwise run to a full cache.
func TestDisconnectCancels(t *testing.T) {
	s, ts := newServer(t, Config{Model: storiesModel(t, 1)})
	base := runtime.NumGoroutine()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions",
			strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","stream":true,"top_k":1}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
	}
	waitFor(t, func() bool { return s.inFlight.Load() == 0 })
	resp, data := post(t, ts.URL+"/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":3}`)
	if resp.StatusCode != 200 {
		t.Fatalf("after cancelled streams: %d %s", resp.StatusCode, data)
	}
	http.DefaultClient.CloseIdleConnections()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= base+2 })
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("condition not reached; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGracefulShutdown: cancelling Serve's context lets a running request
// finish, refuses new ones, and returns.
func TestGracefulShutdown(t *testing.T) {
	s, err := New(Config{Model: storiesModel(t, 1), ModelID: modelID})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, 20*time.Second) }()
	url := "http://" + ln.Addr().String()
	req, _ := http.NewRequest("POST", url+"/v1/completions",
		strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","stream":true,"temperature":0,"max_tokens":60}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	chunks := readEvents(t, br)
	if r := chunks[len(chunks)-1].Choices[0].FinishReason; r == nil || *r != "length" {
		t.Errorf("the running request did not finish: %+v", chunks[len(chunks)-1])
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Errorf("the listener still accepts after shutdown")
	}
}

// TestConcurrentGreedy: requests on two slots at once each get their
// golden text.
func TestConcurrentGreedy(t *testing.T) {
	_, ts := newServer(t, Config{})
	cases := testmodels.StoriesCases(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc := cases[i%len(cases)]
			req := fmt.Sprintf(`{"model":%q,"prompt":%q,"temperature":0,"max_tokens":%d}`, modelID, tc.Prompt, len(tc.GeneratedIDs))
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(req))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var c completion
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if c.Choices[0].Text != tc.GeneratedText {
				t.Errorf("request %d (%s): %q, want %q", i, tc.Name, c.Choices[0].Text, tc.GeneratedText)
			}
		}()
	}
	wg.Wait()
}
