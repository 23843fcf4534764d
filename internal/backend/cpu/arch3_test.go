package cpu_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// arch3Run runs the arch3 model name (../shared/models/arch3, its
// checkpoint edited by edit when set) on threads threads as llama.cpp did:
// the 12 prompt ids in one step with logits at every position, then the
// 24 greedy ids one decode step each, following the reference's ids. It
// returns the largest |Δlogit| of the prompt and of the decode steps, and
// the first step whose greedy id differs (-1: none).
func arch3Run(t *testing.T, name string, threads int, fused bool, edit func(*model.Checkpoint)) (prompt, decode float64, departed int) {
	t.Helper()
	g := testmodels.Arch3(t, name)
	ck, err := gguf.Load(testmodels.Path(t, "arch3", name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(ck)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: threads})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	const maxLen = 64
	n := len(g.PromptIDs)
	compile := testmodels.Compiler(t, be, w, &ck.Config, arch.BuildOptions{MaxLen: maxLen}, fused)
	pre, dec := compile(n, true), compile(1, false)
	if err := pre.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		prompt = max(prompt, testmodels.MaxAbsDiff(all[p*vocab:(p+1)*vocab], g.Logits[p]))
	}
	logits := all[(n-1)*vocab:]
	departed = -1
	for step, want := range g.GreedyIDs {
		decode = max(decode, testmodels.MaxAbsDiff(logits, g.GreedyLogits[step]))
		if testmodels.Argmax(logits) != want && departed < 0 {
			departed = step
		}
		if err := dec.Run(ctx, []int32{int32(want)}, n+step); err != nil {
			t.Fatal(err)
		}
		logits = make([]float32, vocab)
		if _, err := dec.Logits(logits); err != nil {
			t.Fatal(err)
		}
	}
	return prompt, decode, departed
}
