package compute_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/tensors"
)

// TestOverBindingLimit runs one decode-sized step of a graph whose tied
// int8 embedding / classifier (70000 x 2048, 137 MiB) exceeds the 128 MiB
// a binding may cover, so both the embedding lookup and the classifier
// matrix-vector product run over two row blocks. Tokens from both blocks
// are looked up; every logit is compared with the CPU reference.
func TestOverBindingLimit(t *testing.T) {
	const rows, cols = 70000, 2048
	d := device(t)
	if lim := d.Caps().MaxStorageBinding; int64(rows*cols) <= lim {
		t.Skipf("binding limit %d holds the whole table: nothing to split", lim)
	}
	r := rand.New(rand.NewPCG(8, 8))
	data := make([]byte, rows*cols)
	for i := 0; i < len(data); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	// Scales near 1/(127*8) keep |w| <= 0.2, so the 2048-term dot products
	// stay around 1 and their f32 rounding (summation order differs between
	// the backends) around 1e-6.
	scales := randF32(r, rows, 0.5)
	for i := range scales {
		scales[i] = (scales[i] + 1) / (127 * 8)
	}
	st, err := tensors.FromF32("emb_quantized_scale", []int{rows}, scales, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	emb := &tensors.Tensor{Name: "emb", DType: tensors.I8, Shape: []int{rows, cols}, Data: data, Scales: st}
	g := &fusion.Graph{Tokens: 2}
	x := g.NewBuf("x", 2, cols)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "emb"})
	g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("logits", 2, rows), In: x, Projection: fusion.Projection{Weight: "emb"}})
	compare(t, g, []*tensors.Tensor{emb}, []step{{toks(69999, 5), 0}}, tolerance{abs: 2e-5, rel: 1e-4}, compute.Options{})
}
