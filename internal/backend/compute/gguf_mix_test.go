package compute_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// The files of testdata/gguf are llama.cpp's default quantization mixes
// (Q4_K_M, Q5_K_M, Q6_K, Q4_0, Q2_K) of a 256-wide llama and of the
// ../shared/models/arch models, whose short rows take llama-quantize's
// fallback types; golden.json and the .kld files hold llama.cpp's outputs
// for them (testdata/gguf/README.md).

type mixGolden struct {
	F32SHA256 map[string]string `json:"f32_sha256"`
	Types     map[string]string `json:"types"`
}

func mixDir(t testing.TB) string { return filepath.Join(testmodels.Root(t), "testdata", "gguf") }

func loadMixGoldens(t testing.TB) map[string]mixGolden { return loadGoldens(t, mixDir(t)) }

// loadGoldens reads dir's golden.json (testdata/gguf's form).
func loadGoldens(t testing.TB, dir string) map[string]mixGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]mixGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g) == 0 {
		t.Fatal("golden.json lists no files")
	}
	return g
}

// importedType is the runtime type each ggml type must import as.
var importedType = map[string]tensors.DType{
	"F32": tensors.F32, "F16": tensors.F16, "Q8_0": tensors.I8, "Q4_0": tensors.I4,
	"Q4_1": tensors.Q4_1, "Q5_0": tensors.Q5_0, "Q5_1": tensors.Q5_1,
	"Q4_K": tensors.Q4K, "Q5_K": tensors.Q5K, "Q6_K": tensors.Q6K, "Q2_K": tensors.Q2K, "Q3_K": tensors.Q3K,
	"IQ4_NL": tensors.IQ4_NL, "IQ4_XS": tensors.IQ4_XS, "IQ3_S": tensors.IQ3_S, "IQ3_XXS": tensors.IQ3_XXS,
	"IQ2_XXS": tensors.IQ2_XXS, "IQ2_XS": tensors.IQ2_XS, "IQ2_S": tensors.IQ2_S, "IQ1_S": tensors.IQ1_S,
	"IQ1_M": tensors.IQ1_M, "NVFP4": tensors.NVFP4, "TQ1_0": tensors.TQ1_0, "TQ2_0": tensors.TQ2_0,
}

// TestMixDequantizationMatchesLlamaCpp: every tensor of every quantized
// file, imported and dequantized by gpurun, is bit for bit the tensor of
// the F32 file llama.cpp dequantizes it to (SHA-256 of the f32 bytes).
func TestMixDequantizationMatchesLlamaCpp(t *testing.T) {
	checkDequantization(t, mixDir(t), loadMixGoldens(t))
}

// checkDequantization holds every tensor of dir's files, imported and
// dequantized, to the SHA-256 of llama.cpp's F32 file in goldens.
func checkDequantization(t *testing.T, dir string, goldens map[string]mixGolden) {
	for name, g := range goldens {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Tensors) != len(g.F32SHA256) {
				t.Fatalf("%d tensors, llama.cpp's F32 file has %d", len(f.Tensors), len(g.F32SHA256))
			}
			for i := range f.Tensors {
				info := &f.Tensors[i]
				tt, err := f.ImportTensor(info)
				if err != nil {
					t.Fatal(err)
				}
				if want := importedType[g.Types[info.Name]]; tt.DType != want || info.Type.String() != g.Types[info.Name] {
					t.Errorf("%s: ggml %s imported as %s, want %s from %s", info.Name, info.Type, tt.DType, want, g.Types[info.Name])
				}
				vals, err := tt.Float32()
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 4*len(vals))
				for j, v := range vals {
					binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
				}
				sum := sha256.Sum256(b)
				if got := hex.EncodeToString(sum[:]); got != g.F32SHA256[info.Name] {
					t.Errorf("%s (%s): dequantized values differ from llama.cpp's F32 file", info.Name, info.Type)
				}
			}
		})
	}
}

// kldFile is what llama-perplexity --kl-divergence-base writes: the token
// ids of every chunk, and for the second half of each chunk's positions the
// log-probabilities of the whole vocabulary, each row stored as an f32
// scale and an f32 minimum followed by one uint16 per token (log p ≈ min +
// scale*q; q = 0 means at most min).
type kldFile struct {
	nCtx, nVocab, nChunk int
	tokens               []int32
	rows                 [][]uint16 // per chunk, positions nCtx/2 .. nCtx-2
}

func readKLD(t testing.TB, path string) *kldFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 20 || string(b[:8]) != "_logits_" {
		t.Fatalf("%s: not a llama-perplexity logits file", path)
	}
	i32 := func(off int) int { return int(int32(binary.LittleEndian.Uint32(b[off:]))) }
	k := &kldFile{nCtx: i32(8), nVocab: i32(12), nChunk: i32(16)}
	off := 20
	for range k.nChunk * k.nCtx {
		k.tokens = append(k.tokens, int32(i32(off)))
		off += 4
	}
	nv := 2*((k.nVocab+1)/2) + 4
	for range k.nChunk * (k.nCtx - 1 - k.nCtx/2) {
		row := make([]uint16, nv)
		for j := range row {
			row[j] = binary.LittleEndian.Uint16(b[off+2*j:])
		}
		off += 2 * nv
		k.rows = append(k.rows, row)
	}
	if off != len(b) {
		t.Fatalf("%s: %d bytes, the header promises %d", path, len(b), off)
	}
	return k
}

// mixRun is one backend's pass over a chunk: logits of every prompt
// position, then greedy steps (ids and each step's logits row).
type mixRun struct {
	prompt [][]float32
	greedy []int
	steps  [][]float32
}

const mixGreedySteps = 8

func runMix(t *testing.T, be gpu.Backend, c *model.Config, ws []*tensors.Tensor, ids []int32) mixRun {
	t.Helper()
	ctx := context.Background()
	maxLen := len(ids) + mixGreedySteps
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	kv, err := be.NewKVCache(fusion.KVSpec{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, MaxLen: maxLen})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	compile := func(opts arch.BuildOptions) gpu.Program {
		g, err := arch.Build(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		p, err := be.Compile(g, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pre := compile(arch.BuildOptions{Tokens: len(ids), MaxLen: maxLen, AllLogits: true})
	defer pre.Release()
	dec := compile(arch.BuildOptions{Tokens: 1, MaxLen: maxLen})
	defer dec.Release()
	var r mixRun
	if err := pre.Run(ctx, ids, 0); err != nil {
		t.Fatal(err)
	}
	all := make([]float32, len(ids)*c.VocabSize)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		r.prompt = append(r.prompt, all[i*c.VocabSize:(i+1)*c.VocabSize])
	}
	row := r.prompt[len(ids)-1]
	for s := range mixGreedySteps {
		id := testmodels.Argmax(row)
		r.greedy = append(r.greedy, id)
		if err := dec.Run(ctx, []int32{int32(id)}, len(ids)+s); err != nil {
			t.Fatal(err)
		}
		row = make([]float32, c.VocabSize)
		if _, err := dec.Logits(row); err != nil {
			t.Fatal(err)
		}
		r.steps = append(r.steps, row)
	}
	return r
}

// decodedF32 replaces every tensor by its f32 dequantization: the
// checkpoint of the F32 file llama.cpp dequantizes the quantized one to
// (TestMixDequantizationMatchesLlamaCpp proves the values equal).
func decodedF32(t *testing.T, ts []*tensors.Tensor) []*tensors.Tensor {
	var out []*tensors.Tensor
	for _, w := range ts {
		vals, err := w.Float32()
		if err != nil {
			t.Fatal(err)
		}
		f, err := tensors.FromF32(w.Name, w.Shape, vals, tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// Tolerances of TestMixRuns, measured over every file (README.md of
// testdata/gguf has the figures):
//   - mixSameMath: the quantized file against its F32 dequantization on one
//     backend. The weights are the same numbers; only the order of the f32
//     additions differs (int8/int4 blocks sum before scaling; the GPU's
//     block kernels sum in other orders than its f32 kernels). The CPU
//     backend gives bitwise equal logits for the K-quant and other block
//     types, so the k256 Q4_K_M, Q5_K_M and Q6_K files are held to 0 there.
//     Largest measured: 2.2e-5 (falcon, GPU) with the element-wise matrix
//     kernels; 5.7e-5 (gemma2 Q4_K_M, GPU, both backends) since issue 8's
//     specialized matrix kernels, whose f32 path sums 16-byte chunks in
//     another order than the block kernels (gemma2's f16-rounded GELU input
//     amplifies it over 26 layers), hence 1e-4.
//   - mixVsCPU: a GPU device against the CPU backend on the quantized file:
//     summation order again, amplified where GELU rounds its input to f16
//     (gemma2's 26 layers, phi2, falcon). Largest measured: 5.3e-5.
//   - mixLlamaCpp: gpurun's log-probabilities against llama.cpp's on the
//     quantized file (llama-perplexity's, stored to 16 bits): llama.cpp
//     quantizes the activations to 8 bits inside its quantized dot products
//     and keeps an f16 KV cache, gpurun computes in f32 with exactly
//     dequantized weights. Largest measured: 0.022 (k256 Q5_K_M).
const (
	mixSameMath = 1e-4
	mixVsCPU    = 2e-4
	mixLlamaCpp = 0.05
)

// TestMixRuns: for every quantized file, greedy ids and logits from gpurun
// on the quantized file equal gpurun on its F32 dequantization within f32
// rounding, on the CPU backend and every GPU device; and gpurun's
// log-probabilities are within mixLlamaCpp of llama.cpp's on that file.
func TestMixRuns(t *testing.T) {
	for name := range loadMixGoldens(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(mixDir(t), name+".gguf")
			ck, err := gguf.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			c := &ck.Config
			kld := readKLD(t, filepath.Join(mixDir(t), name+".kld"))
			if kld.nVocab != c.VocabSize {
				t.Fatalf("llama.cpp's vocabulary %d, ours %d", kld.nVocab, c.VocabSize)
			}
			f32 := decodedF32(t, ck.Tensors)
			block := slices.ContainsFunc(ck.Tensors, func(w *tensors.Tensor) bool { return w.DType.Block() })
			allBlocks := !slices.ContainsFunc(ck.Tensors, func(w *tensors.Tensor) bool { return w.DType.Quantized() })
			for chunk := range kld.nChunk {
				ids := slices.Clone(kld.tokens[chunk*kld.nCtx : (chunk+1)*kld.nCtx])
				if c.AddBOS {
					ids[0] = int32(c.BOS) // llama-perplexity starts every chunk with BOS
				}
				ref := runMix(t, cpu.New(cpu.Options{Threads: 1}), c, ck.Tensors, ids)
				refF32 := runMix(t, cpu.New(cpu.Options{Threads: 1}), c, f32, ids)
				tol := mixSameMath
				if block && allBlocks {
					tol = 0
				}
				compareMix(t, fmt.Sprintf("chunk %d cpu", chunk), ref, refF32, tol)
				d := compareKLD(t, kld, chunk, ref.prompt)
				t.Logf("chunk %d: max |Δ log p| vs llama.cpp %.3g", chunk, d)
				if chunk > 0 {
					continue // one chunk on the GPU devices: lavapipe is slow
				}
				forEachDevice(t, func(t *testing.T, dev gpu.Device) {
					be := backendOn(t, dev, compute.Options{})
					got, gotF32 := runMix(t, be, c, ck.Tensors, ids), runMix(t, be, c, f32, ids)
					compareMix(t, "quantized vs f32", got, gotF32, mixSameMath)
					compareMix(t, "vs cpu", got, ref, mixVsCPU)
				})
			}
		})
	}
}

// compareMix fails unless the greedy ids are equal and every logit is
// within tol.
func compareMix(t *testing.T, what string, a, b mixRun, tol float64) {
	t.Helper()
	if !slices.Equal(a.greedy, b.greedy) {
		t.Errorf("%s: greedy %v vs %v", what, a.greedy, b.greedy)
	}
	worst := 0.0
	for i := range a.prompt {
		worst = max(worst, maxDiff(a.prompt[i], b.prompt[i]))
	}
	for i := range a.steps {
		worst = max(worst, maxDiff(a.steps[i], b.steps[i]))
	}
	if !(worst <= tol) {
		t.Errorf("%s: logits differ by up to %.3g (tolerance %.3g)", what, worst, tol)
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		if a[i] != a[i] || b[i] != b[i] {
			return math.Inf(1)
		}
	}
	return d
}

// compareKLD checks the log-softmax of our logits at the positions
// llama-perplexity recorded for chunk against its stored values and
// returns the largest difference.
func compareKLD(t *testing.T, k *kldFile, chunk int, logits [][]float32) float64 {
	t.Helper()
	first := k.nCtx / 2
	n := k.nCtx - 1 - first
	worst := 0.0
	for i := range n {
		row := k.rows[chunk*n+i]
		scale := math.Float32frombits(uint32(row[0]) | uint32(row[1])<<16)
		minLP := math.Float32frombits(uint32(row[2]) | uint32(row[3])<<16)
		lp := logSoftmax(logits[first+i])
		for j, q := range row[4 : 4+k.nVocab] {
			want := float64(minLP) + float64(scale)*float64(q)
			var d float64
			if q == 0 {
				d = max(0, lp[j]-want) // llama.cpp stores only "at most min"
			} else {
				d = math.Abs(lp[j] - want)
			}
			worst = max(worst, d)
		}
	}
	if !(worst <= mixLlamaCpp) {
		t.Errorf("chunk %d: log-probabilities differ from llama.cpp's by up to %.3g (tolerance %g)", chunk, worst, mixLlamaCpp)
	}
	return worst
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - math.Log(s)
	}
	return out
}
