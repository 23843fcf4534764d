package pipeline

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// chiSquare is Pearson's statistic of counts against the distribution p
// over n draws.
func chiSquare(counts []int, p []float64, n int) float64 {
	var x float64
	for i, c := range counts {
		e := p[i] * float64(n)
		if e == 0 {
			if c != 0 {
				return 1e300
			}
			continue
		}
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// TestAcceptDraftDistribution: the speculative sampling rule turns drafts
// drawn from q into tokens distributed as p (Pearson's chi-square test on
// a toy vocabulary of 6 tokens, seeded, 200000 draws; 20.52 is the 0.999
// quantile of chi-square with 5 degrees of freedom), whatever q is: far
// from p, equal to p, missing tokens p has, or one-hot (prompt lookup).
// Keeping every draft, the rule's obvious mistake, fails the same test.
func TestAcceptDraftDistribution(t *testing.T) {
	const n, critical = 200000, 20.52
	p := []float64{0.3, 0.25, 0.2, 0.1, 0.1, 0.05}
	for _, tc := range []struct {
		name string
		q    []float64 // nil: one-hot at draft
		d    int
	}{
		{"far", []float64{0.05, 0.1, 0.4, 0.05, 0.3, 0.1}, 0},
		{"equal", slices.Clone(p), 0},
		{"missing", []float64{0, 0, 0.5, 0.5, 0, 0}, 0},
		{"lookup likely", nil, 0},
		{"lookup unlikely", nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(30, uint64(len(tc.name))))
			counts := make([]int, len(p))
			wrong := make([]int, len(p))
			for range n {
				d := tc.d
				if tc.q != nil {
					d = drawFrom(tc.q, 1, r.Float64())
				}
				tok, _ := acceptDraft(p, tc.q, d, r.Float64(), r.Float64())
				counts[tok]++
				wrong[d]++
			}
			if x := chiSquare(counts, p, n); x > critical {
				t.Errorf("chi-square %.1f > %.2f: counts %v for p %v", x, critical, counts, p)
			}
			if x := chiSquare(wrong, p, n); !slices.Equal(tc.q, p) && x <= critical {
				t.Errorf("keeping every draft passes the test too (chi-square %.1f)", x)
			}
		})
	}
}

// TestLookupDrafts: prompt lookup proposes what followed the latest earlier
// occurrence of the longest matching n-gram ending the context.
func TestLookupDrafts(t *testing.T) {
	for _, tc := range []struct {
		ctx     []int
		maxN, k int
		want    []int
	}{
		{[]int{1, 2, 3, 4, 1, 2}, 2, 3, []int{3, 4, 1}},
		{[]int{1, 2, 3, 9, 2, 5, 6, 2}, 2, 2, []int{5, 6}}, // latest 1-gram "2"
		{[]int{7, 2, 8, 1, 2, 9, 1, 2}, 2, 2, []int{9, 1}}, // 2-gram "1 2" beats the later "2"
		{[]int{1, 2, 3, 4}, 3, 4, nil},                     // no repeat
		{[]int{5, 5, 5}, 2, 4, []int{5, 5, 5, 5}},          // a run goes on
		{[]int{1, 2, 3, 1, 2}, 2, 5, []int{3, 1, 2, 3, 1}}, // extended by the drafts so far
		{[]int{5}, 2, 4, nil},
	} {
		if got := lookupDrafts(nil, tc.ctx, tc.maxN, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("lookupDrafts(%v, %d, %d) = %v, want %v", tc.ctx, tc.maxN, tc.k, got, tc.want)
		}
	}
}
