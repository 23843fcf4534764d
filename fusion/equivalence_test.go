package fusion_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// Random graphs over a handful of same-width buffers, built mostly from the
// motifs the rules look for (projection + residual add, gate + up + GLU,
// projections of one input) with random buffer choices, so that the
// aliasing and liveness corner cases come up: a buffer read after the add,
// read at the next step, written in between. The fused graph run on the CPU
// reference must give bitwise the logits of the original at every step
// (buffers carry over between steps).

const (
	eqTokens = 3
	eqCols   = 8
	eqBufs   = 6
	eqVocab  = 5
)

// randomGraph builds a graph from the bytes of data (the fuzzer's input).
// The seeds under testdata/fuzz/FuzzFuse are bytes read in this order of
// draws: keep the order (or regenerate them with go test -fuzz) when
// changing it.
func randomGraph(data []byte) *fusion.Graph {
	g := &fusion.Graph{Tokens: eqTokens}
	for i := range eqBufs {
		g.NewBuf(fmt.Sprintf("b%d", i), eqTokens, eqCols)
	}
	pos := 0
	next := func(n int) int {
		if pos >= len(data) {
			return 0
		}
		v := int(data[pos]) % n
		pos++
		return v
	}
	buf := func() fusion.Buf { return fusion.Buf(next(eqBufs)) }
	weight := func() string { return fmt.Sprintf("w%d", next(3)) }
	bias := func() string { return []string{"", "bias"}[next(2)] }
	mm := func(out, in fusion.Buf) {
		g.Add(&fusion.MatMulOp{Out: out, In: in, Projection: fusion.Projection{Weight: weight(), Bias: bias()}})
	}
	g.Add(&fusion.EmbedOp{Out: buf(), Weight: "emb"})
	for range 4 + next(8) {
		switch next(7) {
		case 0: // projection, then a residual add
			p, in, x := buf(), buf(), buf()
			mm(p, in)
			if next(2) == 1 { // something in between, touching x or p or not
				g.Add(&fusion.NormOp{Out: buf(), In: buf(), Weight: "norm", Norm: fusion.NormRMS, Eps: 1e-5})
			}
			g.Add(&fusion.AddOp{Out: x, A: x, B: p})
		case 1: // gate, up, GLU
			a, b, in, o := buf(), buf(), buf(), buf()
			mm(a, in)
			mm(b, in)
			g.Add(&fusion.GLUOp{Out: o, Gate: a, Up: b, Act: fusion.ActSiLU})
		case 2: // projections of one input
			in := buf()
			for range 2 + next(3) {
				mm(buf(), in)
			}
		case 3:
			mm(buf(), buf())
		case 4:
			g.Add(&fusion.AddOp{Out: buf(), A: buf(), B: buf()})
		case 5:
			g.Add(&fusion.NormOp{Out: buf(), In: buf(), Weight: "norm", Norm: fusion.NormRMS, Eps: 1e-5})
		case 6:
			g.Add(&fusion.EmbedOp{Out: buf(), Weight: "emb", Scale: 0.5})
		}
	}
	g.Logits = buf()
	return g
}

func eqWeights() []*tensors.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		return v
	}
	mk := func(name string, shape []int, dt tensors.DType) *tensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		var t *tensors.Tensor
		var err error
		if dt.Quantized() {
			t, err = tensors.Quantize(name, shape, vals(n), dt, 4, tensors.F16)
		} else {
			t, err = tensors.FromF32(name, shape, vals(n), dt)
		}
		if err != nil {
			panic(err)
		}
		return t
	}
	return []*tensors.Tensor{
		mk("emb", []int{eqVocab, eqCols}, tensors.F32),
		mk("w0", []int{eqCols, eqCols}, tensors.F32),
		mk("w1", []int{eqCols, eqCols}, tensors.I8),
		mk("w2", []int{eqCols, eqCols}, tensors.I4),
		mk("bias", []int{eqCols}, tensors.F32),
		mk("norm", []int{eqCols}, tensors.F32),
	}
}

// runSteps runs g for three steps and returns the logits of each, nil when
// the backend rejects the graph.
func runSteps(t *testing.T, g *fusion.Graph, ws []*tensors.Tensor) ([][]float32, error) {
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	p, err := be.Compile(g, w, nil)
	if err != nil {
		return nil, err
	}
	var out [][]float32
	for s, toks := range [][]int32{{1, 4, 2}, {3}, {0, 2}} {
		if err := p.Run(ctx, toks, s); err != nil {
			t.Fatal(err)
		}
		dst := make([]float32, eqTokens*eqCols)
		n, err := p.Logits(dst)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dst[:n])
	}
	return out, nil
}

func checkEquivalent(t *testing.T, data []byte, ws []*tensors.Tensor) (fused bool) {
	g := randomGraph(data)
	if g.Validate(nil) != nil {
		return false
	}
	f := fusion.Fuse(g)
	if err := f.Validate(nil); err != nil {
		t.Fatalf("fused graph invalid: %v\noriginal %+v", err, g.Ops)
	}
	want, err := runSteps(t, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runSteps(t, f, ws)
	if err != nil {
		t.Fatalf("fused graph rejected: %v", err)
	}
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(want[s][i]) != math.Float32bits(got[s][i]) {
				t.Fatalf("step %d value %d: unfused %v, fused %v\noriginal %+v\nfused %+v", s, i, want[s][i], got[s][i], g.Ops, f.Ops)
			}
		}
	}
	return len(f.Ops) < len(g.Ops)
}

func TestFuseEquivalentOnRandomGraphs(t *testing.T) {
	ws := eqWeights()
	r := rand.New(rand.NewPCG(7, 7))
	fusedCount := 0
	const graphs = 400
	for range graphs {
		data := make([]byte, 64)
		binary.LittleEndian.PutUint64(data, r.Uint64())
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		if checkEquivalent(t, data, ws) {
			fusedCount++
		}
	}
	// The motifs make fusion common; a generator that stopped producing
	// fusable graphs would make this test vacuous.
	t.Logf("%d of %d random graphs fused", fusedCount, graphs)
	if fusedCount < graphs/5 {
		t.Errorf("only %d of %d random graphs fused", fusedCount, graphs)
	}
}

func FuzzFuse(f *testing.F) {
	ws := eqWeights()
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 0, 0, 1, 2, 0, 1, 2, 3, 1, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkEquivalent(t, data, ws)
	})
}
