//go:build cgo || js

package webgpu

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

// TestLongSubmission reads a buffer back after one submission that runs
// for over six seconds (on a software driver; on a fast GPU the dispatch
// count is capped and it runs shorter). The bundled wgpu-core's blocking
// poll gives up on its fence after five seconds and treats the submission
// as finished, freeing what the driver is still executing: waits and map
// reads that polled that way crashed the process (SwiftShader, lavapipe)
// or read stale data here (SwiftShader: TestLongSubmissionOnSwiftShader;
// lavapipe happened to hide it).
func TestLongSubmission(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a submission of several seconds")
	}
	d := open(t)
	k := mustKernel(t, d, "add")
	defer k.Release()
	const cols, rows = 1 << 16, 64
	const n = cols * rows
	// elementwise.wgsl's uniform block, encoded from its Go type (f32
	// operands); the step's T is every row.
	p, err := shaders.Encode(shaders.EltParams{Cols: cols, NRows: rows})
	if err != nil {
		t.Fatal(err)
	}
	params, step := mustBuf(t, d, int64(len(p))), mustBuf(t, d, 16)
	bufs := [3]gpu.Buffer{mustBuf(t, d, n*4), mustBuf(t, d, n*4), mustBuf(t, d, n*4)}
	for _, b := range append(bufs[:], params, step) {
		defer b.Release()
	}
	if err := d.Write(params, 0, p); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(step, 0, []byte{0, 0, 0, 0, rows, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	// x (bufs[0]) = i, one (bufs[2]) = 1; each dispatch adds one, x and
	// bufs[1] taking turns as input and output, so after an even count c
	// x[i] = i + c exactly (below 2^24).
	x, one := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], one[i] = float32(i%(1<<20)), 1
	}
	if err := d.Write(bufs[2], 0, gputest.F32Bytes(one)); err != nil {
		t.Fatal(err)
	}
	// run submits count dispatches in one list, reads x back and checks it.
	run := func(count int) time.Duration {
		t.Helper()
		if err := d.Write(bufs[0], 0, gputest.F32Bytes(x)); err != nil {
			t.Fatal(err)
		}
		cmds, err := d.NewCommands()
		if err != nil {
			t.Fatal(err)
		}
		defer cmds.Release()
		for i := range count {
			in, out := bufs[i%2], bufs[1-i%2]
			if err := cmds.Dispatch(k, []gpu.Binding{{Buf: params}, {Buf: step}, {Buf: in}, {Buf: bufs[2]}, {Buf: out}}, cols/64, rows, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmds.Finish(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := d.Submit(cmds); err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, n*4)
		if err := d.Read(bufs[0], 0, raw); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		for i := 0; i < n; i++ {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if want := x[i] + float32(count); got != want {
				t.Fatalf("%d dispatches: x[%d] = %v, want %v", count, i, got, want)
			}
		}
		return took
	}
	const probe = 8
	per := run(probe) / probe
	count := 2 * int(math.Ceil(float64(8*time.Second)/float64(per)/2))
	count = max(probe, min(count, 4000))
	took := run(count)
	t.Logf("%d dispatches of %d additions in one submission: %v (%v each from the probe)", count, n, took, per)
}

// TestLongSubmissionOnSwiftShader reruns TestLongSubmission on SwiftShader,
// where the five-second fence timeout showed as stale data.
func TestLongSubmissionOnSwiftShader(t *testing.T) {
	gputest.RerunOnSwiftShader(t, "^TestLongSubmission$")
}
