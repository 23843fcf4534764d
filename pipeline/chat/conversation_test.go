package chat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

func stories(t *testing.T, maxCache int) *pipeline.Model {
	t.Helper()
	ck, err := checkpoint.Load(testmodels.Path(t, "stories260K.bin"), checkpoint.Options{Tokenizer: testmodels.Path(t, "tok512.model")})
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{})
	t.Cleanup(func() { b.Close() })
	m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: b, MaxCache: maxCache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func reply(t *testing.T, c *Conversation, text string, gen pipeline.GenerateOptions) ([]int, string) {
	t.Helper()
	var ids []int
	var out string
	for tok, err := range c.Send(context.Background(), text, gen) {
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
		out += tok.Piece
	}
	return ids, out
}

// TestTurnsReuseTheCache: a second turn prefills only its new tokens (plus
// the last reply token, which no step has run yet), and its reply equals
// that of a fresh session given the whole conversation.
func TestTurnsReuseTheCache(t *testing.T) {
	m := stories(t, 256)
	c, err := New(m, Plain(), Options{System: "A story."})
	if err != nil {
		t.Fatal(err)
	}
	gen := pipeline.GenerateOptions{MaxTokens: 12}
	_, first := reply(t, c, "Tell me about a cat.", gen)
	before := len(c.s.History())
	ids, _ := reply(t, c, "What did the cat do?", gen)
	mt := c.Metrics()
	hist := c.s.History()
	promptEnd := len(hist) - len(ids)
	if newTokens := promptEnd - before; mt.PrefillTokens != newTokens+1 {
		t.Errorf("second turn ran %d tokens, want the %d new ones + 1", mt.PrefillTokens, newTokens)
	}
	if mt.PrefillTokens >= promptEnd/2 {
		t.Errorf("second turn ran %d of %d context tokens", mt.PrefillTokens, promptEnd)
	}
	// The rendered conversation, tokenized afresh, is what the cache holds.
	msgs := c.Messages()
	if len(msgs) != 5 || msgs[0].Role != System || msgs[2].Content != first[1:] {
		t.Errorf("messages %+v (first reply %q)", msgs, first)
	}
	fresh := m.NewSession()
	var want []int
	for tok, err := range fresh.Generate(context.Background(), pipeline.Prompt{IDs: hist[:promptEnd]}, gen) {
		if err != nil {
			t.Fatal(err)
		}
		if tok.ID >= 0 {
			want = append(want, tok.ID)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("reply with the cache reused %v, from scratch %v", ids, want)
	}
}

// TestDropOldTurns: when the cache fills, the oldest turns go, the system
// message stays, and the conversation goes on.
func TestDropOldTurns(t *testing.T) {
	m := stories(t, 64)
	c, err := New(m, Plain(), Options{System: "Stories.", Reserve: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		reply(t, c, fmt.Sprintf("Turn %d: tell me more about the dog.", i), pipeline.GenerateOptions{MaxTokens: 10})
		if n := len(c.s.History()); n > 64 {
			t.Fatalf("turn %d: %d tokens in a cache of 64", i, n)
		}
	}
	if c.Dropped() == 0 {
		t.Error("no turn was dropped")
	}
	msgs := c.Messages()
	if msgs[0].Role != System || msgs[0].Content != "Stories." || msgs[len(msgs)-2].Content != "Turn 5: tell me more about the dog." {
		t.Errorf("messages after dropping: %+v", msgs)
	}
	c.Reset()
	if len(c.Messages()) != 1 {
		t.Errorf("after Reset: %+v", c.Messages())
	}
	long := ""
	for range 40 {
		long += "dog and cat "
	}
	for _, err := range c.Send(context.Background(), long, pipeline.GenerateOptions{MaxTokens: 4}) {
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrTooLong) {
			t.Errorf("a message longer than the cache: %v", err)
		}
		return
	}
	t.Error("a message longer than the cache: no error")
}

// TestControlTokensInTemplates: control tokens a template writes out (here
// Llama 2's <s> and </s>) become their ids, not the text's pieces.
func TestControlTokensInTemplates(t *testing.T) {
	m := stories(t, 128)
	c, err := New(m, Plain(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.encode("<s>[INST] Hi [/INST] Hello </s><s>[INST] Bye [/INST]")
	if err != nil {
		t.Fatal(err)
	}
	hi, _ := m.Encode("[INST] Hi [/INST] Hello ")
	bye, _ := m.Encode("[INST] Bye [/INST]")
	want := append(append(append([]int{1}, hi...), 2, 1), bye...)
	if !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
}

// TestTemplateStopTokens: a template's end-of-turn markers become stop
// token ids, for a stateless Render (gpurun serve) and for a Conversation
// (gpurun chat): Mistral Small 3.2's template ends a turn with eos_token,
// which is the control token </s> (2) of the stories model's SentencePiece
// vocabulary; gpt-oss's markers are not in that vocabulary and add none.
func TestTemplateStopTokens(t *testing.T) {
	m := stories(t, 256)
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	for _, tc := range []struct {
		file string
		want []int
	}{
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", []int{2}},
		{"openai-gpt-oss-120b.jinja", nil},
	} {
		src, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src), "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		p, err := Render(m, tpl, []Message{{Role: User, Content: "Hello"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.StopTokens, tc.want) {
			t.Errorf("%s: Render's stop tokens %v, want %v", tc.file, p.StopTokens, tc.want)
		}
		c, err := New(m, tpl, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.StopTokens(), tc.want) {
			t.Errorf("%s: the conversation's stop tokens %v, want %v", tc.file, c.StopTokens(), tc.want)
		}
	}
}
