package fusion

import "testing"

// TestHalfActivations checks which buffers the f16 policy marks: the
// attention output y is f16, the residual x (an Add's output) and the
// rotated q of a MatMulRopeKV (a) stay f32.
func TestHalfActivations(t *testing.T) {
	g := kvGraph(rms(bh, bx), mm(bc, bh, "v"), mm(ba, bh, "q"), mm(bb, bh, "k"), rope(ba, 4), rope(bb, 4), storeKV(bb, bc), attend(by, ba), add(bx, bx, by))
	g.Logits = g.NewBuf("logits", 4, 8)
	g.Ops = append(g.Ops, mm(g.Logits, bx, "out"))
	f := Fuse(g)
	if f.Ops[0].Kind() != MatMulRopeKV {
		t.Fatalf("fused ops %v", kinds(f.Ops))
	}
	HalfActivations(f)
	want := map[string]bool{"x": false, "a": false, "y": true, "logits": false}
	for _, b := range f.Bufs {
		if w, ok := want[b.Name]; ok && b.F16 != w {
			t.Errorf("buffer %s: F16 %v, want %v", b.Name, b.F16, w)
		}
		delete(want, b.Name)
	}
	if len(want) != 0 {
		t.Errorf("buffers not in the fused graph: %v", want)
	}
}
