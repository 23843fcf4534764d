package compute

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/compute/internal/kernelgen"
	"github.com/gpurun/gpurun/shaders"
)

// The committed kernel contracts are what kernelgen makes of the current
// WGSL: a renamed, added or removed binding or entry point, or a changed
// uniform struct name, fails here until go generate runs (and then the
// compiler flags every dispatch that no longer fits).
func TestKernelContractsCurrent(t *testing.T) {
	want, err := kernelgen.Source()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("kernels_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("kernels_gen.go is stale: run go generate ./internal/backend/compute")
	}
	// Every entry point has its contract.
	for _, name := range shaders.Names() {
		if !bytes.Contains(got, []byte(`{name: "`+name+`"}`)) {
			t.Errorf("no contract for kernel %s", name)
		}
	}
}

// The backend dispatches only through contracts: outside kernels_gen.go no
// contract is spelled out, no positional binding list is built (a
// []gpu.Binding literal of more than the uniform block) and no kernel is
// looked up by a name made of strings.
func TestDispatchThroughContracts(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "kernels_gen.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if idx, ok := n.Type.(*ast.IndexListExpr); ok {
					if id, ok := idx.X.(*ast.Ident); ok && id.Name == "contract" {
						t.Errorf("%s: a contract spelled out by hand: contracts come from kernels_gen.go", fset.Position(n.Pos()))
					}
				}
				if arr, ok := n.Type.(*ast.ArrayType); ok && arr.Len == nil && isGPUBinding(arr.Elt) && len(n.Elts) > 1 {
					t.Errorf("%s: a positional []gpu.Binding of %d: use the family's bindings struct", fset.Position(n.Pos()), len(n.Elts))
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "kernel" && len(n.Args) > 0 {
					switch a := n.Args[0].(type) {
					case *ast.BasicLit, *ast.BinaryExpr, *ast.CallExpr:
						if c, ok := a.(*ast.CallExpr); ok {
							if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Name" {
								break // a contract's name
							}
						}
						t.Errorf("%s: a kernel looked up by a name built in place: use a contract", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
}

func isGPUBinding(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "gpu" && sel.Sel.Name == "Binding"
}

// The choice of a product's kernel is a function of the device's
// capabilities and the shape alone: no device needed.
func TestChooseMatKernel(t *testing.T) {
	f16w := shaders.MatMulVariant{Weight: shaders.WeightF16}
	f32w := shaders.MatMulVariant{Weight: shaders.WeightF32}
	i4 := shaders.MatMulVariant{Weight: shaders.WeightI4, Scale: shaders.ScaleF16, Quant: true}
	none := caps{}
	sg := caps{subgroups: true}
	sgh := caps{subgroups: true, f16: true}
	decode := matShape{rows: 1, chunked: true}
	decodeH := matShape{rows: 1, chunked: true, xF16: true}
	for _, tc := range []struct {
		name            string
		c               caps
		v               shaders.MatMulVariant
		s               matShape
		want            string
		sub, half, norm bool
	}{
		{"prefill", sgh, f16w, matShape{rows: 4, chunked: true}, "matmul", false, false, false},
		{"prefill, partial chunks", none, f16w, matShape{rows: 32}, "matvec_lanes", false, false, false},
		{"batched step of 8 rows", none, f16w, matShape{rows: 8, batch: true, chunked: true}, "matvec_lanes", false, false, false},
		{"batched step, subgroups", sg, f16w, matShape{rows: 8, batch: true, chunked: true}, "matvec_sg", true, false, false},
		{"decode, no subgroups", none, f16w, decodeH, "matvec_lanes", false, false, false},
		{"decode, subgroups", sg, f16w, decodeH, "matvec_sg", true, false, false},
		{"decode, subgroups and f16", sgh, f16w, decodeH, "matvec_sg_h", true, true, false},
		{"decode, f16, int4 weights", sgh, i4, decodeH, "matvec_sg_h", true, true, false},
		{"decode, f16, f32 weights", sgh, f32w, decodeH, "matvec_sg", true, false, false},
		{"decode, f16, f32 activations", sgh, f16w, decode, "matvec_sg", true, false, false},
		{"decode, f16, partial chunks", sgh, f16w, matShape{rows: 1, xF16: true}, "matvec_sg", true, false, false},
		{"decode, norm prologue, subgroups", sgh, f16w, matShape{rows: 1, chunked: true, prologue: true, xF16: true}, "matvec_sg", true, false, true},
		{"decode, norm prologue", none, f16w, matShape{rows: 1, chunked: true, prologue: true, xF16: true}, "matvec_lanes_norm", false, false, false},
		{"batched step, norm prologue, subgroups", sg, i4, matShape{rows: 8, batch: true, chunked: true, prologue: true}, "matvec_sg", true, false, true},
		{"3 rows", none, i4, matShape{rows: 3, chunked: true}, "matvec_lanes", false, false, false},
	} {
		k, v := chooseMatKernel(tc.c, tc.v, tc.s)
		if k.Name() != tc.want || v.Subgroups != tc.sub || v.F16 != tc.half || v.Norm != tc.norm {
			t.Errorf("%s: %s (subgroups %v, f16 %v, norm %v), want %s (%v, %v, %v)", tc.name, k.Name(), v.Subgroups, v.F16, v.Norm, tc.want, tc.sub, tc.half, tc.norm)
		}
		if v.Weight != tc.v.Weight || v.Quant != tc.v.Quant || v.Scale != tc.v.Scale || v.GLU != tc.v.GLU {
			t.Errorf("%s: the weight module changed: %+v from %+v", tc.name, v, tc.v)
		}
		if _, err := shaders.GetVariant(k.Name(), v.Variant()); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// The fused Q/K/V's kernel: the subgroup form where the device has
// subgroups, for every weight layout, with a module that holds it.
func TestChooseRopeKVKernel(t *testing.T) {
	for _, v := range shaders.MatMulVariants() {
		if v.GLU || v.Subgroups || v.F16 || v.Norm {
			continue
		}
		for _, tc := range []struct {
			c    caps
			want string
		}{
			{caps{}, shaders.RopeKV},
			{caps{f16: true}, shaders.RopeKV},
			{caps{subgroups: true}, shaders.RopeKVSg},
			{caps{subgroups: true, f16: true}, shaders.RopeKVSg},
		} {
			k, kv := chooseRopeKVKernel(tc.c, v)
			if k.Name() != tc.want || kv.Subgroups != tc.c.subgroups || kv.Weight != v.Weight || kv.Quant != v.Quant || kv.Scale != v.Scale {
				t.Errorf("%s, %+v: %s %+v, want %s", v.Variant().Key, tc.c, k.Name(), kv, tc.want)
			}
			if _, err := shaders.GetVariant(k.Name(), kv.RopeKVVariant()); err != nil {
				t.Errorf("%s, %+v: %v", v.Variant().Key, tc.c, err)
			}
		}
	}
}

// The choice of attention kernels is a function of the option and the
// shape alone: no device needed.
func TestChooseAttention(t *testing.T) {
	fits := attnShape{tiles: 1, splitFits: true}
	with := func(s attnShape, tokens int) attnShape { s.tokens = tokens; return s }
	for _, tc := range []struct {
		name string
		opt  AttentionKind
		s    attnShape
		want AttentionKind
	}{
		{"decode", AttentionAuto, with(fits, 1), AttentionSplit},
		{"4 tokens", AttentionAuto, with(fits, attnSplitTokens), AttentionSplit},
		{"prefill", AttentionAuto, with(fits, attnSplitTokens+1), AttentionTiled},
		{"prefill, too many tiles", AttentionAuto, attnShape{tokens: 1 << 20, tiles: maxDispatch + 1, splitFits: true}, AttentionPerHead},
		{"decode, partials too big", AttentionAuto, attnShape{tokens: 1, tiles: 1}, AttentionPerHead},
		{"forced per head", AttentionPerHead, with(fits, 1), AttentionPerHead},
		{"forced split, prefill", AttentionSplit, with(fits, 64), AttentionSplit},
		{"forced tiled, decode", AttentionTiled, with(fits, 1), AttentionTiled},
		{"batched", AttentionAuto, attnShape{tokens: 8, batch: true, splitFits: true}, AttentionSplit},
		{"batched, forced tiled", AttentionTiled, attnShape{tokens: 8, batch: true, splitFits: true}, AttentionSplit},
		{"batched, partials too big", AttentionAuto, attnShape{tokens: 8, batch: true}, AttentionPerHead},
		{"batched, forced per head", AttentionPerHead, attnShape{tokens: 8, batch: true, splitFits: true}, AttentionPerHead},
	} {
		if got := chooseAttention(tc.opt, tc.s); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
