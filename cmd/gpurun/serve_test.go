package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// startServe runs gpurun serve with args on a free loopback port and
// returns its base URL; the server is stopped with SIGTERM at cleanup,
// which must end it with status 0.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	cmd := gpurunCmd(append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() {
			for range lines {
			}
			done <- cmd.Wait()
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gpurun serve after SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("gpurun serve did not stop on SIGTERM")
		}
	})
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("gpurun serve exited before serving")
			}
			if m := re.FindStringSubmatch(line); m != nil {
				go func() {
					for range lines {
					}
				}()
				return m[1]
			}
		case <-timeout:
			t.Fatal("gpurun serve did not start")
		}
	}
}

// TestServeOpenAIClient: the official openai npm client (testdata/openai,
// installed by .ci/setup) gets from gpurun serve the model list and a
// greedy chat completion, whole and streamed, whose text is what gpurun
// run generates from the same conversation in the plain chat format.
func TestServeOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "openai"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "openai"))
	}
	if err != nil {
		ci.Missing(t, "node and the openai package of testdata/openai (bash .ci/setup installs them): %v", err)
	}
	task := storiesTask(t)
	const prompt, maxTokens = "Once upon a time", "40"
	url := startServe(t, task, "--backend", "cpu", "--parallel", "2", "--api-key", "k3y", "--name", "stories")

	// The plain chat format, as gpurun chat documents it; a reply ends at
	// the next "User:" line, and starts after the space of "Assistant: ".
	want := mustExe(t, "", "run", task, "--backend", "cpu", "-p", "User: "+prompt+"\nAssistant:", "--stop", "\nUser:",
		"--temperature", "0", "--max-tokens", maxTokens).stdout
	want = strings.TrimLeft(strings.TrimSuffix(want, "\n"), " ")
	if want == "" {
		t.Fatal("gpurun run generated nothing")
	}

	cmd := exec.Command(node, filepath.Join(pkg, "client.mjs"), url+"/v1", "stories", "k3y", prompt, maxTokens)
	cmd.Dir = pkg
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s", err, stderr)
	}
	type usage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	var got struct {
		Models       []string `json:"models"`
		Text         string   `json:"text"`
		Finish       string   `json:"finish"`
		Usage        usage    `json:"usage"`
		Streamed     string   `json:"streamed"`
		StreamFinish string   `json:"streamFinish"`
		StreamUsage  *usage   `json:"streamUsage"`
		Chunks       int      `json:"chunks"`
		BadModel     *struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"badModel"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if len(got.Models) != 1 || got.Models[0] != "stories" {
		t.Errorf("models %v, want [stories]", got.Models)
	}
	if got.Text != want {
		t.Errorf("chat completion %q\nwant (gpurun run) %q", got.Text, want)
	}
	if got.Streamed != want {
		t.Errorf("streamed chat completion %q\nwant (gpurun run) %q", got.Streamed, want)
	}
	if got.Finish == "" || got.Finish != got.StreamFinish || got.Chunks < 3 {
		t.Errorf("finish reasons %q and %q, %d chunks", got.Finish, got.StreamFinish, got.Chunks)
	}
	if got.Usage.Completion < 1 || got.Usage.Prompt < 5 || got.Usage.Total != got.Usage.Prompt+got.Usage.Completion ||
		got.StreamUsage == nil || *got.StreamUsage != got.Usage {
		t.Errorf("usage %+v, streamed %+v", got.Usage, got.StreamUsage)
	}
	if got.BadModel == nil || got.BadModel.Status != 404 || got.BadModel.Code != "model_not_found" {
		t.Errorf("unknown model: %+v, want 404 model_not_found", got.BadModel)
	}

	// Without the key: 401.
	resp, err := httpGet(url + "/v1/models")
	if err != nil || resp != 401 {
		t.Errorf("GET /v1/models without the key: %d %v, want 401", resp, err)
	}
}

func httpGet(url string) (int, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// TestServeFlags: bad serve flags are errors before anything loads.
func TestServeFlags(t *testing.T) {
	task := storiesTask(t)
	for _, args := range [][]string{
		{"serve", task, "--parallel", "0"},
		{"serve", task, "--parallel", "100000"},
		{"serve", task, "--queue", "-1"},
		{"serve", task, "--addr", "not-an-address"},
		{"serve", task, "--grace", "soon"},
		{"serve", task, "--reasoning-format", "qwen"},
		{"serve", task, "--reasoning-budget", "-2"},
		{"serve"},
	} {
		checkErrorLine(t, args, exe(t, "", args...))
	}
}

// TestServeToolsTestModel: the documented tools path on the shipped test
// model with a long enough context (testdata/tools, gen.sh: random
// weights, tok512, a template with tools, 2048 tokens): gpurun serve
// answers a request with tools and tool_choice required with one call
// naming a tool, its arguments valid JSON holding the required fields,
// finish_reason tool_calls; the conversation answered with a tool message
// renders the call and its result (a longer prompt than the 128-token
// test models hold) and gets an assistant reply.
func TestServeToolsTestModel(t *testing.T) {
	model := filepath.Join(testmodels.Root(t), "testdata", "tools", "tiny-tools.tflite")
	base := startServe(t, model, "--backend", "cpu")
	tools := `[{"type":"function","function":{"name":"get_weather","description":"The weather in a city now","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},` +
		`{"type":"function","function":{"name":"add","description":"The sum of two integers","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}}}]`
	ask := `{"role":"system","content":"You are a helpful assistant that answers questions about the weather and does sums, calling the tools when they help."},` +
		`{"role":"user","content":"What is the weather like in Paris today, in degrees Celsius, and should I take an umbrella with me when I go out this afternoon?"}`
	type reply struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	send := func(body string) reply {
		t.Helper()
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var r reply
		if resp.StatusCode != 200 || json.Unmarshal(data, &r) != nil || len(r.Choices) != 1 {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		return r
	}
	r := send(`{"model":"tiny-tools","temperature":0,"max_tokens":1024,"tool_choice":"required","tools":` + tools + `,"messages":[` + ask + `]}`)
	c := r.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("finish %q, content %q, calls %+v", c.FinishReason, *c.Message.Content, c.Message.ToolCalls)
	}
	call := c.Message.ToolCalls[0]
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil || call.ID == "" {
		t.Fatalf("call %+v: %v", call, err)
	}
	want := map[string][]string{"get_weather": {"city", "unit"}, "add": {"a", "b"}}[call.Function.Name]
	for _, k := range want {
		if _, ok := args[k]; !ok {
			t.Errorf("call %s: arguments %s lack %s", call.Function.Name, call.Function.Arguments, k)
		}
	}
	if want == nil {
		t.Errorf("call names %q, not a tool", call.Function.Name)
	}
	if r.Usage.PromptTokens <= 128 {
		t.Errorf("the tool-call prompt is %d tokens: it would fit the 128-token test models", r.Usage.PromptTokens)
	}
	callJSON, _ := json.Marshal(call)
	answered := `{"model":"tiny-tools","temperature":0,"max_tokens":8,"tools":` + tools + `,"messages":[` + ask +
		`,{"role":"assistant","content":null,"tool_calls":[` + string(callJSON) + `]},{"role":"tool","tool_call_id":` + strconv.Quote(call.ID) + `,"content":"{\"temperature\": 14, \"rain\": true}"}]}`
	r2 := send(answered)
	if r2.Usage.PromptTokens <= r.Usage.PromptTokens || r2.Choices[0].FinishReason == "" {
		t.Errorf("answered: %d prompt tokens (the call's request %d), finish %q", r2.Usage.PromptTokens, r.Usage.PromptTokens, r2.Choices[0].FinishReason)
	}
}

// TestServeAnthropicClient: the official @anthropic-ai/sdk npm client
// (testdata/anthropic, installed by .ci/setup) drives gpurun serve's
// /v1/messages on stories260K with testdata/anthropic/think.jinja, a
// template whose generation prompt opens a <think> block. Greedy, with a
// thinking budget of 6 tokens: the reply is a thinking block and a text
// block, the thinking exactly the first 6 tokens the model writes without
// a budget (read through the OpenAI route with reasoning_format none),
// the same whole and streamed (thinking_delta and text_delta events in
// their blocks); count_tokens counts the prompt the reply used; a forced
// tool call comes back as a tool_use block with input valid for the
// tool, whole and streamed, and the conversation with its tool_result
// renders longer and gets a reply; an unknown model is the SDK's
// NotFoundError; the model list reads as Anthropic's.
func TestServeAnthropicClient(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "anthropic"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "@anthropic-ai", "sdk"))
	}
	if err != nil {
		ci.Missing(t, "node and the @anthropic-ai/sdk package of testdata/anthropic (bash .ci/setup installs them): %v", err)
	}
	task := storiesTask(t)
	url := startServe(t, task, "--backend", "cpu", "--api-key", "k3y", "--name", "stories", "--chat-template", filepath.Join(pkg, "think.jinja"))

	cmd := exec.Command(node, filepath.Join(pkg, "client.mjs"), url, "stories", "k3y")
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
	type usage struct {
		Input  int `json:"input_tokens"`
		Output int `json:"output_tokens"`
	}
	type reply struct {
		Thinking []string `json:"thinking"`
		Text     []string `json:"text"`
		Types    []string `json:"types"`
		Stop     string   `json:"stop"`
		Usage    usage    `json:"usage"`
	}
	type use struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Input struct {
			City *string `json:"city"`
		} `json:"input"`
	}
	type call struct {
		Stop string `json:"stop"`
		Uses []use  `json:"uses"`
	}
	var got struct {
		Models         []string `json:"models"`
		Whole          reply    `json:"whole"`
		Streamed       reply    `json:"streamed"`
		Events         []string `json:"events"`
		ThinkingDeltas string   `json:"thinkingDeltas"`
		TextDeltas     string   `json:"textDeltas"`
		Counted        int      `json:"counted"`
		Call           call     `json:"call"`
		StreamedCall   call     `json:"streamedCall"`
		Answered       struct {
			Stop        string   `json:"stop"`
			Types       []string `json:"types"`
			InputTokens int      `json:"inputTokens"`
		} `json:"answered"`
		CallInputTokens int `json:"callInputTokens"`
		BadModel        *struct {
			Status int    `json:"status"`
			Type   string `json:"type"`
			Name   string `json:"name"`
		} `json:"badModel"`
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
				Content   string  `json:"content"`
				Reasoning *string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&first)
	resp.Body.Close()
	if err != nil || len(first.Choices) != 1 || first.Choices[0].Message.Reasoning != nil {
		t.Fatalf("the unbudgeted reply: %+v, %v", first, err)
	}
	want := strings.TrimSpace(first.Choices[0].Message.Content)
	if want == "" || strings.Contains(want, "think>") {
		t.Fatalf("the model's first 6 tokens %q", want)
	}

	if !slices.Equal(got.Models, []string{"stories"}) {
		t.Errorf("models %v", got.Models)
	}
	w := got.Whole
	if !slices.Equal(w.Types, []string{"thinking", "text"}) || len(w.Thinking) != 1 || len(w.Text) != 1 {
		t.Fatalf("whole: blocks %v", w.Types)
	}
	if w.Thinking[0] != want {
		t.Errorf("thinking %q, want the model's first 6 tokens %q", w.Thinking[0], want)
	}
	if w.Text[0] == "" || strings.Contains(w.Text[0], "think>") {
		t.Errorf("text %q", w.Text[0])
	}
	if w.Stop != "max_tokens" || w.Usage.Output != 24 || w.Usage.Input < 10 {
		t.Errorf("whole: stop %q, usage %+v (max_tokens 24)", w.Stop, w.Usage)
	}
	s := got.Streamed
	if !slices.Equal(s.Types, w.Types) || !slices.Equal(s.Thinking, w.Thinking) || !slices.Equal(s.Text, w.Text) || s.Stop != w.Stop || s.Usage != w.Usage {
		t.Errorf("streamed %+v\nwhole %+v", s, w)
	}
	if got.ThinkingDeltas != w.Thinking[0] || got.TextDeltas != w.Text[0] {
		t.Errorf("deltas: thinking %q, text %q", got.ThinkingDeltas, got.TextDeltas)
	}
	ev := strings.Join(got.Events, " ")
	if !regexp.MustCompile(`^message_start content_block_start:thinking (content_block_delta )+content_block_stop content_block_start:text (content_block_delta )+content_block_stop message_delta message_stop$`).MatchString(ev) {
		t.Errorf("events: %s", ev)
	}
	if got.Counted != w.Usage.Input {
		t.Errorf("count_tokens %d, the reply's input tokens %d", got.Counted, w.Usage.Input)
	}
	for _, c := range []call{got.Call, got.StreamedCall} {
		if c.Stop != "tool_use" || len(c.Uses) != 1 || c.Uses[0].Name != "get_weather" || c.Uses[0].ID == "" ||
			c.Uses[0].Input.City == nil || len([]rune(*c.Uses[0].Input.City)) > 12 {
			t.Errorf("tool call: %+v", c)
		}
	}
	if got.Answered.Stop == "tool_use" || len(got.Answered.Types) == 0 || got.Answered.InputTokens <= got.CallInputTokens {
		t.Errorf("answered: %+v (the call's prompt: %d tokens)", got.Answered, got.CallInputTokens)
	}
	if b := got.BadModel; b == nil || b.Status != 404 || b.Type != "not_found_error" || b.Name != "NotFoundError" {
		t.Errorf("unknown model: %+v", b)
	}
}
