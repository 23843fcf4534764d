package conformance

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
)

// TestKVQuantCases runs the quantized-cache cases with the CPU backend as
// the backend under test: its ring caches must give what its full caches
// give, and each case's ablation (the rotation skipped, or the cache left
// float) must miss by more than ten tolerances, so the cases can catch a
// GPU backend that leaves either out. The table covers every block type
// for keys and for values, rotated and unrotated caches and each store
// path.
func TestKVQuantCases(t *testing.T) {
	cases := KVQuantCases()
	seen := map[string]bool{}
	for _, c := range cases {
		g, _ := c.Build()
		seen["k"+g.KV.K.String()], seen["v"+g.KV.V.String()] = true, true
		seen[fmtRot(g.KV.KRotation(1) > 0)] = true
	}
	for _, want := range []string{"kq8_0", "kq4_0", "kq4_1", "kq5_0", "kq5_1", "kiq4_nl", "vq8_0", "vq4_0", "vq4_1", "vq5_0", "vq5_1", "viq4_nl", "vfloat", "rotated", "unrotated"} {
		if !seen[want] {
			t.Errorf("KVQuantCases: no case with %s", want)
		}
	}
	RunKVQuantCases(t, cases, func(testing.TB) gpu.Backend { return cpu.New(cpu.Options{Threads: 1}) })
}

func fmtRot(r bool) string {
	if r {
		return "rotated"
	}
	return "unrotated"
}
