package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// granite4Templates are IBM's published Granite 4.0 chat templates as the
// npm package @huggingface/ollama-utils 0.0.18 (testdata/tokenizers'
// dependencies; MIT, the templates under IBM's Apache-2.0) carries them in
// src/chat-template-automap.ts, each the "gguf" field of an entry: the
// tokenizer.chat_template of Ollama's granite4 GGUF files. The 350m one is
// byte for byte ibm-granite/granite-4.0's template as llama.cpp 81ff7abe5
// keeps it (models/templates/ibm-granite-granite-4.0.jinja, same sha256);
// the latest one is the variant with a default system message.
var granite4Templates = []struct{ model, sha256 string }{
	{"library/granite4:350m", "9524df67b77a7b25a2dfee898f75b316a157eb9d855b51e32aeac79d7c8a83ce"},
	{"library/granite4:latest", "fed2756d2d24e127b951dcf139d0b03ab7db8ef23a456128ebc9c2db4901d476"},
}

// npmTemplate reads the "gguf" template of model from ollama-utils'
// automap (a TypeScript file: the string is a JavaScript literal) and
// checks its sha256.
func npmTemplate(t *testing.T, model, sum string) string {
	t.Helper()
	path := filepath.Join(testmodels.Root(t), "testdata", "tokenizers", "node_modules", "@huggingface", "ollama-utils", "src", "chat-template-automap.ts")
	b, err := os.ReadFile(path)
	if err != nil {
		ci.Missing(t, "%s missing: run `npm ci` in testdata/tokenizers (bash .ci/setup does): %v", path, err)
	}
	src := string(b)
	_, rest, ok := strings.Cut(src, "model: "+strconv.Quote(model)+",")
	if !ok {
		t.Fatalf("%s: no entry for %s", path, model)
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	lit, ok := strings.CutPrefix(rest, "gguf: ")
	if !ok {
		t.Fatalf("%s: %s has no gguf template next", path, model)
	}
	s, err := jsStringLiteral(lit)
	if err != nil {
		t.Fatalf("%s: %s: %v", path, model, err)
	}
	if h := sha256.Sum256([]byte(s)); hex.EncodeToString(h[:]) != sum {
		t.Fatalf("%s: %s's template has sha256 %x, want %s", path, model, h, sum)
	}
	return s
}

// jsStringLiteral decodes the JavaScript string literal at the start of s.
func jsStringLiteral(s string) (string, error) {
	if s == "" || s[0] != '"' && s[0] != '\'' {
		return "", fmt.Errorf("no string literal")
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			return b.String(), nil
		case c == '\n':
			return "", fmt.Errorf("line break inside a string literal")
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '0':
			b.WriteByte(0)
		case '\n':
		case 'x', 'u':
			n := 2
			if e == 'u' {
				n = 4
				if strings.HasPrefix(s[i:], "{") {
					end := strings.IndexByte(s[i:], '}')
					if end < 0 {
						return "", fmt.Errorf("bad \\u{} escape")
					}
					v, err := strconv.ParseUint(s[i+1:i+end], 16, 32)
					if err != nil {
						return "", err
					}
					b.WriteRune(rune(v))
					i += end + 1
					continue
				}
			}
			if i+n > len(s) {
				return "", fmt.Errorf("short \\%c escape", e)
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil {
				return "", err
			}
			i += n
			if r := rune(v); r >= 0xD800 && r < 0xDC00 && strings.HasPrefix(s[i:], `\u`) && i+6 <= len(s) {
				lo, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
				if err == nil && lo >= 0xDC00 && lo < 0xE000 {
					b.WriteRune((r-0xD800)<<10 + rune(lo) - 0xDC00 + 0x10000)
					i += 6
					continue
				}
			}
			b.WriteRune(rune(v))
		default:
			b.WriteByte(e)
		}
	}
	return "", fmt.Errorf("unterminated string literal")
}

// TestGranite4TemplatesMatchJinja2: Granite 4.0's published chat templates
// render every conversation, with and without the generation prompt, and
// tools with a tool call and its result, exactly as Python's jinja2 with
// transformers' settings renders them; where jinja2 raises we fail too.
// Granite 4.0 has no thinking switch.
func TestGranite4TemplatesMatchJinja2(t *testing.T) {
	convs := map[string][]Message{"user": convUser, "system and user": convSystem, "multi-turn": convMulti,
		"system and multi-turn": convAll, "finished exchange": convDone, "odd characters": convOdd,
		"thinking": convThink, "roles out of order": convOrder, "reasoning in history": convReasoning,
		"reasoning in the last turn": convReasoningLast, "reasoning and a tool": convReasoningTool}
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}}`),
	}
	call := ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"c"}`}
	msgs := []Message{{Role: System, Content: "Use tools."}, {Role: User, Content: "Weather in Paris?"},
		{Role: Assistant, ToolCalls: []ToolCall{call}}, {Role: Tool, Content: `{"temp": 21}`, ToolCallID: "call_1"}}
	var jobs []job
	for _, tc := range granite4Templates {
		src := npmTemplate(t, tc.model, tc.sha256)
		jobs = append(jobs, jobsFor(tc.model, src, "", "<|end_of_text|>", convs, []map[string]any{nil})...)
		for _, n := range []int{2, 4} {
			for _, gen := range []bool{true, false} {
				jobs = append(jobs, job{Template: src, Messages: msgs[:n], PyMessages: pyMessages(msgs[:n]), Tools: tools, AddGenerationPrompt: gen,
					EOS: "<|end_of_text|>", Now: "2026-01-02T03:04:05", name: fmt.Sprintf("%s / tools / %d messages / generation prompt %v", tc.model, n, gen)})
			}
		}
	}
	rendered := 0
	for _, r := range jinja2(t, jobs) {
		if r.Text != nil && strings.Contains(*r.Text, "<|start_of_role|>") {
			rendered++
		}
	}
	if rendered < len(jobs)*3/4 {
		t.Fatalf("jinja2 rendered only %d of %d jobs", rendered, len(jobs))
	}
	compare(t, jobs)
}
