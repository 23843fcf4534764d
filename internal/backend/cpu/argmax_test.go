package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/internal/sampler"
)

// TestArgmaxMatchesGreedy checks fusion.Argmax's reference against the
// pipeline's host sampler, which it must agree with id for id.
func TestArgmaxMatchesGreedy(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	r := rand.New(rand.NewPCG(3, 4))
	random := make([]float32, 32000)
	for i := range random {
		random[i] = r.Float32()*20 - 10
	}
	for _, tc := range []struct {
		name string
		row  []float32
	}{
		{"one", []float32{-3}},
		{"ties lowest wins", []float32{1, 5, 2, 5, 5}},
		{"negative", []float32{-4, -2, -3, -2}},
		{"nan first", []float32{nan, -1, 0.5, nan}},
		{"all nan", []float32{nan, nan, nan}},
		{"all -inf", []float32{-inf, -inf}},
		{"+inf", []float32{3, inf, math.MaxFloat32}},
		{"vocab", random},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := argmax(tc.row), sampler.Greedy(tc.row); got != want {
				t.Errorf("argmax %d, sampler.Greedy %d", got, want)
			}
		})
	}
}
