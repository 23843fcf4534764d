package compute

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestSpan: the span of a valid length is the smallest power of two of
// chunks holding it, and the whole cache's list (0) from the program's
// chunks on.
func TestSpan(t *testing.T) {
	cases := []struct{ chunks, valid, want int }{
		{20, 0, 1}, {20, 1, 1}, {20, 64, 1}, {20, 65, 2}, {20, 128, 2}, {20, 129, 4},
		{20, 512, 8}, {20, 513, 16}, {20, 1024, 16}, {20, 1025, 0}, {20, 1280, 0},
		{16, 960, 0}, {16, 1024, 0}, {8, 448, 0}, {2, 64, 1}, {2, 65, 0},
		{1, 1, 0}, {1, 64, 0}, {0, 1, 0}, {0, 100, 0},
	}
	for _, c := range cases {
		p := &program{chunks: c.chunks}
		if got := p.span(c.valid); got != c.want {
			t.Errorf("span(%d) with %d chunks = %d, want %d", c.valid, c.chunks, got, c.want)
		}
	}
}

// gridDevice passes everything to its device and records, for each
// command list recorded on it, the kernel and grid of every dispatch, and
// the dispatches of the last list submitted.
type gridDevice struct {
	gpu.Device
	mu    sync.Mutex
	names map[gpu.Kernel]string
	last  []gridDispatch
}

type gridDispatch struct {
	kernel  string
	x, y, z int
}

type gridCommands struct {
	gpu.Commands
	d     *gridDevice
	grids []gridDispatch
}

func (d *gridDevice) NewKernel(spec shaders.KernelSpec) (gpu.Kernel, error) {
	k, err := d.Device.NewKernel(spec)
	if err == nil {
		d.mu.Lock()
		d.names[k] = spec.Name
		d.mu.Unlock()
	}
	return k, err
}

func (d *gridDevice) NewCommands() (gpu.Commands, error) {
	c, err := d.Device.NewCommands()
	if err != nil {
		return nil, err
	}
	return &gridCommands{Commands: c, d: d}, nil
}

func (c *gridCommands) Dispatch(k gpu.Kernel, b []gpu.Binding, x, y, z int) error {
	c.d.mu.Lock()
	name := c.d.names[k]
	c.d.mu.Unlock()
	c.grids = append(c.grids, gridDispatch{name, x, y, z})
	return c.Commands.Dispatch(k, b, x, y, z)
}

func (d *gridDevice) Submit(cmds ...gpu.Commands) error {
	inner := make([]gpu.Commands, len(cmds))
	d.last = nil
	for i, c := range cmds {
		gc := c.(*gridCommands)
		inner[i] = gc.Commands
		d.last = append(d.last, gc.grids...)
	}
	return d.Device.Submit(inner...)
}

// splitChunks returns the y of every attn_split dispatch of the last list
// submitted.
func (d *gridDevice) splitChunks() []int {
	var ys []int
	for _, g := range d.last {
		if strings.HasPrefix(g.kernel, "attn_split") {
			ys = append(ys, g.y)
		}
	}
	return ys
}

// TestSpanLists runs stories260K decode steps with a 512-position cache
// (8 chunks of attn_split) on every device and checks that each step ran
// the list of its span: its attn_split dispatches cover the chunks up to
// the step's last position (rounded up to a power of two), for Run,
// RunSteps and RunBatch; and that a step's logits through its span's list
// are bit for bit those of the whole cache's list, with the partials
// buffer filled with garbage before each run, so that a partial the
// shorter list failed to write would show.
func TestSpanLists(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	const maxLen = 512
	if ck.Config.MaxSeqLen < maxLen {
		t.Fatalf("stories260K holds %d positions, the test needs %d", ck.Config.MaxSeqLen, maxLen)
	}
	layers := ck.Config.Layers
	ctx := context.Background()
	for _, d := range TestDevices {
		t.Run(d.Name, func(t *testing.T) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(t, d.Name, err)
			defer dev.Close()
			gd := &gridDevice{Device: dev, names: map[gpu.Kernel]string{}}
			be := New(gd)
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()
			kv, err := be.NewKVCache(mustBuild(t, &ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: maxLen, KVF16: true}).KV)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			compile := func(o arch.BuildOptions) *program {
				t.Helper()
				o.MaxLen, o.KVF16 = maxLen, true
				pr, err := be.Compile(gpu.Fuse(be, w, mustBuild(t, &ck.Config, o)), w, kv)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pr.Release)
				return pr.(*program)
			}
			expect := func(what string, want, n int) {
				t.Helper()
				ys := gd.splitChunks()
				if len(ys) != n {
					t.Fatalf("%s: %d attn_split dispatches, want %d", what, len(ys), n)
				}
				for _, y := range ys {
					if y != want {
						t.Fatalf("%s: attn_split dispatches %v chunks, want %d each", what, ys, want)
					}
				}
			}
			// RunSteps fills positions 0..319, each submission's list
			// covering its last step.
			steps := compile(arch.BuildOptions{Tokens: 1, Argmax: true})
			tok := int32(1)
			for _, c := range []struct{ pos, want int }{{0, 1}, {64, 2}, {128, 4}, {192, 4}, {256, 8}} {
				ids, err := steps.RunSteps(ctx, tok, c.pos, 64, nil)
				if err != nil {
					t.Fatal(err)
				}
				tok = ids[len(ids)-1]
				expect(fmt.Sprintf("RunSteps(64 from %d)", c.pos), c.want, 64*layers)
			}
			if _, err := steps.RunSteps(ctx, tok, 60, 5, nil); err != nil {
				t.Fatal(err)
			}
			expect("RunSteps(5 from 60)", 2, 5*layers)

			// Run: the span's list against the whole cache's, from
			// garbage partials.
			p := compile(arch.BuildOptions{Tokens: 1})
			var part gpu.Buffer
			for _, it := range p.items {
				if it.chunked {
					part = it.bindings[5].Buf // attentionBindings.Part
				}
			}
			if part == nil {
				t.Fatal("the decode program has no chunked attn_split item")
			}
			garbage := make([]byte, part.Size())
			for i := 0; i+4 <= len(garbage); i += 4 {
				binary.LittleEndian.PutUint32(garbage[i:], math.Float32bits(1e4))
			}
			vocab := ck.Config.VocabSize
			logits := func(what string, pos int, list func(int) (gpu.Commands, error)) []float32 {
				t.Helper()
				if err := dev.Write(part, 0, garbage); err != nil {
					t.Fatal(err)
				}
				if err := p.run(ctx, []int32{tok}, pos, list); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				out := make([]float32, vocab)
				if _, err := p.Logits(out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			whole := func(int) (gpu.Commands, error) { return p.cmds, nil }
			for _, c := range []struct{ pos, want int }{{0, 1}, {10, 1}, {63, 1}, {64, 2}, {127, 2}, {128, 4}, {255, 4}, {256, 8}, {300, 8}, {511, 8}} {
				what := fmt.Sprintf("Run at %d", c.pos)
				got := logits(what, c.pos, p.spanList)
				expect(what, c.want, layers)
				want := logits(what+" (whole list)", c.pos, whole)
				expect(what+" (whole list)", maxLen/attnChunk, layers)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: logit %d is %v through the span's list, %v through the whole cache's", what, i, got[i], want[i])
					}
				}
				if math.IsNaN(float64(want[0])) || want[0] == 0 {
					t.Fatalf("%s: logit 0 is %v", what, want[0])
				}
			}

			// RunBatch: the furthest row's span, for every row's
			// dispatches.
			kv2, err := be.NewKVCache(mustBuild(t, &ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: maxLen, KVF16: true}).KV)
			if err != nil {
				t.Fatal(err)
			}
			defer kv2.Release()
			bg := mustBuild(t, &ck.Config, arch.BuildOptions{Tokens: 2, Batch: true, MaxLen: maxLen, KVF16: true})
			bp, err := be.CompileBatch(gpu.Fuse(be, w, bg), w, []gpu.KVCache{kv, kv2})
			if err != nil {
				t.Fatal(err)
			}
			defer bp.Release()
			for _, c := range []struct {
				rows []gpu.Row
				want int
			}{
				{[]gpu.Row{{Token: 1, Pos: 10, Seq: 0}, {Token: 2, Pos: 5, Seq: 1}}, 1},
				{[]gpu.Row{{Token: 1, Pos: 10, Seq: 0}, {Token: 2, Pos: 200, Seq: 1}}, 4},
				{[]gpu.Row{{Token: 1, Pos: 300, Seq: 0}}, 8},
			} {
				if err := bp.RunBatch(ctx, c.rows); err != nil {
					t.Fatal(err)
				}
				expect(fmt.Sprintf("RunBatch(%v)", c.rows), c.want, 2*layers)
			}
		})
	}
}

func mustBuild(t *testing.T, cfg *model.Config, o arch.BuildOptions) *fusion.Graph {
	t.Helper()
	g, err := arch.Build(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
