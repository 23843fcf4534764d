package serve

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/pipeline/chat"
)

// TestDecodeMessages: a Messages request's system prompt, text, thinking,
// tool_use and tool_result blocks become the conversation the templates
// render (tool results as tool messages carrying the tool's name, before
// the user's text), its tools OpenAI's, its thinking the template's
// enable_thinking and the budget.
func TestDecodeMessages(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"Be brief."}],
	"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	"tool_choice":{"type":"tool","name":"get_weather"},
	"thinking":{"type":"enabled","budget_tokens":64},
	"stop_sequences":["END"],
	"messages":[
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"Ask the tool.","signature":"x"},{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"21 C"}]},{"type":"text","text":"And?"}]}]}`
	got, aerr := decodeMessages([]byte(body), "m", true)
	if aerr != nil {
		t.Fatal(aerr)
	}
	want := []chat.Message{
		{Role: chat.System, Content: "Be brief."},
		{Role: chat.User, Content: "Weather in Paris?"},
		{Role: chat.Assistant, Content: "Checking.", Reasoning: "Ask the tool.", ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: chat.Tool, Content: "21 C", ToolCallID: "toolu_1", Name: "get_weather"},
		{Role: chat.User, Content: "And?"},
	}
	if !reflect.DeepEqual(got.msgs, want) {
		t.Errorf("messages\n%+v\nwant\n%+v", got.msgs, want)
	}
	if got.smp.maxTokens != 10 || !reflect.DeepEqual(got.smp.stops, []string{"END"}) || got.budget == nil || *got.budget != 64 || got.vars["enable_thinking"] != true {
		t.Errorf("sampling %+v, budget %v, vars %v", got.smp, got.budget, got.vars)
	}
	if tl := got.smp.tools; tl == nil || tl.choice != "function" || tl.name != "get_weather" || len(tl.raw) != 1 {
		t.Fatalf("tools %+v", tl)
	}
	var tool struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(got.smp.tools.raw[0], &tool); err != nil || tool.Type != "function" || tool.Function.Name != "get_weather" || !strings.Contains(string(tool.Function.Parameters), `"city"`) {
		t.Errorf("tool %s: %v", got.smp.tools.raw[0], err)
	}
}

// TestAnthropicErrors: bad Messages requests get Anthropic's error shape
// with the status that fits; the API key is taken from x-api-key.
func TestAnthropicErrors(t *testing.T) {
	_, ts := newServer(t, Config{APIKey: "k"})
	key := []string{"x-api-key", "k"}
	for _, tc := range []struct {
		body   string
		hdr    []string
		status int
		typ    string
	}{
		{`{"model":"stories260K","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`, nil, 401, "authentication_error"},
		{`{"model":"stories260K","messages":[{"role":"user","content":"Hi"}]}`, key, 400, "invalid_request_error"},
		{`{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`, key, 404, "not_found_error"},
		{`{"model":"stories260K","max_tokens":5,"messages":[]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"messages":[{"role":"system","content":"Hi"}]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"Hi"}]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"thinking":{"type":"sometimes"},"messages":[{"role":"user","content":"Hi"}]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"Hi"}]}`, key, 400, "invalid_request_error"},
		{`{"model":"stories260K","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]`, key, 400, "invalid_request_error"},
	} {
		resp, data := post(t, ts.URL+"/v1/messages", tc.body, tc.hdr...)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.body, resp.StatusCode, data, tc.status, tc.typ)
		}
	}
	// With the key as a Bearer token too.
	resp, data := post(t, ts.URL+"/v1/messages/count_tokens", `{"model":"stories260K","messages":[{"role":"user","content":"Hi"}]}`, "Authorization", "Bearer k")
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	if json.Unmarshal(data, &n); resp.StatusCode != 200 || n.InputTokens < 3 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, data)
	}
}

// TestAnthropicStopSequence: a reply cut by one of stop_sequences ends
// before it, with stop_reason stop_sequence naming it.
func TestAnthropicStopSequence(t *testing.T) {
	_, ts := newServer(t, Config{})
	type message struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
		Usage        struct {
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	send := func(extra string) message {
		t.Helper()
		resp, data := post(t, ts.URL+"/v1/messages", `{"model":"stories260K","max_tokens":30,"temperature":0,"messages":[{"role":"user","content":"Once upon a time"}]`+extra+`}`)
		var m message
		if err := json.Unmarshal(data, &m); err != nil || resp.StatusCode != 200 || len(m.Content) != 1 || m.Content[0].Type != "text" {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		return m
	}
	full := send("")
	text := full.Content[0].Text
	if full.StopReason != "max_tokens" || full.StopSequence != nil || full.Usage.Output != 30 || len(text) < 20 {
		t.Fatalf("%+v", full)
	}
	stop := text[10:14]
	cut := send(`,"stop_sequences":["zzzz",` + jsonString(stop) + `]`)
	if cut.StopReason != "stop_sequence" || cut.StopSequence == nil || *cut.StopSequence != stop || cut.Content[0].Text != text[:strings.Index(text, stop)] {
		t.Errorf("stop at %q: %+v", stop, cut)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
