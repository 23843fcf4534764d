package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// A job is one rendering, given to testdata/render.py (Python's jinja2 with
// transformers' settings) and to Template.RenderWith.
type job struct {
	Template            string            `json:"template"`
	Messages            []Message         `json:"messages"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	BOS                 string            `json:"bos_token"`
	EOS                 string            `json:"eos_token"`
	Now                 string            `json:"now"`
	Vars                map[string]any    `json:"vars"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	PyMessages          any               `json:"py_messages,omitempty"`
	name                string
}

type jinja2Result struct {
	Text  *string `json:"text"`
	Error string  `json:"error"`
}

// jinja2 renders jobs with testdata/render.py. python3 with jinja2 is
// required in CI (.ci/setup installs python3-jinja2); elsewhere the test
// is skipped without it.
func jinja2(t *testing.T, jobs []job) []jinja2Result {
	t.Helper()
	in, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "render.py")
	cmd.Dir = "testdata"
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		ci.Missing(t, "python3 with jinja2 for testdata/render.py (python3-jinja2; .ci/setup installs it): %v\n%s", err, stderr.String())
	}
	var res []jinja2Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("render.py output: %v", err)
	}
	if len(res) != len(jobs) {
		t.Fatalf("render.py: %d results for %d jobs", len(res), len(jobs))
	}
	return res
}

// compare renders every job with our Template and checks it against
// jinja2's result byte for byte; where jinja2 raised, we must fail with
// ErrTemplate (and carry raise_exception's message).
func compare(t *testing.T, jobs []job) {
	t.Helper()
	want := jinja2(t, jobs)
	parsed := map[string]*Template{}
	failed := map[string]int{} // per template: report the first two
	fail := func(j job, format string, args ...any) {
		key := strings.SplitN(j.name, " / ", 2)[0]
		if failed[key]++; failed[key] <= 2 {
			t.Errorf(j.name+": "+format, args...)
		}
	}
	defer func() {
		for key, n := range failed {
			t.Errorf("%s: %d of the renderings differ from jinja2's", key, n)
		}
	}()
	for i, j := range jobs {
		key := j.Template + "\x00" + j.BOS + "\x00" + j.EOS
		tpl, ok := parsed[key]
		if !ok {
			var err error
			if tpl, err = Parse(j.Template, j.BOS, j.EOS); err != nil {
				if !errors.Is(err, ErrTemplate) || want[i].Text != nil {
					fail(j, "parse: %v", err)
				}
				continue
			}
			parsed[key] = tpl
		}
		now, err := time.Parse("2006-01-02T15:04:05", j.Now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.RenderWith(j.Messages, RenderOptions{AddGenerationPrompt: j.AddGenerationPrompt, Vars: j.Vars, Now: now, Tools: j.Tools})
		w := want[i]
		if w.Text == nil {
			msg, raised := strings.CutPrefix(w.Error, "TemplateError: ")
			if err == nil || !errors.Is(err, ErrTemplate) || raised && !strings.HasSuffix(err.Error(), "raise_exception: "+msg) {
				fail(j, "got %q, %v; jinja2 raised %s", got, err, w.Error)
			}
			continue
		}
		if err != nil {
			fail(j, "%v\njinja2: %q", err, *w.Text)
		} else if got != *w.Text {
			fail(j, "\n   got %q\njinja2 %q", got, *w.Text)
		}
	}
}

var (
	convUser   = []Message{{Role: User, Content: "Hello!"}}
	convSystem = []Message{{Role: System, Content: "You are a terse assistant."}, {Role: User, Content: "What is 2+2?"}}
	convMulti  = []Message{{Role: User, Content: "What is 2+2?"}, {Role: Assistant, Content: "4"}, {Role: User, Content: "And 3+3?"}}
	convAll    = []Message{{Role: System, Content: "Be brief."}, {Role: User, Content: "Hi"}, {Role: Assistant, Content: "Hello."}, {Role: User, Content: "Bye"}}
	convDone   = []Message{{Role: User, Content: "Say hi."}, {Role: Assistant, Content: "Hi."}}
	convOdd    = []Message{
		{Role: User, Content: "  Ünïcödé «quotes» \"double\" 'single' \\ back\n\ttabbed line\n  "},
		{Role: Assistant, Content: "\n日本語 and emoji 🙂 </s> \n"},
		{Role: User, Content: "{{ not a template }} {% raw %} <|im_end|>"}}
	convThink = []Message{{Role: System, Content: "Think first. /no_think"}, {Role: User, Content: "2+2?"},
		{Role: Assistant, Content: "<think>\nadd them\n</think>\n\n4"}, {Role: User, Content: "3+3?"}}
	convOrder = []Message{{Role: User, Content: "a"}, {Role: User, Content: "b"}}
	// Thinking in the history, as clients send it back (reasoning_content,
	// or gpt-oss's thinking): before the last user turn, in the last
	// turn, and beside a tool call and its result (with the tool's name).
	convReasoning = []Message{{Role: System, Content: "Be brief."}, {Role: User, Content: "2+2?"},
		{Role: Assistant, Content: "4", Reasoning: "\nadd two and two\n"}, {Role: User, Content: "3+3?"}}
	convReasoningLast = []Message{{Role: User, Content: "2+2?"}, {Role: Assistant, Content: "4", Reasoning: "add them: 4"}}
	convReasoningTool = []Message{{Role: User, Content: "Weather in Paris?"},
		{Role: Assistant, Reasoning: "I should ask the weather tool.", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: Tool, Content: `{"temp": 21}`, ToolCallID: "call_1", Name: "get_weather"},
		{Role: Assistant, Content: "21 degrees.", Reasoning: "The tool said 21."}}
)

// pyMessages are msgs as transformers is given them by a client: tool
// call arguments as objects, the thinking under both names templates read
// (reasoning_content and thinking); nil when msgs need no translation.
func pyMessages(msgs []Message) any {
	need := false
	for _, m := range msgs {
		need = need || m.Reasoning != "" || len(m.ToolCalls) > 0 || m.Name != ""
	}
	if !need {
		return nil
	}
	var out []map[string]any
	for _, m := range msgs {
		d := map[string]any{"role": m.Role, "content": m.Content}
		if len(m.ToolCalls) > 0 {
			var calls []any
			for _, c := range m.ToolCalls {
				var args any
				if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
					args = c.Arguments
				}
				calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}})
			}
			d["tool_calls"] = calls
		}
		if m.ToolCallID != "" {
			d["tool_call_id"] = m.ToolCallID
		}
		if m.Name != "" {
			d["name"] = m.Name
		}
		if m.Reasoning != "" {
			d["reasoning_content"] = m.Reasoning
			d["thinking"] = m.Reasoning
		}
		out = append(out, d)
	}
	return out
}

// jobsFor is every conversation, with and without the generation prompt,
// under each set of variables and each clock.
func jobsFor(name, src, bos, eos string, convs map[string][]Message, varSets []map[string]any) []job {
	var jobs []job
	for _, cname := range sortedKeys(convs) {
		for _, gen := range []bool{true, false} {
			for _, vars := range varSets {
				for _, now := range []string{"2026-07-08T12:00:00", "2025-01-05T09:03:07"} {
					jobs = append(jobs, job{Template: src, Messages: convs[cname], PyMessages: pyMessages(convs[cname]), AddGenerationPrompt: gen, BOS: bos, EOS: eos, Now: now, Vars: vars,
						name: fmt.Sprintf("%s / %s / generation prompt %v / vars %v / %s", name, cname, gen, vars, now)})
				}
			}
		}
	}
	return jobs
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestPublishedTemplatesMatchJinja2: the chat templates today's models
// publish (../shared/chat-templates, see its NOTICE.md) render every
// conversation exactly as Python's jinja2 with transformers' settings
// renders it, with and without the generation prompt, with Qwen 3's and
// SmolLM3's enable_thinking on and off, Llama 3.x's date_string, and a
// fixed clock for strftime_now; and fail where jinja2 raises (Gemma 2's
// refusal of a system message, roles that do not alternate).
func TestPublishedTemplatesMatchJinja2(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	thinking := []map[string]any{nil, {"enable_thinking": true}, {"enable_thinking": false}}
	templates := []struct {
		file, bos, eos string
		vars           []map[string]any
	}{
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", []map[string]any{nil, {"date_string": "02 Jan 2026"}}},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", []map[string]any{nil, {"date_string": "02 Jan 2026"}}},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>", []map[string]any{nil}},
		{"Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", thinking},
		{"microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", []map[string]any{nil}},
		{"HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>", thinking},
		{"google-gemma-2-2b-it.jinja", "<bos>", "<eos>", []map[string]any{nil}},
		{"google-gemma-3.jinja", "<bos>", "<eos>", []map[string]any{nil}},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>", []map[string]any{nil}},
		{"openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>", []map[string]any{nil, {"reasoning_effort": "high"}}},
	}
	convs := map[string][]Message{"user": convUser, "system and user": convSystem, "multi-turn": convMulti,
		"system and multi-turn": convAll, "finished exchange": convDone, "odd characters": convOdd,
		"thinking": convThink, "roles out of order": convOrder, "reasoning in history": convReasoning,
		"reasoning in the last turn": convReasoningLast, "reasoning and a tool": convReasoningTool}
	var jobs []job
	for _, tc := range templates {
		src, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatalf("the published chat templates are expected in ../shared/chat-templates: %v", err)
		}
		jobs = append(jobs, jobsFor(tc.file, string(src), tc.bos, tc.eos, convs, tc.vars)...)
	}
	compare(t, jobs)
}

// TestTemplatesMatchJinja2: the small templates of testdata/templates and
// the whitespace, literal, tojson and strftime corners of testdata/jinja2
// render as jinja2 renders them.
func TestTemplatesMatchJinja2(t *testing.T) {
	files, _ := filepath.Glob("testdata/templates/*.jinja")
	more, _ := filepath.Glob("testdata/jinja2/*.jinja")
	files = append(files, more...)
	if len(files) < 10 {
		t.Fatalf("%d test templates", len(files))
	}
	convs := map[string][]Message{"user": convUser, "system and multi-turn": convAll, "finished exchange": convDone,
		"odd characters": convOdd, "roles out of order": convOrder}
	var jobs []job
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, jobsFor(file, string(src), "<s>", "</s>", convs, []map[string]any{nil, {"flag": true, "n": 3}})...)
	}
	compare(t, jobs)
}

// TestExpressionsMatchJinja2: each expression of
// testdata/jinja2/expressions.txt (filters, tests, string methods,
// slicing, operators, literals) prints as jinja2 prints it. The engine's
// known differences are listed in the package documentation.
func TestExpressionsMatchJinja2(t *testing.T) {
	data, err := os.ReadFile("testdata/jinja2/expressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []job
	for _, expr := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		jobs = append(jobs, job{Template: "{{ " + expr + " }}", Messages: convDone, Now: "2026-07-08T12:00:00", name: expr})
	}
	compare(t, jobs)
}

// TestBrokenTemplatesFail: templates that jinja2 refuses, to parse or to
// render, are errors here too (ErrTemplate), never a rendering or a panic.
func TestBrokenTemplatesFail(t *testing.T) {
	var jobs []job
	for _, src := range []string{
		"{% for m in messages %}{{ m.content }}",
		"{{ messages[0].content ",
		"text {# comment without an end",
		"{% if true %}a{% else %}b",
		"{{ (1 + 2 }}",
		"{{ [1, 2) }}",
		"{% raw %}never closed",
		"{{ 'unterminated }}",
		"{% endfor %}",
		"{{ raise_exception('refused: ' ~ messages | length) }}",
		"{% if messages[0].role == 'user' %}{{ raise_exception('no users') }}{% endif %}",
		"{{ messages[0].content.nosuchmethod() }}",
		"{{ nosuchfunction() }}",
		"{{ messages | nosuchfilter }}",
		"{{ messages | tojson(bad=1) }}",
		"{{ undefined_thing | tojson }}",
	} {
		jobs = append(jobs, job{Template: src, Messages: convUser, AddGenerationPrompt: true, Now: "2026-07-08T12:00:00", name: src})
	}
	want := jinja2(t, jobs)
	for i, j := range jobs {
		if want[i].Text != nil {
			t.Fatalf("%q: jinja2 rendered %q", j.Template, *want[i].Text)
		}
	}
	compare(t, jobs)
}

// TestWithVars: a template given enable_thinking by WithVars renders Qwen
// 3's and SmolLM3's no-thinking prompts as jinja2 does with that variable.
func TestWithVars(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	var jobs []job
	for _, file := range []string{"Qwen-Qwen3-0.6B.jinja", "HuggingFaceTB-SmolLM3-3B.jinja"} {
		src, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{Template: string(src), Messages: convAll, AddGenerationPrompt: true, EOS: "<|im_end|>",
			Now: "2026-07-08T12:00:00", Vars: map[string]any{"enable_thinking": false}, name: file})
	}
	want := jinja2(t, jobs)
	for i, j := range jobs {
		tpl, err := Parse(j.Template, "", j.EOS)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.WithVars(j.Vars).Render(j.Messages, true)
		if err != nil || want[i].Text == nil || got != *want[i].Text {
			t.Errorf("%s: got %q, %v; jinja2 %+v", j.name, got, err, want[i])
		}
		if plain, _ := tpl.Render(j.Messages, true); plain == got {
			t.Errorf("%s: enable_thinking false changed nothing", j.name)
		}
	}
}

func TestPlainAndMarkers(t *testing.T) {
	msgs := []Message{{Role: System, Content: "Be brief."}, {Role: User, Content: "Hi"}, {Role: Assistant, Content: "Hello."}, {Role: User, Content: "Bye"}}
	got, _ := Plain().Render(msgs, true)
	if want := "Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Bye\nAssistant:"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	if _, err := Parse("{% for %}", "", ""); !errors.Is(err, ErrTemplate) {
		t.Errorf("a broken template: %v", err)
	}
}

// TestEndOfTurn: each published template's end-of-turn markers are the
// stop tokens its publisher lists (generation_config.json's eos_token_id)
// that the template writes: Llama 3.1's <|eot_id|> and <|eom_id|>, Phi-3.5's
// <|end|> and its EOS <|endoftext|>, gpt-oss's <|return|> and <|call|> (not
// <|end|>, which ends the analysis message inside a reply), Mistral's EOS.
func TestEndOfTurn(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	for _, tc := range []struct {
		file, eos string
		want      []string
	}{
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>", []string{"<|eot_id|>", "<|eom_id|>"}},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", "<|eot_id|>", []string{"<|eot_id|>"}},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_end|>", []string{"<|im_end|>"}},
		{"Qwen-Qwen3-0.6B.jinja", "<|im_end|>", []string{"<|im_end|>"}},
		{"HuggingFaceTB-SmolLM3-3B.jinja", "<|im_end|>", []string{"<|im_end|>"}},
		{"microsoft-Phi-3.5-mini-instruct.jinja", "<|endoftext|>", []string{"<|end|>", "<|endoftext|>"}},
		{"google-gemma-2-2b-it.jinja", "<eos>", []string{"<end_of_turn>"}},
		{"google-gemma-3.jinja", "<eos>", []string{"<end_of_turn>"}},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "</s>", []string{"</s>"}},
		{"openai-gpt-oss-120b.jinja", "<|return|>", []string{"<|return|>", "<|call|>"}},
	} {
		src, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src), "<s>", tc.eos)
		if err != nil {
			t.Fatal(err)
		}
		got := tpl.EndOfTurn()
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: end of turn %q, want %q", tc.file, got, tc.want)
		}
	}
	if got := Plain().EndOfTurn(); len(got) != 0 {
		t.Errorf("plain: %q", got)
	}
}
