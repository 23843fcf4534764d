package gpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
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
