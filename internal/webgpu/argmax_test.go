//go:build cgo || js

package webgpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

// TestArgmaxKernel checks the argmax kernel against a host scan: the first
// index of the maximum wins ties, NaNs are never picked (0 when all are),
// only the first n values count, and the index comes back as an f32; a
// step with no rows (step word 1 is 0: a no-op step after a stop id)
// leaves the output as it was instead of scanning the stale row.
func TestArgmaxKernel(t *testing.T) {
	d := open(t)
	k := mustKernel(t, d, "argmax")
	defer k.Release()
	cases := []struct {
		name   string
		n      int
		edit   func(v []float32)
		noRows bool
	}{
		{"one", 1, nil, false},
		{"odd", 77, nil, false},
		{"ties", 300, func(v []float32) { v[250], v[17], v[130] = 5, 5, 5 }, false},
		{"all negative", 65, func(v []float32) {
			for i := range v {
				v[i] = -1 - float32(i%7)
			}
		}, false},
		{"nan", 129, func(v []float32) { v[3] = float32(math.NaN()); v[100] = 9 }, false},
		{"max past n ignored", 50, func(v []float32) { v[60] = 100 }, false},
		{"vocab", 32000, func(v []float32) { v[31999] = 50 }, false},
		{"all nan", 70, func(v []float32) {
			for i := range v {
				v[i] = float32(math.NaN())
			}
		}, false},
		{"all -inf", 66, func(v []float32) {
			for i := range v {
				v[i] = float32(math.Inf(-1))
			}
		}, false},
		{"no rows", 300, nil, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s_%d", tc.name, tc.n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.n), 1))
			vals := make([]float32, tc.n+16)
			for i := range vals {
				vals[i] = r.Float32()*4 - 2
			}
			if tc.edit != nil {
				tc.edit(vals)
			}
			want := -1
			for i, v := range vals[:tc.n] {
				if v == v && (want < 0 || v > vals[want]) {
					want = i
				}
			}
			want = max(want, 0)
			// The step buffer: position 0, one row (none for noRows).
			rows := uint32(1)
			if tc.noRows {
				rows, want = 0, 12345 // out keeps what it held
			}
			step := mustBuf(t, d, 16)
			defer step.Release()
			if err := d.Write(step, 0, binary.LittleEndian.AppendUint32(make([]byte, 4, 16), rows)); err != nil {
				t.Fatal(err)
			}
			params := mustBuf(t, d, 16)
			x := mustBuf(t, d, int64(4*len(vals)))
			out := mustBuf(t, d, 4)
			// No token mask set (shaders.EncodeTokenMask of nil).
			mask := mustBuf(t, d, shaders.TokenMaskBytes(tc.n))
			defer mask.Release()
			if err := d.Write(mask, 0, shaders.EncodeTokenMask(nil, tc.n, nil)); err != nil {
				t.Fatal(err)
			}
			defer params.Release()
			defer x.Release()
			defer out.Release()
			p := make([]byte, 16)
			binary.LittleEndian.PutUint32(p, uint32(tc.n))
			if err := d.Write(params, 0, p); err != nil {
				t.Fatal(err)
			}
			if err := d.Write(x, 0, gputest.F32Bytes(vals)); err != nil {
				t.Fatal(err)
			}
			if err := d.Write(out, 0, gputest.F32Bytes([]float32{12345})); err != nil {
				t.Fatal(err)
			}
			cmds, err := d.NewCommands()
			if err != nil {
				t.Fatal(err)
			}
			defer cmds.Release()
			if err := cmds.Dispatch(k, []gpu.Binding{{Buf: params}, {Buf: step}, {Buf: x}, {Buf: out}, {Buf: mask}}, 1, 1, 1); err != nil {
				t.Fatal(err)
			}
			if err := cmds.Finish(); err != nil {
				t.Fatal(err)
			}
			if err := d.Submit(cmds); err != nil {
				t.Fatal(err)
			}
			res := make([]byte, 4)
			if err := d.Read(out, 0, res); err != nil {
				t.Fatal(err)
			}
			got := math.Float32frombits(binary.LittleEndian.Uint32(res))
			if got != float32(want) {
				t.Fatalf("argmax %v, want %d", got, want)
			}
		})
	}
}
