package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// deltaRef64 is the delta rule in float64 straight from its definition
// (fusion.DeltaNetOp): per row, per value head h with key head h mod K,
// S ← exp(g)·S; S ← S + k (β(v − Sᵀk))ᵀ; o = Sᵀq/√D. x holds the
// normalized q, k, v rows; st the [V][D][D] states, updated.
func deltaRef64(x, beta, decay []float32, st []float64, k, v, d, n int) []float64 {
	ch := (2*k + v) * d
	out := make([]float64, n*v*d)
	u := make([]float64, d)
	for t := range n {
		row := x[t*ch:]
		for h := range v {
			i := h % k
			q, kk, vv := row[i*d:(i+1)*d], row[(k+i)*d:(k+i+1)*d], row[(2*k+h)*d:(2*k+h+1)*d]
			s := st[h*d*d : (h+1)*d*d]
			g := math.Exp(float64(decay[t*v+h]))
			for a := range s {
				s[a] *= g
			}
			for j := range d {
				u[j] = 0
				for a := range d {
					u[j] += s[a*d+j] * float64(kk[a])
				}
				u[j] = float64(beta[t*v+h]) * (float64(vv[j]) - u[j])
			}
			for a := range d {
				for j := range d {
					s[a*d+j] += float64(kk[a]) * u[j]
				}
			}
			for j := range d {
				var o float64
				for a := range d {
					o += s[a*d+j] * float64(q[a])
				}
				out[(t*v+h)*d+j] = o / math.Sqrt(float64(d))
			}
		}
	}
	return out
}

// TestDeltaChunkedRecurrent holds the chunked form of the delta rule (the
// prefill's) and the recurrent form (the decode's) to a float64 pass of
// the definition and to each other, on random inputs shaped as the
// kernel sees them (unit q and k, β in (0, 1), decays g ≤ 0, a state
// carried in from an earlier step), over lengths 1 to 70 and around
// multiples of the chunk (so chunks end inside the sequence and a last
// chunk is partial), for chunks of 64 and 7 rows, and key/value heads of
// 2/4 and 1/3.
func TestDeltaChunkedRecurrent(t *testing.T) {
	defer func(c int) { deltaChunk = c }(deltaChunk)
	lengths := []int{}
	for n := 1; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 127, 128, 129, 200)
	for _, shape := range []struct{ k, v, d int }{{2, 4, 16}, {1, 3, 32}} {
		for _, chunk := range []int{64, 7} {
			deltaChunk = chunk
			for _, n := range lengths {
				t.Run(fmt.Sprintf("k%dv%dd%d/chunk%d/n%d", shape.k, shape.v, shape.d, chunk, n), func(t *testing.T) {
					checkDeltaForms(t, shape.k, shape.v, shape.d, n)
				})
			}
		}
	}
}

func checkDeltaForms(t *testing.T, k, v, d, n int) {
	r := rand.New(rand.NewPCG(uint64(n), uint64(k*100+v*10+d)))
	ch := (2*k + v) * d
	s := &deltaStep{k: k, v: v, d: d, x: make([]float32, n*ch), beta: make([]float32, n*v), decay: make([]float32, n*v)}
	s.scratch = make([]deltaScratch, 1)
	for t := range n {
		for h := range 2*k + v {
			hv := s.x[t*ch+h*d : t*ch+(h+1)*d]
			var norm float64
			for i := range hv {
				hv[i] = float32(r.NormFloat64())
				norm += float64(hv[i]) * float64(hv[i])
			}
			if h < 2*k { // q and k unit, as the L2 norm leaves them
				for i := range hv {
					hv[i] = float32(float64(hv[i]) / math.Sqrt(norm))
				}
			}
		}
	}
	for i := range s.beta {
		s.beta[i] = float32(r.Float64())
		s.decay[i] = float32(-r.ExpFloat64() * 0.3)
	}
	st0 := make([]float32, v*d*d)
	ref := make([]float64, v*d*d)
	for i := range st0 {
		st0[i] = float32(r.NormFloat64() * 0.3)
		ref[i] = float64(st0[i])
	}
	want := deltaRef64(s.x, s.beta, s.decay, ref, k, v, d, n)

	outs, states := [2][]float32{}, [2][]float32{}
	for f, chunked := range []bool{false, true} {
		s.out, s.state, s.n, s.chunked = make([]float32, n*v*d), slices.Clone(st0), n, chunked
		s.run(0, 0, v)
		outs[f], states[f] = s.out, s.state
	}
	const tol = 2e-5
	for f, name := range []string{"recurrent", "chunked"} {
		if e := maxRelErr(outs[f], want); e > tol {
			t.Errorf("%s form: outputs off the float64 rule by %.3g (relative to the largest)", name, e)
		}
		if e := maxRelErr(states[f], ref); e > tol {
			t.Errorf("%s form: final state off the float64 rule by %.3g", name, e)
		}
	}
	var diff float64
	for i := range outs[0] {
		diff = max(diff, math.Abs(float64(outs[0][i]-outs[1][i])))
	}
	if scale := maxAbs64(want); diff > tol*scale {
		t.Errorf("chunked and recurrent outputs differ by %.3g (largest output %.3g)", diff, scale)
	}
}

// maxRelErr is max |got − want| over max |want|.
func maxRelErr(got []float32, want []float64) float64 {
	var e float64
	for i, w := range want {
		e = max(e, math.Abs(float64(got[i])-w))
	}
	return e / max(maxAbs64(want), 1e-30)
}

func maxAbs64(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(v))
	}
	return m
}

// BenchmarkDeltaRule times the delta rule of one Qwen3.5-0.8B layer (16
// key and 16 value heads of 128) on one thread: a decode row (recurrent)
// and a 512-row prefill in each form.
//
//	go test -run '^$' -bench DeltaRule ./internal/backend/cpu
func BenchmarkDeltaRule(b *testing.B) {
	const k, v, d = 16, 16, 128
	for _, tc := range []struct {
		n       int
		chunked bool
	}{{1, false}, {512, false}, {512, true}} {
		b.Run(fmt.Sprintf("rows%d/chunked=%t", tc.n, tc.chunked), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			ch := (2*k + v) * d
			s := &deltaStep{k: k, v: v, d: d, x: make([]float32, tc.n*ch), beta: make([]float32, tc.n*v), decay: make([]float32, tc.n*v)}
			s.scratch = make([]deltaScratch, 1)
			for i := range s.x {
				s.x[i] = float32(r.NormFloat64() / math.Sqrt(d))
			}
			for i := range s.beta {
				s.beta[i], s.decay[i] = 0.5, -0.1
			}
			s.out, s.state, s.n, s.chunked = make([]float32, tc.n*v*d), make([]float32, v*d*d), tc.n, tc.chunked
			b.ResetTimer()
			for range b.N {
				s.run(0, 0, v)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(tc.n), "us/row")
		})
	}
}
