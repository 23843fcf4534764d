package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestSplit: replies in each syntax give their thinking and their answer,
// whole and streamed in pieces of every size (the streamed parts, joined,
// equal the whole split: nothing is lost or repeated at a marker cut in
// two).
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name              string
		syntax            ThinkSyntax
		open              bool
		reply             string
		reasoning, reply2 string
	}{
		{"tags", ThinkTags, false, "<think>\nadd 2 and 2\n</think>\n\nIt is 4.", "add 2 and 2", "It is 4."},
		{"tags after space", ThinkTags, false, "\n<think>a < b</thi</think>4", "a < b</thi", "4"},
		{"tags, no thinking", ThinkTags, false, "Just 4 <think>no</think>", "", "Just 4 <think>no</think>"},
		{"tags, empty thinking", ThinkTags, false, "<think>\n\n</think>\n\n4", "", "4"},
		{"tags, open in the prompt", ThinkTags, true, "\nhmm\n</think>\n4", "hmm", "4"},
		{"tags, never closed", ThinkTags, true, "still thinking <", "still thinking <", ""},
		{"tags, a lone <", ThinkTags, false, "<", "", "<"},
		{"harmony", ThinkHarmony, false, "<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4", "User asks 2+2.", "4"},
		{"harmony, open", ThinkHarmony, true, "think <|x|> more<|end|><|start|>assistant<|channel|>final<|message|>done", "think <|x|> more", "done"},
		{"harmony, plain answer", ThinkHarmony, false, "4, plainly", "", "4, plainly"},
		{"harmony, final only", ThinkHarmony, false, "<|channel|>final<|message|>4<|return|>", "", "4"},
		{"none", NoThinking, false, "<think>x</think>y", "", "<think>x</think>y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := Split(tc.syntax, tc.open, tc.reply)
			if r != tc.reasoning || c != tc.reply2 {
				t.Fatalf("split %q: reasoning %q, content %q; want %q, %q", tc.reply, r, c, tc.reasoning, tc.reply2)
			}
			for size := 1; size <= 5; size++ {
				p := NewSplitter(tc.syntax, tc.open)
				var gr, gc string
				for i := 0; i < len(tc.reply); i += size {
					dr, dc := p.Add(tc.reply[i:min(i+size, len(tc.reply))])
					gr, gc = gr+dr, gc+dc
				}
				dr, dc := p.Flush()
				if gr+dr != r || gc+dc != c {
					t.Errorf("in pieces of %d: %q, %q", size, gr+dr, gc+dc)
				}
			}
		})
	}
}

// TestSplitterThinking: Thinking tells when the reply is inside its
// thinking, which a budget counts.
func TestSplitterThinking(t *testing.T) {
	p := NewSplitter(ThinkTags, false)
	var states []bool
	for _, piece := range []string{"<think>", "a", "b", "</think>", "c"} {
		p.Add(piece)
		states = append(states, p.Thinking())
	}
	want := []bool{true, true, true, false, false}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("thinking after each piece %v, want %v", states, want)
		}
	}
	if !NewSplitter(ThinkHarmony, true).Thinking() || NewSplitter(NoThinking, true).Thinking() {
		t.Error("an open prompt starts in the thinking where the syntax has one")
	}
}

// TestThinkSyntax: the published templates' thinking syntax, and the
// prompts that leave the thinking open.
func TestThinkSyntax(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "..", "shared", "chat-templates")
	for file, want := range map[string]ThinkSyntax{
		"Qwen-Qwen3-0.6B.jinja":                  ThinkTags,
		"HuggingFaceTB-SmolLM3-3B.jinja":         ThinkTags,
		"openai-gpt-oss-120b.jinja":              ThinkHarmony,
		"Qwen-Qwen2.5-7B-Instruct.jinja":         NoThinking,
		"meta-llama-Llama-3.1-8B-Instruct.jinja": NoThinking,
	} {
		src, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src), "", "")
		if err != nil {
			t.Fatal(err)
		}
		if got := tpl.ThinkSyntax(); got != want {
			t.Errorf("%s: %v, want %v", file, got, want)
		}
	}
	if !ThinkTags.Opens("<|im_start|>assistant\n<think>\n") || ThinkTags.Opens("<think>\n\n</think>\n\n") || ThinkTags.Opens("x") {
		t.Error("ThinkTags.Opens")
	}
	if !ThinkHarmony.Opens("<|start|>assistant<|channel|>analysis<|message|>") || ThinkHarmony.Opens("<|start|>assistant") {
		t.Error("ThinkHarmony.Opens")
	}
}

// FuzzSplitter: any reply, in pieces of any size, splits as it does
// whole, and the thinking and answer hold no more than the reply.
func FuzzSplitter(f *testing.F) {
	for _, s := range []string{"<think>a</think>b", "\n<think>\nx</thi</think>\n\ny", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b", "plain", "<", "<|"} {
		f.Add(s, uint8(1), false)
		f.Add(s, uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, reply string, size uint8, open bool) {
		n := int(size%8) + 1
		for _, syntax := range []ThinkSyntax{NoThinking, ThinkTags, ThinkHarmony} {
			r, c := Split(syntax, open, reply)
			if len(r)+len(c) > len(reply) {
				t.Fatalf("%v: %q gave %q and %q", syntax, reply, r, c)
			}
			p := NewSplitter(syntax, open)
			var gr, gc string
			for i := 0; i < len(reply); i += n {
				dr, dc := p.Add(reply[i:min(i+n, len(reply))])
				gr, gc = gr+dr, gc+dc
			}
			dr, dc := p.Flush()
			if gr+dr != r || gc+dc != c {
				t.Fatalf("%v, pieces of %d: %q, %q; whole %q, %q", syntax, n, gr+dr, gc+dc, r, c)
			}
		}
	})
}
