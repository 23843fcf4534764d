package cpu

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/gpurun/gpurun/fusion"
)

// kvBlocksGolden is testdata/kvquant/blocks.json (see testdata/kvquant/README.md): llama.cpp's
// quantize_row_*_ref, dequantization and CPU vec_dot on fixed inputs.
type kvBlocksGolden struct {
	N       int
	Inputs  [][]float32
	Queries [][]float32
	Types   map[string]struct {
		VecDotType  string      `json:"vec_dot_type"`
		Blocks      []string    // quantize_row_*_ref
		Stored      []string    // the CPU backend's from_float, which its cache stores use
		Dequantized [][]float32 // to_float of Blocks
		Dots        []float32
	}
}

// TestKVBlocksMatchLlamaCpp holds the quantized cache's blocks to
// llama.cpp's bit for bit: the stores' quantization (its CPU backend's
// from_float: quantize_row_*_ref but for q8_0, whose x86 form rounds
// halves to even) and the reads' dequantization; and the key scores (a block dot product
// with the query quantized to q8_0 or q8_1 as llama.cpp's x86
// quantize_row_q8_0/q8_1 do) to llama.cpp's vec_dot within 1e-6 of Σ|k q|
// (the order of the float sums differs).
func TestKVBlocksMatchLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("testdata/kvquant/blocks.json")
	if err != nil {
		t.Fatal(err)
	}
	var g kvBlocksGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Types) != 6 {
		t.Fatalf("%d types in the golden, want 6", len(g.Types))
	}
	for name, want := range g.Types {
		kt, _, err := fusion.ParseKVType(name)
		if err != nil {
			t.Fatal(err)
		}
		if sums := sumsQ8(kt); sums != (want.VecDotType == "q8_1") {
			t.Errorf("%s: query block sums %v, llama.cpp's vec_dot_type is %s", name, sums, want.VecDotType)
		}
		for r, x := range g.Inputs {
			got := make([]byte, g.N/qk*kt.BlockBytes())
			quantizeBlocks(kt, got, x)
			if h := hex.EncodeToString(got); h != want.Stored[r] {
				t.Errorf("%s row %d: blocks\n%s\nwant\n%s", name, r, h, want.Stored[r])
				continue
			}
			if got, err = hex.DecodeString(want.Blocks[r]); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, g.N)
			for b := range g.N / qk {
				dequantBlock(kt, got[b*kt.BlockBytes():], y[b*qk:])
			}
			for j := range y {
				if math.Float32bits(y[j]) != math.Float32bits(want.Dequantized[r][j]) {
					t.Errorf("%s row %d value %d: dequantized %g, want %g", name, r, j, y[j], want.Dequantized[r][j])
					break
				}
			}
			qq := q8Query{q: make([]int8, g.N), d: make([]float32, g.N/qk), s: make([]float32, g.N/qk)}
			qq.quantize(g.Queries[r], sumsQ8(kt))
			var dot [1]float32
			scoreRows(kt, got, g.N, &qq, dot[:])
			var mag float64
			for j, v := range y {
				mag += math.Abs(float64(v * g.Queries[r][j]))
			}
			if d := math.Abs(float64(dot[0] - want.Dots[r])); d > 1e-6*mag+1e-7 {
				t.Errorf("%s row %d: score %g, llama.cpp's %g (|diff| %g, Σ|k q| %g)", name, r, dot[0], want.Dots[r], d, mag)
			}
		}
	}
}

// TestHadamard checks the fast transform against the matrix llama.cpp
// builds (ggml_gen_hadamard: Sylvester's construction from 1/sqrt(n)),
// multiplied out, and that it is its own inverse.
func TestHadamard(t *testing.T) {
	for _, n := range []int{64, 128, 256} {
		m := make([]float32, n*n)
		m[0] = float32(1 / math.Sqrt(float64(n)))
		for s := 1; s < n; s *= 2 {
			for i := range s {
				for j := range s {
					v := m[i*n+j]
					m[(i+s)*n+j], m[i*n+j+s], m[(i+s)*n+j+s] = v, v, -v
				}
			}
		}
		x := make([]float32, 2*n)
		for i := range x {
			x[i] = float32(math.Sin(float64(i*i+1))) * 3
		}
		got := append([]float32(nil), x...)
		hadamard(got, n)
		for r := range 2 {
			for i := range n {
				var want float64
				for j := range n {
					want += float64(m[i*n+j]) * float64(x[r*n+j])
				}
				if d := math.Abs(float64(got[r*n+i]) - want); d > 1e-5 {
					t.Fatalf("n %d run %d value %d: %g, the matrix gives %g", n, r, i, got[r*n+i], want)
				}
			}
		}
		hadamard(got, n)
		for i := range x {
			if d := math.Abs(float64(got[i] - x[i])); d > 1e-5 {
				t.Fatalf("n %d: H·H·x[%d] = %g, want %g", n, i, got[i], x[i])
			}
		}
	}
}
