package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/spf13/cobra"
)

// specFlags are the speculative decoding flags of run, chat, serve and
// bench: --draft MODEL or --lookup N, and --draft-tokens K.
type specFlags struct {
	draft  string
	lookup int
	tokens int
}

func (s *specFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.draft, "draft", "", "speculative decoding with this draft model (same vocabulary, smaller): it proposes --draft-tokens tokens "+
		"that the model verifies in one step; greedy output is unchanged, sampled output keeps the model's distribution")
	f.Var(&intFlag{&s.lookup, 0, pipeline.MaxLookup, fmt.Sprintf("an integer in 0..%d", pipeline.MaxLookup)}, "lookup",
		"speculative decoding by prompt lookup, no draft model: propose the tokens that followed the latest earlier occurrence of the context's last N tokens (N down to 1); 0 is off")
	s.tokens = pipeline.DefaultDraftTokens
	f.Var(&intFlag{&s.tokens, 1, pipeline.MaxDraftTokens, fmt.Sprintf("an integer in 1..%d", pipeline.MaxDraftTokens)}, "draft-tokens",
		"tokens drafted per model step with --draft or --lookup")
}

// check validates the flags before anything is loaded: one of --draft and
// --lookup, and a draft model that exists.
func (s *specFlags) check() error {
	if s.draft != "" && s.lookup > 0 {
		return fmt.Errorf("--draft and --lookup: give one")
	}
	if s.draft != "" {
		if _, err := os.Stat(s.draft); err != nil {
			return fmt.Errorf("--draft: %w", err)
		}
	}
	return nil
}

// open returns the speculation the flags ask for, nil for none, loading
// the draft model with the target's loading flags and slots sessions at
// once; closeDraft closes it.
func (s *specFlags) open(cmd *cobra.Command, mf *modelFlags, target *gpurun.Model, slots int) (spec *pipeline.Speculation, closeDraft func(), err error) {
	closeDraft = func() {}
	if err := s.check(); err != nil {
		return nil, closeDraft, err
	}
	switch {
	case s.lookup > 0:
		return &pipeline.Speculation{Lookup: s.lookup, Tokens: s.tokens}, closeDraft, nil
	case s.draft == "":
		return nil, closeDraft, nil
	}
	start := time.Now()
	d, err := loadModel(func() (*gpurun.Model, error) {
		return gpurun.Open(cmd.Context(), s.draft, append(mf.options(cmd), gpurun.WithParallel(slots))...)
	})
	if err != nil {
		return nil, closeDraft, pathError("--draft", s.draft, err)
	}
	if dv, tv := d.Config().VocabSize, target.Config().VocabSize; dv != tv {
		d.Close()
		return nil, closeDraft, fmt.Errorf("--draft %s: a vocabulary of %d tokens, the model's has %d", s.draft, dv, tv)
	}
	fmt.Fprint(cmd.ErrOrStderr(), "draft: ")
	printLoaded(cmd.ErrOrStderr(), d.Pipeline(), d.Format(), time.Since(start))
	return &pipeline.Speculation{Draft: d.Pipeline(), Tokens: s.tokens}, func() { d.Close() }, nil
}

// printSpeculation reports a generation's speculative decoding counts.
func printSpeculation(w io.Writer, m pipeline.Metrics) {
	if m.TargetSteps == 0 {
		return
	}
	rate := 0.0
	if m.DraftTokens > 0 {
		rate = float64(m.AcceptedTokens) / float64(m.DraftTokens)
	}
	fmt.Fprintf(w, "[speculative] %d of %d drafted tokens accepted (%.1f%%), %.2f tokens per model step\n",
		m.AcceptedTokens, m.DraftTokens, 100*rate, float64(m.DecodeSteps)/float64(m.TargetSteps))
}

// benchSpeculation returns the speculation bench's flags ask for on
// backend b (a --draft model loaded there with the configuration's cache
// and activations; the caller closes it), nil for none, and names it in
// base.
func benchSpeculation(ctx context.Context, rf *benchModelFlags, bf *benchFlags, b gpu.Backend, policy string, base *benchreport.Result) (*pipeline.Speculation, error) {
	sf := &bf.spec
	if err := sf.check(); err != nil {
		return nil, err
	}
	switch {
	case sf.lookup > 0:
		base.Speculation = fmt.Sprintf("lookup %d, K %d", sf.lookup, sf.tokens)
		return &pipeline.Speculation{Lookup: sf.lookup, Tokens: sf.tokens}, nil
	case sf.draft == "":
		return nil, nil
	}
	opts := []gpurun.Option{gpurun.WithGPUBackend(b), gpurun.WithMaxCache(rf.maxCache), gpurun.WithActivations(policy), gpurun.WithCPUMath(rf.cpuMath)}
	if rf.tokenizer != "" {
		opts = append(opts, gpurun.WithTokenizer(rf.tokenizer))
	}
	d, err := loadModel(func() (*gpurun.Model, error) { return gpurun.Open(ctx, sf.draft, opts...) })
	if err != nil {
		return nil, pathError("--draft", sf.draft, err)
	}
	base.Speculation = fmt.Sprintf("draft %s, K %d", filepath.Base(sf.draft), sf.tokens)
	return &pipeline.Speculation{Draft: d.Pipeline(), Tokens: sf.tokens}, nil
}

// repeatPrompt makes ids repeat their first n (none when n is 0).
func repeatPrompt(ids []int, n int) []int {
	if n > 0 {
		for i := n; i < len(ids); i++ {
			ids[i] = ids[i%n]
		}
	}
	return ids
}
