package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

func storiesCheckpoint(t testing.TB) *model.Checkpoint {
	t.Helper()
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// cpuBackend is a CPU backend (exact math) closed when the test ends.
func cpuBackend(t testing.TB) gpu.Backend {
	b := cpu.New(cpu.Options{})
	t.Cleanup(func() { b.Close() })
	return b
}

// load loads ck with opts, on a CPU backend where opts names no Backend.
func load(t testing.TB, ck *model.Checkpoint, opts pipeline.Options) *pipeline.Model {
	t.Helper()
	if opts.Backend == nil {
		opts.Backend = cpuBackend(t)
	}
	m, err := pipeline.FromCheckpoint(context.Background(), ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// collect runs a generation and returns its ids (ID -1 flushes excluded).
func collect(t testing.TB, s *pipeline.Session, p pipeline.Prompt, o pipeline.GenerateOptions) []int {
	t.Helper()
	var ids []int
	for tok, err := range s.Generate(context.Background(), p, o) {
		if err != nil {
			t.Fatal(err)
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
	}
	return ids
}

// TestGoldenGreedy: every golden prompt, fed as ids, yields exactly
// llama.cpp's 64 greedy ids, with several prefill bucket layouts (one graph,
// chunks of the largest bucket, decode only).
func TestGoldenGreedy(t *testing.T) {
	ck := storiesCheckpoint(t)
	for _, layout := range []struct {
		name  string
		sizes []int
	}{{"default buckets", nil}, {"chunks of 2 and 4", []int{2, 4}}, {"decode only", []int{1}}} {
		m := load(t, ck, pipeline.Options{MaxCache: 128, PrefillSizes: layout.sizes})
		for _, tc := range testmodels.StoriesCases(t) {
			t.Run(layout.name+"/"+tc.Name, func(t *testing.T) {
				s := m.NewSession()
				got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs)})
				if !slices.Equal(got, tc.GeneratedIDs) {
					t.Errorf("ids\n got %v\nwant %v", got, tc.GeneratedIDs)
				}
				mt := s.Metrics()
				if mt.PromptTokens != len(tc.PromptIDs) || mt.GeneratedTokens != len(tc.GeneratedIDs) || mt.StopReason != pipeline.StopMaxTokens {
					t.Errorf("metrics %+v", mt)
				}
				if mt.TimeToFirstToken <= 0 || mt.TimeToFirstToken > time.Minute {
					t.Errorf("time to first token %v", mt.TimeToFirstToken)
				}
			})
		}
	}
}

// TestContinueAndTakeTurns: a conversation split over several Generate
// calls, interleaved with another session on the same cache, still follows
// the golden greedy continuation.
func TestContinueAndTakeTurns(t *testing.T) {
	cases := testmodels.StoriesCases(t)
	a, b := cases[0], cases[1]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128})
	sa, sb := m.NewSession(), m.NewSession()
	var got []int
	got = append(got, collect(t, sa, pipeline.Prompt{IDs: a.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 10})...)
	gotB := collect(t, sb, pipeline.Prompt{IDs: b.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 7})
	got = append(got, collect(t, sa, pipeline.Prompt{IDs: []int{}}, pipeline.GenerateOptions{MaxTokens: 20})...)
	gotB = append(gotB, collect(t, sb, pipeline.Prompt{IDs: []int{}}, pipeline.GenerateOptions{MaxTokens: 5})...)
	if !slices.Equal(got, a.GeneratedIDs[:30]) {
		t.Errorf("session a\n got %v\nwant %v", got, a.GeneratedIDs[:30])
	}
	if !slices.Equal(gotB, b.GeneratedIDs[:12]) {
		t.Errorf("session b\n got %v\nwant %v", gotB, b.GeneratedIDs[:12])
	}
}

// TestStopTokens: a config stop token ends generation before it is
// streamed, at the first place the golden run produced it.
func TestStopTokens(t *testing.T) {
	tc := testmodels.StoriesCases(t)[0]
	ck := storiesCheckpoint(t)
	for _, at := range []int{0, 5, 17} {
		stop := tc.GeneratedIDs[at]
		first := slices.Index(tc.GeneratedIDs, stop)
		ck2 := *ck
		ck2.Config.StopTokens = []int{stop}
		m := load(t, &ck2, pipeline.Options{MaxCache: 128})
		s := m.NewSession()
		got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 64})
		if !slices.Equal(got, tc.GeneratedIDs[:first]) {
			t.Errorf("stop token %d: got %v, want %v", stop, got, tc.GeneratedIDs[:first])
		}
		if r := s.Metrics().StopReason; r != pipeline.StopToken {
			t.Errorf("stop token %d: reason %q", stop, r)
		}
		s.Reset()
		got = collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 32, IgnoreStopTokens: true})
		if !slices.Equal(got, tc.GeneratedIDs[:32]) {
			t.Errorf("stop token %d ignored: got %v, want %v", stop, got, tc.GeneratedIDs[:32])
		}
	}
}

func TestPromptErrors(t *testing.T) {
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 16, PrefillSizes: []int{8}})
	long := make([]int, 17)
	for i := range long {
		long[i] = 5
	}
	for _, tc := range []struct {
		name   string
		prompt pipeline.Prompt
		opts   pipeline.GenerateOptions
		want   error
	}{
		{"too long", pipeline.Prompt{IDs: long}, pipeline.GenerateOptions{}, pipeline.ErrPromptTooLong},
		{"text without tokenizer", pipeline.Prompt{Text: "Once"}, pipeline.GenerateOptions{}, pipeline.ErrNoTokenizer},
		{"stop strings without tokenizer", pipeline.Prompt{IDs: []int{1}}, pipeline.GenerateOptions{StopStrings: []string{"."}}, pipeline.ErrNoTokenizer},
		{"empty", pipeline.Prompt{IDs: []int{}}, pipeline.GenerateOptions{}, pipeline.ErrPrompt},
		{"id out of range", pipeline.Prompt{IDs: []int{1, 512}}, pipeline.GenerateOptions{}, pipeline.ErrPrompt},
		{"negative id", pipeline.Prompt{IDs: []int{-1}}, pipeline.GenerateOptions{}, pipeline.ErrPrompt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errs []error
			n := 0
			for _, err := range m.NewSession().Generate(context.Background(), tc.prompt, tc.opts) {
				n++
				if err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) != 1 || n != 1 || !errors.Is(errs[0], tc.want) {
				t.Errorf("got %d items, errors %v; want one error matching %v", n, errs, tc.want)
			}
		})
	}
}

// TestCacheFull: generation stops cleanly when the cache fills.
func TestCacheFull(t *testing.T) {
	tc := testmodels.StoriesCases(t)[0]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 16, PrefillSizes: []int{8}})
	s := m.NewSession()
	got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{})
	want := tc.GeneratedIDs[:16-len(tc.PromptIDs)+1]
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if r := s.Metrics().StopReason; r != pipeline.StopCacheFull {
		t.Errorf("reason %q", r)
	}
	// The full conversation cannot grow further.
	for _, err := range s.Generate(context.Background(), pipeline.Prompt{IDs: []int{5}}, pipeline.GenerateOptions{}) {
		if !errors.Is(err, pipeline.ErrPromptTooLong) {
			t.Errorf("continuing a full session: %v", err)
		}
	}
}

func TestCancel(t *testing.T) {
	tc := testmodels.StoriesCases(t)[0]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for tok, err := range m.NewSession().Generate(ctx, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{}) {
		if err != nil {
			last = err
			break
		}
		n++
		if tok.ID >= 0 && n == 3 {
			cancel()
		}
	}
	if n != 3 || !errors.Is(last, context.Canceled) {
		t.Errorf("after cancel: %d tokens, error %v", n, last)
	}
}

// TestSampledGeneration: seeded sampling is reproducible, depends on the
// seed, and top-k 1 at any temperature is the golden greedy run.
func TestSampledGeneration(t *testing.T) {
	tc := testmodels.StoriesCases(t)[0]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128})
	run := func(o pipeline.GenerateOptions) []int {
		o.MaxTokens = 32
		return collect(t, m.NewSession(), pipeline.Prompt{IDs: tc.PromptIDs}, o)
	}
	a := run(pipeline.GenerateOptions{Temperature: 1, Seed: 1})
	b := run(pipeline.GenerateOptions{Temperature: 1, Seed: 1})
	c := run(pipeline.GenerateOptions{Temperature: 1, Seed: 2})
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different ids:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 gave the same 32 sampled ids %v", a)
	}
	if got := run(pipeline.GenerateOptions{Temperature: 0.8, TopK: 1, Seed: 3}); !slices.Equal(got, tc.GeneratedIDs[:32]) {
		t.Errorf("top-k 1: %v, want %v", got, tc.GeneratedIDs[:32])
	}
}

func TestDefaultMaxCache(t *testing.T) {
	ck := storiesCheckpoint(t) // trained context 512
	if got := load(t, ck, pipeline.Options{}).MaxCache(); got != 512 {
		t.Errorf("default cache %d, want the trained context 512", got)
	}
	ck.Config.MaxSeqLen = 0
	if got := load(t, ck, pipeline.Options{}).MaxCache(); got != pipeline.DefaultMaxCache {
		t.Errorf("default cache %d, want %d", got, pipeline.DefaultMaxCache)
	}
	if got := load(t, ck, pipeline.Options{MaxCache: 2000}).MaxCache(); got != 2000 {
		t.Errorf("explicit cache %d, want 2000", got)
	}
}

// TestCacheReuse: continuing a conversation runs only the new tokens (the
// last sampled token plus the new prompt); after another session used the
// cache, the conversation is replayed from the common prefix.
func TestCacheReuse(t *testing.T) {
	cases := testmodels.StoriesCases(t)
	a, b := cases[0], cases[2]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128})
	s := m.NewSession()
	collect(t, s, pipeline.Prompt{IDs: a.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 4})
	if got := s.Metrics().PrefillTokens; got != len(a.PromptIDs) {
		t.Errorf("first prefill ran %d tokens, want %d", got, len(a.PromptIDs))
	}
	collect(t, s, pipeline.Prompt{IDs: []int{300, 301}}, pipeline.GenerateOptions{MaxTokens: 2})
	if got := s.Metrics().PrefillTokens; got != 3 {
		t.Errorf("continuation ran %d tokens, want 3", got)
	}
	// b shares only BOS with a's conversation.
	other := m.NewSession()
	collect(t, other, pipeline.Prompt{IDs: b.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 1})
	if got := other.Metrics().PrefillTokens; got != len(b.PromptIDs)-1 {
		t.Errorf("other session ran %d tokens, want %d", got, len(b.PromptIDs)-1)
	}
	history := len(s.History())
	collect(t, s, pipeline.Prompt{IDs: []int{}}, pipeline.GenerateOptions{MaxTokens: 1})
	if got := s.Metrics().PrefillTokens; got != history-1 {
		t.Errorf("replay ran %d tokens, want %d", got, history-1)
	}
}

func TestResetAndInfo(t *testing.T) {
	tc := testmodels.StoriesCases(t)[0]
	m := load(t, storiesCheckpoint(t), pipeline.Options{MaxCache: 128})
	if info := m.BackendInfo(); info.Backend != "cpu" {
		t.Errorf("backend %q", info.Backend)
	}
	s := m.NewSession()
	collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 3})
	s.Reset()
	if len(s.History()) != 0 {
		t.Fatalf("history after reset: %v", s.History())
	}
	if got := collect(t, s, pipeline.Prompt{IDs: tc.PromptIDs}, pipeline.GenerateOptions{MaxTokens: 5}); !slices.Equal(got, tc.GeneratedIDs[:5]) {
		t.Errorf("after reset: %v, want %v", got, tc.GeneratedIDs[:5])
	}
}

func TestGenerateAfterClose(t *testing.T) {
	m, err := pipeline.FromCheckpoint(context.Background(), storiesCheckpoint(t), pipeline.Options{Backend: cpuBackend(t), MaxCache: 32})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: []int{1}}, pipeline.GenerateOptions{}) {
		if !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
