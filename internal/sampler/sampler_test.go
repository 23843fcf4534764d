package sampler

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func logitsOf(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name   string
		logits []float32
		want   int
	}{
		{"single", []float32{3}, 0},
		{"max in middle", []float32{1, 5, 2}, 1},
		{"tie: lowest id", []float32{1, 7, 3, 7}, 1},
		{"negative", []float32{-3, -1, -2}, 1},
		{"nan skipped", []float32{nan, 1, 2}, 2},
		{"all nan", []float32{nan, nan}, 0},
		{"empty", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Greedy(tc.logits); got != tc.want {
				t.Errorf("Greedy(%v) = %d, want %d", tc.logits, got, tc.want)
			}
			if got := New(Options{Temperature: 0, Seed: 1}).Sample(tc.logits); got != tc.want {
				t.Errorf("Sample at temperature 0 = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFrequencies draws many tokens and compares each id's frequency with
// the probability the options imply, computed by hand in the table.
func TestFrequencies(t *testing.T) {
	base := logitsOf(0.5, 0.3, 0.15, 0.05)
	// Temperature 2 flattens p_i to sqrt(p_i) / sum sqrt(p_j).
	sq := []float64{math.Sqrt(0.5), math.Sqrt(0.3), math.Sqrt(0.15), math.Sqrt(0.05)}
	sqSum := sq[0] + sq[1] + sq[2] + sq[3]
	for _, tc := range []struct {
		name string
		opts Options
		want []float64 // expected frequency per id
	}{
		{"temperature 1", Options{Temperature: 1}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"temperature 2", Options{Temperature: 2}, []float64{sq[0] / sqSum, sq[1] / sqSum, sq[2] / sqSum, sq[3] / sqSum}},
		{"top-k 2", Options{Temperature: 1, TopK: 2}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
		{"top-k 1 is greedy", Options{Temperature: 1, TopK: 1}, []float64{1, 0, 0, 0}},
		{"top-p 0.6", Options{Temperature: 1, TopP: 0.6}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
		{"top-p 0.4", Options{Temperature: 1, TopP: 0.4}, []float64{1, 0, 0, 0}},
		{"top-p 0.9", Options{Temperature: 1, TopP: 0.9}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"top-k 3 then top-p 0.9 of the rest", Options{Temperature: 1, TopK: 3, TopP: 0.9}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"top-k 3 then top-p 0.8 of the rest", Options{Temperature: 1, TopK: 3, TopP: 0.8}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20000
			s := New(Options{Temperature: tc.opts.Temperature, TopK: tc.opts.TopK, TopP: tc.opts.TopP, Seed: 42})
			counts := make([]int, len(base))
			for range n {
				counts[s.Sample(base)]++
			}
			for id, p := range tc.want {
				got := float64(counts[id]) / n
				// Five standard deviations of a binomial frequency, at least
				// one draw's worth so that impossible ids must never appear.
				tol := 5*math.Sqrt(p*(1-p)/n) + 0.5/n
				if math.Abs(got-p) > tol {
					t.Errorf("id %d: frequency %.4f, want %.4f ± %.4f", id, got, p, tol)
				}
			}
		})
	}
}

func TestSeedReproducible(t *testing.T) {
	logits := logitsOf(0.2, 0.2, 0.2, 0.2, 0.2)
	draw := func(seed uint64) []int {
		s := New(Options{Temperature: 1, Seed: seed})
		out := make([]int, 64)
		for i := range out {
			out[i] = s.Sample(logits)
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	same := func(x, y []int) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Errorf("seed 7 twice gave %v and %v", a, b)
	}
	// 64 uniform draws over 5 ids agree by chance with probability 5^-64.
	if same(a, c) {
		t.Errorf("seeds 7 and 8 gave the same 64 draws %v", a)
	}
}

func TestProbabilities(t *testing.T) {
	s := New(Options{Temperature: 1, TopK: 2})
	ids, probs := s.Probabilities(logitsOf(0.1, 0.6, 0.3))
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("ids %v, want [1 2]", ids)
	}
	if math.Abs(probs[0]-2.0/3) > 1e-6 || math.Abs(probs[1]-1.0/3) > 1e-6 {
		t.Errorf("probs %v, want [2/3 1/3]", probs)
	}
}

// TestKthKey holds the radix select to its definition: the largest key K
// with count(key >= K) >= k, found here by sorting the keys.
func TestKthKey(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		n := 1 + r.IntN(300)
		y := make([]float32, n)
		for i := range y {
			switch r.IntN(8) {
			case 0:
				y[i] = float32(math.NaN())
			case 1:
				y[i] = float32(r.IntN(3)) // ties
			default:
				y[i] = float32(r.NormFloat64() * 10)
			}
		}
		var keys []uint32
		for _, v := range y {
			if v == v {
				keys = append(keys, orderKey(v))
			}
		}
		if len(keys) == 0 {
			continue
		}
		slices.Sort(keys)
		k := 1 + r.IntN(len(keys))
		if got, want := kthKey(y, k), keys[len(keys)-k]; got != want {
			t.Fatalf("trial %d: kthKey(k=%d) = %#x, want %#x", trial, k, got, want)
		}
	}
}
