package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/shaders"
)

// ErrStep reports arguments Program.Run cannot take.
var ErrStep = errors.New("gpu: bad step")

// CheckStep validates the arguments of Program.Run for a program compiled
// from g: between 1 and g.Tokens tokens at a non-negative position, and, when
// the program has a KV cache of maxLen positions (0: none), positions that
// fit it. Every backend runs the same checks, so they all fail alike.
func CheckStep(g *fusion.Graph, n, pos, maxLen int) error {
	if n == 0 || n > g.Tokens {
		return fmt.Errorf("%w: %d tokens for a graph of %d", ErrStep, n, g.Tokens)
	}
	if pos < 0 || pos > math.MaxInt32-n {
		return fmt.Errorf("%w: position %d", ErrStep, pos)
	}
	if maxLen > 0 && pos+n > maxLen {
		return fmt.Errorf("positions %d..%d: %w (%d positions)", pos, pos+n-1, ErrCacheFull, maxLen)
	}
	return nil
}

// Limits of StepRunner.RunSteps: the step tensor's (shaders.DecodeStep).
const (
	MaxStepsPerSubmit = shaders.MaxSteps // decode steps one submission may run
	MaxStopIDs        = shaders.MaxStops // stop ids the device checks
)

// StepRunner is implemented by decode programs that pick their next token
// on the device (one-token graphs ending in fusion.Argmax or fusion.Sample)
// and can run several decode steps in one submission, each step's picked
// id fed to the next step on the device. Backends without it (the CPU
// backend) and batched programs step one token per Run.
type StepRunner interface {
	// RunSteps runs up to n (1..MaxStepsPerSubmit) decode steps as one
	// submission and waits for them: step i runs the id step i-1 picked
	// (step 0: token) at position pos+i and picks the next. It returns the
	// picked ids in order: n of them, or fewer when the device picked one
	// of stops (at most MaxStopIDs; a caller with more checks the rest
	// itself), which is then the last id returned and ends the
	// submission's work. The cache holds positions pos ..
	// pos+len(ids)-1 afterwards. It fails with ErrCacheFull when pos+n
	// exceeds the cache, and checks ctx before it submits.
	RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error)
}

// SamplingSetter is implemented by decode programs ending in fusion.Sample
// whose rule lives in their step tensor (the GPU backends): SetSampling
// changes the rule of the following runs without compiling the graph
// again. It rejects the rules fusion validation rejects.
type SamplingSetter interface {
	SetSampling(r fusion.Sampling) error
}

// TokenMasker is implemented by decode programs that pick their token on
// the device or in the backend (one-token graphs ending in fusion.Argmax or
// fusion.Sample): SetTokenMask(allowed) makes the following runs pick only
// among the tokens allowed (bit i % 64 of allowed[i / 64] allows token i;
// len(allowed) is (vocabulary + 63) / 64), exactly as if the logits of
// the others were -inf; nil allows every token again. Constrained
// generation (a grammar) sets the mask of each step before running it, so
// a masked program runs one step per Run (RunSteps refuses while a mask is
// set).
type TokenMasker interface {
	SetTokenMask(allowed []uint64) error
}
