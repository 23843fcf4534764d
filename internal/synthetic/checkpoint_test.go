package synthetic

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func TestCheckpointTensorsMatchGraph(t *testing.T) {
	for _, tc := range testConfigs() {
		for _, q := range quantModes {
			t.Run(tc.name+"/"+q, func(t *testing.T) {
				checkLayout(t, &tc.cfg)
				ck, err := Checkpoint(tc.cfg, Options{Quant: q, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				want := layout(&tc.cfg)
				if len(ck.Tensors) != len(want) {
					t.Fatalf("%d tensors, layout has %d", len(ck.Tensors), len(want))
				}
				var total int64
				for i, ts := range ck.Tensors {
					if ts.Name != want[i].name || !slices.Equal(ts.Shape, want[i].shape) {
						t.Fatalf("tensor %d is %s%v, want %s%v", i, ts.Name, ts.Shape, want[i].name, want[i].shape)
					}
					if err := ts.Check(); err != nil {
						t.Errorf("Check: %v", err)
					}
					total += int64(len(ts.Data))
					if ts.Scales != nil {
						total += int64(len(ts.Scales.Data))
						if ts.Scales.Name != model.ScaleName(ts.Name) {
							t.Errorf("%s: scales named %q", ts.Name, ts.Scales.Name)
						}
					}
				}
				size, err := Bytes(tc.cfg, Options{Quant: q})
				if err != nil || size != total {
					t.Errorf("Bytes = %d, %v; built %d", size, err, total)
				}
			})
		}
	}
}

// formatCase is the expected storage of one tensor in one mode.
type formatCase struct {
	quant, tensor string
	dtype         tensors.DType
	block         int
	scale         tensors.DType
}

// TestStorageFormats checks the dtype and block of every matrix against the
// documented choice for each mode.
func TestStorageFormats(t *testing.T) {
	cfg := oddShapes()
	cases := []formatCase{
		{QuantInt4, model.TokenEmbedding, tensors.I8, 48, tensors.F32},
		{QuantInt4, model.LMHead, tensors.I8, 48, tensors.F32},
		{QuantInt4, model.Layer(0, model.WQ), tensors.I4, 48, tensors.F32},    // 48 columns: no int4 blocks of 32
		{QuantInt4, model.Layer(0, model.WDown), tensors.I8, 45, tensors.F32}, // odd rows cannot pack nibbles
		{QuantInt4, model.Layer(0, model.AttnNorm), tensors.F32, 0, 0},
		{QuantInt8, model.Layer(1, model.WUp), tensors.I8, 48, tensors.F32},
		{QuantF16, model.Layer(1, model.WGate), tensors.F16, 0, 0},
		{QuantF16, model.TokenEmbedding, tensors.F16, 0, 0},
		{QuantF32, model.Layer(1, model.WDown), tensors.F32, 0, 0},
		{QuantF32, model.LMHead, tensors.F32, 0, 0},
	}
	shrunk := shrink(Specs()[0].Config)
	blocked := []formatCase{
		{QuantInt4, model.Layer(1, model.WDown), tensors.I4, Int4Block, tensors.F16},
		{"", model.Layer(0, model.WK), tensors.I4, Int4Block, tensors.F16},
	}
	run := func(cfg model.Config, cases []formatCase) {
		for _, tc := range cases {
			ck, err := Checkpoint(cfg, Options{Quant: tc.quant})
			if err != nil {
				t.Fatal(err)
			}
			ts := ck.Tensor(tc.tensor)
			if ts == nil {
				t.Fatalf("%s: no tensor %s", tc.quant, tc.tensor)
			}
			var scale tensors.DType
			if ts.Scales != nil {
				scale = ts.Scales.DType
			}
			if ts.DType != tc.dtype || ts.BlockSize() != tc.block || scale != tc.scale {
				t.Errorf("%q %s: %s block %d scales %v, want %s block %d scales %v",
					tc.quant, tc.tensor, ts.DType, ts.BlockSize(), scale, tc.dtype, tc.block, tc.scale)
			}
		}
	}
	run(cfg, cases)
	run(shrunk, blocked)
}

// TestValueStatistics dequantizes with the tensors package (an independent
// reader of the stored formats) and checks the promised distributions.
func TestValueStatistics(t *testing.T) {
	cfg := shrink(Specs()[2].Config) // phi-2: LayerNorm and every bias kind
	for _, q := range quantModes {
		ck, err := Checkpoint(cfg, Options{Quant: q, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		roles := map[string]role{}
		for _, e := range layout(&cfg) {
			roles[e.name] = e.role
		}
		for _, ts := range ck.Tensors {
			vals, err := ts.Float32()
			if err != nil {
				t.Fatalf("%s %s: %v", q, ts.Name, err)
			}
			switch roles[ts.Name] {
			case roleNorm:
				checkRange(t, q, ts.Name, vals, 0.95, 1.05)
			case roleBias:
				checkRange(t, q, ts.Name, vals, -0.02, 0.02)
			default:
				var sum, sq float64
				for _, v := range vals {
					sum += float64(v)
					sq += float64(v) * float64(v)
				}
				n := float64(len(vals))
				mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
				want := 1 / math.Sqrt(float64(ts.Cols()))
				if math.Abs(std/want-1) > 0.05 || math.Abs(mean) > 0.05*want {
					t.Errorf("%s %s: mean %.3g std %.4g, want mean 0 std %.4g (±5%%)", q, ts.Name, mean, std, want)
				}
			}
			if ts.DType.Quantized() {
				checkSymmetricCodes(t, q, ts)
			}
		}
	}
}

func checkRange(t *testing.T, q, name string, vals []float32, lo, hi float32) {
	t.Helper()
	mn, mx := vals[0], vals[0]
	for _, v := range vals {
		mn, mx = min(mn, v), max(mx, v)
	}
	if mn < lo || mx > hi || mn == mx {
		t.Errorf("%s %s: values in [%g, %g], want inside [%g, %g] and not constant", q, name, mn, mx, lo, hi)
	}
}

// checkSymmetricCodes: codes stay in ±127 / ±7, as symmetric quantization
// produces them, and use the whole range.
func checkSymmetricCodes(t *testing.T, q string, ts *tensors.Tensor) {
	t.Helper()
	seen := map[int]bool{}
	for _, b := range ts.Data {
		if ts.DType == tensors.I8 {
			seen[int(int8(b))] = true
			continue
		}
		seen[int(int8(b<<4)>>4)] = true
		seen[int(int8(b)>>4)] = true
	}
	limit := 7
	if ts.DType == tensors.I8 {
		limit = 127
	}
	if seen[-limit-1] || !seen[-limit] || !seen[limit] {
		t.Errorf("%s %s: codes -%d seen %v, ±%d seen %v/%v", q, ts.Name, limit+1, seen[-limit-1], limit, seen[-limit], seen[limit])
	}
}

func TestSeedDeterminism(t *testing.T) {
	cfg := shrink(Specs()[1].Config)
	build := func(seed uint64) *model.Checkpoint {
		ck, err := Checkpoint(cfg, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	a, b, c := build(3), build(3), build(4)
	for i := range a.Tensors {
		x, y, z := a.Tensors[i], b.Tensors[i], c.Tensors[i]
		if !bytes.Equal(x.Data, y.Data) {
			t.Errorf("%s differs between two builds with seed 3", x.Name)
		}
		if bytes.Equal(x.Data, z.Data) {
			t.Errorf("%s is the same for seeds 3 and 4", x.Name)
		}
	}
	// Different tensors of one build draw different streams.
	q, k := a.Tensor(model.Layer(0, model.WUp)), a.Tensor(model.Layer(0, model.WGate))
	if bytes.Equal(q.Data, k.Data) {
		t.Error("up and gate projections hold the same bytes")
	}
}

func TestCheckpointErrors(t *testing.T) {
	good := shrink(Specs()[0].Config)
	noHeads := good
	noHeads.Heads = 0
	badNorm := good
	badNorm.Norm = "batch"
	huge, _ := ByName("gemma-2b")
	cases := []struct {
		name string
		cfg  model.Config
		opts Options
		want error
	}{
		{"unknown quant", good, Options{Quant: "int2"}, ErrOptions},
		{"upper-case quant", good, Options{Quant: "INT4"}, ErrOptions},
		{"negative limit", good, Options{MaxBytes: -1}, ErrOptions},
		{"zero heads", noHeads, Options{}, model.ErrConfig},
		{"unknown norm", badNorm, Options{}, model.ErrConfig},
		{"over the limit", huge, Options{MaxBytes: 1 << 20}, ErrTooLarge},
		{"f16 over the default limit", func() model.Config { c := huge; c.Layers = 200; return c }(), Options{Quant: QuantF16}, ErrTooLarge},
		{"every dimension at the config maximum", func() model.Config {
			c := huge
			c.VocabSize, c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.RopeDims = 1<<24, 1<<24, 1<<24, 1<<24, 1<<24, 1<<24, 1<<24, 0
			return c
		}(), Options{}, ErrTooLarge},
		{"millions of tiny layers", func() model.Config {
			c := good
			c.Layers, c.Dim, c.HiddenDim, c.Heads, c.KVHeads, c.HeadDim, c.RopeDims = 1<<24, 2, 2, 1, 1, 2, 2
			return c
		}(), Options{}, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ck, err := Checkpoint(tc.cfg, tc.opts)
			if !errors.Is(err, tc.want) || ck != nil {
				t.Fatalf("Checkpoint = %v, %v; want %v", ck, err, tc.want)
			}
			n, err := Bytes(tc.cfg, tc.opts)
			if tc.want != ErrTooLarge && !errors.Is(err, tc.want) {
				t.Errorf("Bytes error %v, want %v", err, tc.want)
			}
			if tc.want == ErrTooLarge && (err != nil || n <= tc.opts.MaxBytes) {
				t.Errorf("Bytes = %d, %v for a config over the limit", n, err)
			}
		})
	}
	if _, err := Params(noHeads); !errors.Is(err, model.ErrConfig) {
		t.Errorf("Params(zero heads) error %v", err)
	}
}
