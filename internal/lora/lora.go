// Package lora holds low-rank adapters (LoRA) in one form whatever file they
// came from (GGUF adapters as llama.cpp's convert_lora_to_gguf.py writes
// them, Hugging Face PEFT directories: see internal/gguf and internal/hf), and
// merges them into a checkpoint's weights: W' = W + s·B·A.
//
// A target is one of the checkpoint's linear weights, named as in package
// model. Fused projections of a file (GGUF attn_qkv, Phi 3's gate/up) are
// split on import into targets that share A and take their rows of B, the
// way the base weights are split.
package lora

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

var (
	// ErrFormat reports a malformed adapter.
	ErrFormat = errors.New("lora: malformed adapter")
	// ErrMismatch reports an adapter that does not fit the base model: another
	// architecture, a target the model lacks, or a shape that disagrees.
	ErrMismatch = errors.New("lora: adapter does not fit the model")
	// ErrUnsupported reports a well-formed adapter using something gpurun
	// does not implement (a target kind, a PEFT option).
	ErrUnsupported = errors.New("lora: unsupported")
)

// Pair is the update of one target: Delta = B·A with A [Rank, In] and
// B [Out, Rank], both row-major float32.
type Pair struct {
	Target        string
	Rank, In, Out int
	A, B          []float32
}

// Check verifies that the sizes agree.
func (p *Pair) Check() error {
	if p.Rank <= 0 || p.In <= 0 || p.Out <= 0 || len(p.A) != p.Rank*p.In || len(p.B) != p.Out*p.Rank {
		return fmt.Errorf("%w: %s: A has %d values and B %d for rank %d, in %d, out %d", ErrFormat, p.Target, len(p.A), len(p.B), p.Rank, p.In, p.Out)
	}
	return nil
}

// Adapter is one loaded adapter.
type Adapter struct {
	// Arch is the architecture the adapter was made for (GGUF's
	// general.architecture); "" when the file does not say (PEFT).
	Arch string
	// Alpha is lora_alpha: a pair's scale is user·Alpha/Rank (llama.cpp's
	// rule); 0 means the user's scale alone.
	Alpha float32
	Pairs []Pair
}

// Scale is the factor of pair p's B·A for a user scale (--lora FILE:SCALE).
func (a *Adapter) Scale(p *Pair, user float32) float32 {
	if a.Alpha == 0 {
		return user
	}
	return user * a.Alpha / float32(p.Rank)
}

// Applied is an adapter with the user's scale.
type Applied struct {
	Adapter *Adapter
	Scale   float32
}

// Options control Merge.
type Options struct {
	// Requantize stores a merged I8 or I4 weight in its type again, with its
	// block size and scale type (adding rounding error to the adapter's
	// update); by default a merged quantized weight becomes F32, exact but
	// four to eight times larger. Block types (Q4_K and the like) have no
	// quantizer here and always become F32.
	Requantize bool
}

// Merge adds each adapter's s·B·A to its targets in ck. It checks every
// adapter against ck (architecture, targets, shapes) before changing
// anything. Merged tensors are new: the originals may alias a mapped file.
func Merge(ck *model.Checkpoint, list []Applied, opts Options) error {
	index, err := check(ck.Config.Arch, ck.Tensors, list)
	if err != nil {
		return err
	}
	deltas := map[string][]float32{}
	var order []string
	for _, ap := range list {
		a := ap.Adapter
		for i := range a.Pairs {
			p := &a.Pairs[i]
			d, ok := deltas[p.Target]
			if !ok {
				d = make([]float32, p.Out*p.In)
				deltas[p.Target] = d
				order = append(order, p.Target)
			}
			addProduct(d, p, a.Scale(p, ap.Scale))
		}
	}
	for _, name := range order {
		ti := index[name]
		merged, err := apply(ck.Tensors[ti], deltas[name], opts)
		if err != nil {
			return err
		}
		ck.Tensors[ti] = merged
	}
	return nil
}

// check verifies the adapters against a model of architecture arch with
// the given weights, returning the weights' index by name.
func check(arch string, weights []*tensors.Tensor, list []Applied) (map[string]int, error) {
	index := map[string]int{}
	for i, t := range weights {
		index[t.Name] = i
	}
	for _, ap := range list {
		a := ap.Adapter
		if a == nil {
			return nil, fmt.Errorf("%w: nil adapter", ErrFormat)
		}
		if a.Arch != "" && a.Arch != arch {
			return nil, fmt.Errorf("%w: adapter for architecture %q, model is %q", ErrMismatch, a.Arch, arch)
		}
		if math.IsNaN(float64(ap.Scale)) || math.IsInf(float64(ap.Scale), 0) {
			return nil, fmt.Errorf("%w: scale %v", ErrFormat, ap.Scale)
		}
		for i := range a.Pairs {
			p := &a.Pairs[i]
			if err := p.Check(); err != nil {
				return nil, err
			}
			ti, ok := index[p.Target]
			if !ok {
				return nil, fmt.Errorf("%w: target %s: the model has no such weight", ErrMismatch, p.Target)
			}
			w := weights[ti]
			if len(w.Shape) != 2 || w.Shape[0] != p.Out || w.Shape[1] != p.In {
				return nil, fmt.Errorf("%w: target %s: the model's weight is %v, the adapter's update [%d %d]", ErrMismatch, p.Target, w.Shape, p.Out, p.In)
			}
		}
	}
	return index, nil
}

// UnmergedPair names the weights of one pair kept apart from its target:
// A [Rank, in] and B [out, Rank], B already multiplied by the scale.
type UnmergedPair struct {
	Target, A, B string
	Rank         int
}

// Unmerged checks the adapters against a model of architecture arch with
// the given weights, like Merge, and returns their pairs as F32 tensors to
// load beside the weights (named "<target>.lora_a.<n>.<i>" and
// ".lora_b.<n>.<i>", n the adapter's index in list and i the pair's) with the pairs that name them, for a
// runtime that computes W·x + B·(A·x).
func Unmerged(arch string, weights []*tensors.Tensor, list []Applied) ([]*tensors.Tensor, []UnmergedPair, error) {
	if _, err := check(arch, weights, list); err != nil {
		return nil, nil, err
	}
	var ts []*tensors.Tensor
	var pairs []UnmergedPair
	for n, ap := range list {
		a := ap.Adapter
		for i := range a.Pairs {
			p := &a.Pairs[i]
			s := a.Scale(p, ap.Scale)
			b := make([]float32, len(p.B))
			for j, v := range p.B {
				b[j] = s * v
			}
			up := UnmergedPair{Target: p.Target, A: fmt.Sprintf("%s.lora_a.%d.%d", p.Target, n, i), B: fmt.Sprintf("%s.lora_b.%d.%d", p.Target, n, i), Rank: p.Rank}
			ta, err := tensors.FromF32(up.A, []int{p.Rank, p.In}, p.A, tensors.F32)
			if err != nil {
				return nil, nil, err
			}
			tb, err := tensors.FromF32(up.B, []int{p.Out, p.Rank}, b, tensors.F32)
			if err != nil {
				return nil, nil, err
			}
			ts = append(ts, ta, tb)
			pairs = append(pairs, up)
		}
	}
	return ts, pairs, nil
}

// addProduct adds s·B·A to d ([Out, In]).
func addProduct(d []float32, p *Pair, s float32) {
	for o := range p.Out {
		row := d[o*p.In : (o+1)*p.In]
		for r := range p.Rank {
			c := s * p.B[o*p.Rank+r]
			if c == 0 {
				continue
			}
			a := p.A[r*p.In : (r+1)*p.In]
			for i, v := range a {
				row[i] += c * v
			}
		}
	}
}

// apply returns w + d as a new tensor of w's name.
func apply(w *tensors.Tensor, d []float32, opts Options) (*tensors.Tensor, error) {
	vals, err := w.Float32()
	if err != nil {
		return nil, fmt.Errorf("lora: %s: %w", w.Name, err)
	}
	for i := range vals {
		vals[i] += d[i]
	}
	switch {
	case w.DType == tensors.F32 || w.DType == tensors.F16 || w.DType == tensors.BF16:
		return tensors.FromF32(w.Name, w.Shape, vals, w.DType)
	case w.DType.Quantized() && opts.Requantize && w.Scales != nil:
		block := 0
		if len(w.Scales.Shape) == 2 {
			block = w.BlockSize()
		}
		t, err := tensors.Quantize(w.Name, w.Shape, vals, w.DType, block, w.Scales.DType)
		if err != nil {
			return nil, fmt.Errorf("lora: requantize %s: %w", w.Name, err)
		}
		t.Scales.Name = model.ScaleName(w.Name)
		return t, nil
	default:
		return tensors.FromF32(w.Name, w.Shape, vals, tensors.F32)
	}
}
