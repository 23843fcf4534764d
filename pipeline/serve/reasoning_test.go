package serve

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// harmonyTemplate is a small template of ours in gpt-oss's harmony
// layout: messages <|start|>ROLE<|channel|>CHANNEL<|message|>...<|end|>,
// an assistant's thinking on the analysis channel; the generation prompt
// opens the analysis channel.
const harmonyTemplate = `{% for m in messages %}<|start|>{{ m.role }}
{%- if m.role == "assistant" and m.thinking %}<|channel|>analysis<|message|>{{ m.thinking }}<|end|><|start|>assistant{% endif %}
{%- if m.role == "assistant" %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{% endfor %}
{%- if add_generation_prompt %}<|start|>assistant<|channel|>analysis<|message|>{% endif %}`

// thinkTemplates are the test templates of each thinking syntax: ours
// with <think> tags (testdata/anthropic/think.jinja), and harmonyTemplate.
func thinkTemplates(t *testing.T) map[string]*chat.Template {
	src, err := os.ReadFile("../../testdata/anthropic/think.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := chat.Parse(string(src), "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	harmony, err := chat.Parse(harmonyTemplate, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	if tags.ThinkSyntax() != chat.ThinkTags || harmony.ThinkSyntax() != chat.ThinkHarmony {
		t.Fatalf("syntaxes %v, %v", tags.ThinkSyntax(), harmony.ThinkSyntax())
	}
	return map[string]*chat.Template{"tags": tags, "harmony": harmony}
}

type reasoningReply struct {
	Choices []struct {
		Message struct {
			Content   string  `json:"content"`
			Reasoning *string `json:"reasoning_content"`
		} `json:"message"`
		Delta struct {
			Content   string `json:"content"`
			Reasoning string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func chatReply(t *testing.T, url, body string) reasoningReply {
	t.Helper()
	resp, data := post(t, url+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, data)
	}
	var r reasoningReply
	if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %v", data, err)
	}
	return r
}

// TestReasoning: with a template whose generation prompt opens the
// thinking (<think> tags, or harmony's analysis channel), greedy on
// stories260K: a reasoning_budget of 6 makes the thinking exactly the
// first 6 tokens the model writes without one (reasoning_format none,
// max_tokens 6); in format none the content is those, then the syntax's
// end marker, then the answer of format deepseek; deepseek-legacy gives
// both; streamed, the reasoning_content deltas and then the content
// deltas join into the whole reply's; the server's budget does as the
// request's; a budget of 0 and enable_thinking false leave no thinking.
func TestReasoning(t *testing.T) {
	m := storiesModelWith(t, pipeline.Options{MaxCache: 512, Slots: 1})
	for name, tpl := range thinkTemplates(t) {
		t.Run(name, func(t *testing.T) {
			_, ts := newServer(t, Config{Model: m, Template: tpl})
			const msgs = `"messages":[{"role":"system","content":"Tell stories."},{"role":"user","content":"Once upon a time"}]`
			req := func(extra string) string {
				return `{"model":"stories260K","temperature":0,` + msgs + extra + `}`
			}
			first := chatReply(t, ts.URL, req(`,"max_tokens":6,"reasoning_format":"none"`)).Choices[0].Message
			if first.Reasoning != nil || first.Content == "" {
				t.Fatalf("format none: %+v", first)
			}
			wantReasoning := first.Content
			if name == "tags" {
				wantReasoning = strings.TrimSpace(wantReasoning)
			}

			whole := chatReply(t, ts.URL, req(`,"max_tokens":80,"reasoning_budget":6`))
			msg := whole.Choices[0].Message
			if msg.Reasoning == nil || *msg.Reasoning != wantReasoning {
				t.Fatalf("reasoning %v, want the first 6 tokens %q", msg.Reasoning, wantReasoning)
			}
			if msg.Content == "" || strings.Contains(msg.Content, "think>") || strings.Contains(msg.Content, "<|") {
				t.Errorf("content %q", msg.Content)
			}
			if whole.Usage.CompletionTokens > 80 {
				t.Errorf("%d completion tokens, max_tokens 80", whole.Usage.CompletionTokens)
			}

			end := tpl.ThinkSyntax().End()
			raw := chatReply(t, ts.URL, req(`,"max_tokens":80,"reasoning_budget":6,"reasoning_format":"none"`)).Choices[0].Message
			rest, ok := strings.CutPrefix(raw.Content, first.Content+end)
			if raw.Reasoning != nil || !ok || strings.TrimLeft(rest, " \n") != msg.Content {
				t.Errorf("format none: %q, want %q, the end marker %q, then %q", raw.Content, first.Content, end, msg.Content)
			}
			legacy := chatReply(t, ts.URL, req(`,"max_tokens":80,"reasoning_budget":6,"reasoning_format":"deepseek-legacy"`)).Choices[0].Message
			if legacy.Content != raw.Content || legacy.Reasoning == nil || *legacy.Reasoning != *msg.Reasoning {
				t.Errorf("deepseek-legacy: %+v", legacy)
			}

			var sr, sc string
			for _, c := range streamChat(t, ts.URL, req(`,"max_tokens":80,"reasoning_budget":6,"stream":true`)) {
				d := c.Choices[0].Delta
				if d.Reasoning != "" && sc != "" {
					t.Errorf("reasoning %q streamed after content %q", d.Reasoning, sc)
				}
				sr, sc = sr+d.Reasoning, sc+d.Content
			}
			if sr != *msg.Reasoning || sc != msg.Content {
				t.Errorf("streamed %q, %q; whole %q, %q", sr, sc, *msg.Reasoning, msg.Content)
			}

			// The server's budget.
			_, ts2 := newServer(t, Config{Model: m, Template: tpl, ReasoningBudget: 6})
			if got := chatReply(t, ts2.URL, req(`,"max_tokens":80`)).Choices[0].Message; got.Reasoning == nil || *got.Reasoning != *msg.Reasoning || got.Content != msg.Content {
				t.Errorf("Config.ReasoningBudget 6: %+v", got)
			}

			// No thinking.
			for _, extra := range []string{`,"reasoning_budget":0`, `,"chat_template_kwargs":{"enable_thinking":false}`} {
				if name == "harmony" && strings.Contains(extra, "kwargs") {
					continue // the harmony template has no such switch
				}
				got := chatReply(t, ts.URL, req(`,"max_tokens":12`+extra)).Choices[0].Message
				if got.Reasoning != nil || got.Content == "" {
					t.Errorf("%s: %+v", extra, got)
				}
			}
		})
	}
}

// streamChat posts a streamed chat request and returns its chunks.
func streamChat(t *testing.T, url, body string) []reasoningReply {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", body, resp.StatusCode)
	}
	var out []reasoningReply
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return out
		}
		var c reasoningReply
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if len(c.Choices) == 1 {
			out = append(out, c)
		}
	}
	t.Fatalf("stream ended without [DONE]: %v", sc.Err())
	return nil
}

// TestReasoningOpenAIClient: the official openai npm client reads the
// thinking apart from the answer, whole (message.reasoning_content) and
// streamed (delta.reasoning_content), as the HTTP test above reads them.
func TestReasoningOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "openai"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "openai"))
	}
	if err != nil {
		ci.Missing(t, "node and the openai package of testdata/openai (bash .ci/setup installs them): %v", err)
	}
	m := storiesModelWith(t, pipeline.Options{MaxCache: 512, Slots: 1})
	_, ts := newServer(t, Config{Model: m, Template: thinkTemplates(t)["tags"]})
	want := chatReply(t, ts.URL, `{"model":"stories260K","temperature":0,"max_tokens":40,"reasoning_budget":6,"messages":[{"role":"user","content":"Once upon a time"}]}`).Choices[0].Message
	if want.Reasoning == nil || *want.Reasoning == "" || want.Content == "" {
		t.Fatalf("over HTTP: %+v", want)
	}
	cmd := exec.Command(node, filepath.Join(pkg, "reasoning.mjs"), ts.URL+"/v1", "stories260K")
	cmd.Dir = pkg
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s", err, stderr)
	}
	var got struct {
		Reasoning, Content, StreamedReasoning, StreamedContent string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Reasoning != *want.Reasoning || got.StreamedReasoning != *want.Reasoning || got.Content != want.Content || got.StreamedContent != want.Content {
		t.Errorf("client saw %+v\nwant reasoning %q, content %q", got, *want.Reasoning, want.Content)
	}
}

// TestTemplateKwargs: chat_template_kwargs, enable_thinking and
// reasoning_effort reach the template (a template that writes more for
// them makes a longer prompt), and an assistant message's
// reasoning_content (or thinking) reaches it as the turn's thinking.
func TestTemplateKwargs(t *testing.T) {
	tpl, err := chat.Parse(`{% for m in messages %}{{ m.role }}: {% if m.reasoning_content %}(thought: {{ m.thinking }}) {% endif %}{{ m.content }}
{% endfor %}{% if reasoning_effort == "high" %}Think hard. {% endif %}{% if enable_thinking is false %}Do not think. {% endif %}{% if style %}In the style of {{ style }}. {% endif %}assistant:`, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, Config{Template: tpl})
	prompt := func(extra, history string) int {
		t.Helper()
		r := chatReply(t, ts.URL, `{"model":"stories260K","temperature":0,"max_tokens":1,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."`+
			history+`},{"role":"user","content":"Once upon a time"}]`+extra+`}`)
		return r.Usage.PromptTokens
	}
	base := prompt("", "")
	for _, extra := range []string{`,"reasoning_effort":"high"`, `,"enable_thinking":false`, `,"chat_template_kwargs":{"style":"a fable"}`, `,"chat_template_kwargs":{"enable_thinking":false}`} {
		if n := prompt(extra, ""); n <= base {
			t.Errorf("%s: %d prompt tokens, %d without", extra, n, base)
		}
	}
	for _, history := range []string{`,"reasoning_content":"greet back"`, `,"thinking":"greet back"`} {
		if n := prompt("", history); n <= base {
			t.Errorf("%s: %d prompt tokens, %d without", history, n, base)
		}
	}
	for _, extra := range []string{`,"reasoning_effort":"extreme"`, `,"reasoning_format":"qwen"`, `,"reasoning_budget":-2`, `,"chat_template_kwargs":[1]`} {
		resp, data := post(t, ts.URL+"/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"Hi"}]`+extra+`}`)
		if resp.StatusCode != 400 || !strings.Contains(string(data), "invalid") {
			t.Errorf("%s: %d %s", extra, resp.StatusCode, data)
		}
	}
}

// TestThinkEndTokens: on the published tokenizers, a budget's end marker
// is the model's own tokens: Qwen 3's </think> its one added token, and
// gpt-oss's harmony markers its control tokens, which decode back to the
// marker's text (so that the splitter reads gpt-oss's channels).
func TestThinkEndTokens(t *testing.T) {
	for _, tc := range []struct {
		tokenizer       string
		vocab, bos, eos int
		syntax          chat.ThinkSyntax
		want            []int
	}{
		{"tokenizer-qwen3", 151669, -1, 151645, chat.ThinkTags, []int{198, 151668, 271}},
		{"tokenizer-gptoss", 201088, 199998, 200002, chat.ThinkHarmony, []int{200007, 200006, 173781, 200005, 17196, 200008}},
	} {
		m := randomChatModel(t, tc.tokenizer, tc.vocab, tc.bos, tc.eos)
		end := tc.syntax.End()
		ids, err := chat.EncodeText(m, end)
		if err != nil || !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %q is %v, %v; want %v", tc.tokenizer, end, ids, err, tc.want)
		}
		if text, err := m.Decode(ids); err != nil || text != end {
			t.Errorf("%s: %v decodes to %q, %v", tc.tokenizer, ids, text, err)
		}
	}
}
