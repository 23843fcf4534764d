package serve

import (
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzDecodeChat: any body decodes to a request or to a client error, never
// a panic or a server error.
func FuzzDecodeChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["x"],"temperature":0.5,"top_p":0.9,"top_k":3,"seed":-1,"n":1,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":null}`, `{"model":"x"}`, `[]`, `{`, `{"model":"m","messages":[{"role":"system"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, msgs, smp, err := decodeChat(body, "m")
		if err != nil {
			if err.Status < 400 || err.Status >= 500 || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if len(msgs) == 0 {
			t.Fatal("no messages and no error")
		}
		checkSampling(t, smp)
	})
}

// FuzzDecodeCompletion is FuzzDecodeChat for text completions.
func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"Once"}`, `{"model":"m","prompt":["Once"]}`, `{"model":"m","prompt":[1,2,3]}`,
		`{"model":"m","prompt":"a","max_tokens":5,"max_completion_tokens":3,"stop":"\n","temperature":2}`,
		`{"model":"m","prompt":""}`, `null`, `{"model":"m","prompt":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, p, smp, err := decodeCompletion(body, "m")
		if err != nil {
			if err.Status < 400 || err.Status >= 500 || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if p.ids != nil && len(p.ids) == 0 {
			t.Fatal("empty id prompt accepted")
		}
		checkSampling(t, smp)
	})
}

func checkSampling(t *testing.T, smp sampling) {
	t.Helper()
	o := smp.options()
	if err := o.Validate(); err != nil {
		t.Fatalf("accepted sampling %+v gives invalid options: %v", smp, err)
	}
	if len(smp.stops) > MaxStops || smp.maxTokens < 0 {
		t.Fatalf("sampling %+v", smp)
	}
	_ = http.StatusOK
}

// FuzzDecodeMessages is FuzzDecodeChat for Anthropic's Messages requests.
func FuzzDecodeMessages(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":"s","thinking":{"type":"enabled","budget_tokens":3},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},` +
			`"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":"r"}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, `{"model":"m"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeMessages(body, "m", true)
		if err != nil {
			if err.Status < 400 || err.Status >= 500 || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if len(req.msgs) == 0 {
			t.Fatal("no messages and no error")
		}
		checkSampling(t, req.smp)
	})
}

// FuzzDecodeThinking: any reasoning fields give a format the server
// knows, a budget of at least -1, or a client error.
func FuzzDecodeThinking(f *testing.F) {
	for _, s := range []string{`{}`, `{"reasoning_format":"none","reasoning_budget":0}`, `{"reasoning_budget":-2}`,
		`{"chat_template_kwargs":{"enable_thinking":false,"n":3},"reasoning_effort":"high"}`, `{"reasoning_format":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fields thinkingFields
		if json.Unmarshal(body, &fields) != nil {
			return
		}
		format, budget, _, err := fields.decode()
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if _, perr := ParseReasoningFormat(string(format)); perr != nil || budget != nil && *budget < -1 {
			t.Fatalf("format %q, budget %v", format, budget)
		}
	})
}
