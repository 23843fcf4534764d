package shaders

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/shaders/internal/spirvgen"
)

// The kernels the GPU backend dispatches, with the binding layout it binds.
// The table is written from the kernel contracts, not read back from the
// parser, so a changed declaration fails here.
func TestGetBindings(t *testing.T) {
	R, W, U := StorageRead, StorageRW, Uniform
	tests := []struct {
		name string
		want []BindingKind
	}{
		{"embed", []BindingKind{U, R, R, R, W}},
		{"norm", []BindingKind{U, R, R, R, R, W}},
		{"rope", []BindingKind{U, R, R, W}},
		{"store_kv", []BindingKind{U, R, R, R, W, W}},
		{"store_kv_f16", []BindingKind{U, R, R, R, W, W}},
		{"store_kv_q", []BindingKind{U, R, R, R, W, W}},
		{"store_kv_rope", []BindingKind{U, R, R, W, R, R, W, W}},
		{"store_kv_rope_f16", []BindingKind{U, R, R, W, R, R, W, W}},
		{"store_kv_rope_q", []BindingKind{U, R, R, W, R, R, W, W}},
		{"attention", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attn_split", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attn_split_f16", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attn_tiled", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attn_tiled_f16", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attn_combine", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attention_f16", []BindingKind{U, R, R, R, R, W, W, R}},
		{"attention_q", []BindingKind{U, R, R, R, R, W, W, R}},
		{"glu", []BindingKind{U, R, R, R, W}},
		{"act", []BindingKind{U, R, R, R, W}},
		{"add", []BindingKind{U, R, R, R, W}},
		{"add_inplace", []BindingKind{U, R, R, R, W}},
		{"softcap", []BindingKind{U, R, R, R, W}},
		{"scale", []BindingKind{U, R, R, R, W}},
		{"last_row", []BindingKind{U, R, R, R, W}},
		{"argmax", []BindingKind{U, W, R, W, R}}, // step read_write: it advances a DecodeStep (lib/step_advance.wgsl)
		{"advance", []BindingKind{U, R, W}},
		{"moe_route", []BindingKind{U, R, R, R, R, R, R, W, W}},
		{"moe_glu", []BindingKind{U, R, R, R, R, R, R, W, W}},
		{"moe_down", []BindingKind{U, R, R, R, R, R, R, W, W}},
		{"moe_sum", []BindingKind{U, R, R, R, R, R, R, W, W}},
		{"short_conv", []BindingKind{U, R, R, R, R, W, W}},
		{"delta_conv", []BindingKind{U, R, R, R, W, W}},
		{"delta_rule", []BindingKind{U, R, R, R, R, R, W, W, W}},
		{"delta_chunk", []BindingKind{U, R, R, R, R, R, W, W, W}},
		{"mamba2_conv", []BindingKind{U, R, R, R, R, W, W}},
		{"mamba2_scan", []BindingKind{U, R, R, R, R, R, R, W, W}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Get(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Entry != tc.name || spec.Name != tc.name {
				t.Errorf("entry %q name %q", spec.Entry, spec.Name)
			}
			if len(spec.WGSL) == 0 || len(spec.SPIRV) < 20 {
				t.Errorf("empty sources: wgsl %d spirv %d bytes", len(spec.WGSL), len(spec.SPIRV))
			}
			// SPIR-V magic number, little-endian.
			if !bytes.Equal(spec.SPIRV[:4], []byte{0x03, 0x02, 0x23, 0x07}) {
				t.Errorf("SPIR-V magic %x", spec.SPIRV[:4])
			}
			if len(spec.Bindings) != len(tc.want) {
				t.Fatalf("bindings %v, want %v", spec.Bindings, tc.want)
			}
			for i := range tc.want {
				if spec.Bindings[i] != tc.want[i] {
					t.Errorf("binding %d: %v, want %v", i, spec.Bindings[i], tc.want[i])
				}
			}
		})
	}
	if got, want := len(Names()), len(tests)+len(matmulKernels)+len(qblockKernels)+3; got != want { // + qkv.wgsl's two and sample
		t.Errorf("%d kernels, the table knows %d: %v", got, want, Names())
	}
}

// The kernels of the specialized matmul family: the portable ones in every
// variant without Subgroups, matvec_sg (alone) in every variant with them
// but without F16, matvec_sg_h (alone) in those with F16.
var matmulKernels = []string{"matvec_lanes", "matvec_lanes_norm", "matmul", "matvec_sg", "matvec_sg_h"}

// variantEntry is the one kernel of a Extended matmul variant ("" for
// a portable variant).
func variantEntry(v MatMulVariant) string {
	switch {
	case v.F16:
		return "matvec_sg_h"
	case v.Subgroups:
		return "matvec_sg"
	}
	return ""
}

// The kernels of the specialized qblocks family: the portable ones in
// every layout's module, qmatvec_sg (alone) in the Extended ones.
var qblockKernels = []string{"qmatvec", "qmatmul", "qembed", "qmatvec_sg"}

func TestGetQBlockVariantBindings(t *testing.T) {
	R, W, U := StorageRead, StorageRW, Uniform
	want := []BindingKind{U, R, R, R, R, W, R}
	layouts := map[BlockLayout]bool{}
	for _, v := range QBlockVariants() {
		layouts[v.Layout] = true
		for _, name := range qblockKernels {
			if _, err := Get(name); !errors.Is(err, ErrUnknown) {
				t.Errorf("Get(%s) of a specialized kernel: err = %v, want ErrUnknown", name, err)
			}
			spec, err := GetVariant(name, v.Variant())
			if v.Subgroups != (name == "qmatvec_sg") {
				if !errors.Is(err, ErrUnknown) {
					t.Errorf("%s in variant %s: err = %v, want ErrUnknown", name, v.Variant().Key, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Subgroups != v.Variant().Extended() {
				t.Errorf("%s: Extended %v, want %v", spec.Name, v.Variant().Extended(), v.Subgroups)
			}
			if spec.Entry != name || !bytes.Equal(spec.SPIRV[:4], []byte{0x03, 0x02, 0x23, 0x07}) {
				t.Errorf("%s: entry %q, SPIR-V magic %x", spec.Name, spec.Entry, spec.SPIRV[:4])
			}
			if fmt.Sprint(spec.Bindings) != fmt.Sprint(want) {
				t.Errorf("%s: bindings %v, want %v", spec.Name, spec.Bindings, want)
			}
			for _, c := range v.Variant().Consts {
				if !strings.Contains(spec.WGSL, "const "+c.Name+": "+c.Type+" = "+c.Value+";") {
					t.Errorf("%s: WGSL lacks constant %s = %s", spec.Name, c.Name, c.Value)
				}
			}
		}
	}
	// Every block type's layout has its modules, of sub-blocks that
	// divide the block.
	for _, bt := range []BlockType{BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockMXFP4, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ2K, BlockQ3K, BlockIQ4NL, BlockIQ4XS, BlockNVFP4, BlockTQ1_0, BlockTQ2_0,
		BlockIQ2XXS, BlockIQ2XS, BlockIQ2S, BlockIQ3XXS, BlockIQ3S, BlockIQ1S, BlockIQ1M} {
		elems, _ := bt.BlockLayout()
		if l := bt.Layout(); !layouts[l] || l.SubLen() == 0 || elems%l.SubLen() != 0 {
			t.Errorf("%s: layout %s (sub-blocks of %d) has no module or does not divide blocks of %d", bt, l, l.SubLen(), elems)
		}
	}
}

func TestGetVariantBindings(t *testing.T) {
	R, W, U := StorageRead, StorageRW, Uniform
	want := []BindingKind{U, R, R, R, R, R, W, R, R}
	for _, name := range matmulKernels {
		if _, err := Get(name); !errors.Is(err, ErrUnknown) {
			t.Errorf("Get(%s) of a specialized kernel: err = %v, want ErrUnknown", name, err)
		}
		for _, v := range MatMulVariants() {
			spec, err := GetVariant(name, v.Variant())
			if e := variantEntry(v); e != name && (e != "" || name == "matvec_sg" || name == "matvec_sg_h") {
				if !errors.Is(err, ErrUnknown) {
					t.Errorf("%s in variant %s: err = %v, want ErrUnknown", name, v.Variant().Key, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			// matmul.wgsl's portable kernels, then those of the extensions:
			// subgroups.wgsl's, and f16.wgsl's after its enable line moved
			// to the top.
			ext := map[bool]int{false: 1, true: 2}[v.F16]
			if v.Subgroups && (!v.Variant().Extended() || strings.Count(spec.WGSL, "@compute") != len(matmulKernels)-2+ext) {
				t.Errorf("%s: an Extended module of matmul.wgsl and its extensions expected", spec.Name)
			}
			head := enableLines(spec.WGSL)
			if v.F16 != strings.Contains(head, "enable f16;\n") || v.Subgroups != strings.Contains(head, "enable subgroups;\n") ||
				strings.Contains(spec.WGSL[len(head):], "\nenable ") {
				t.Errorf("%s: F16 %v, subgroups %v, leading enable lines %q", spec.Name, v.F16, v.Subgroups, head)
			}
			if spec.Entry != name || !bytes.Equal(spec.SPIRV[:4], []byte{0x03, 0x02, 0x23, 0x07}) {
				t.Errorf("%s: entry %q, SPIR-V magic %x", spec.Name, spec.Entry, spec.SPIRV[:4])
			}
			if fmt.Sprint(spec.Bindings) != fmt.Sprint(want) {
				t.Errorf("%s: bindings %v, want %v", spec.Name, spec.Bindings, want)
			}
			for _, c := range v.Variant().Consts {
				if !strings.Contains(spec.WGSL, "const "+c.Name+": "+c.Type+" = "+c.Value+";") {
					t.Errorf("%s: WGSL lacks constant %s = %s", spec.Name, c.Name, c.Value)
				}
			}
		}
	}
	if _, err := GetVariant("matvec_lanes", Variant{Key: "nope"}); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown variant: err = %v", err)
	}
}

// Every family's uniform block agrees with its Go struct.
func TestParamsLayout(t *testing.T) {
	fams, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if err := CheckLayout(f); err != nil {
			t.Error(err)
		}
	}
}

// The layout check catches each kind of drift: a renamed, retyped, missing
// or reordered field.
func TestParamsLayoutMismatch(t *testing.T) {
	good := "struct KVParams {\n    kv_cols: u32,\n    head_dim: u32,\n    max_len: u32,\n    pos_at: u32,\n    row0: u32,\n    k_f16: u32,\n    v_f16: u32,\n    ring: u32,\n    kv_quant: u32,\n    pad0: u32,\n    pad1: u32,\n    pad2: u32,\n}\n@group(0) @binding(0) var<uniform> p: KVParams;\n"
	if err := CheckLayout(&Family{Name: "good", WGSL: good}); err != nil {
		t.Fatalf("matching struct: %v", err)
	}
	for name, src := range map[string]string{
		"renamed":   strings.Replace(good, "head_dim", "dim", 1),
		"retyped":   strings.Replace(good, "max_len: u32", "max_len: f32", 1),
		"missing":   strings.Replace(good, "    k_f16: u32,\n", "", 1),
		"reordered": strings.Replace(strings.Replace(good, "kv_cols", "tmp", 1), "head_dim: u32,\n    max_len", "kv_cols: u32,\n    max_len", 1),
		"unknown":   strings.ReplaceAll(good, "KVParams", "OtherParams"),
	} {
		if err := CheckLayout(&Family{Name: name, WGSL: src}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The generated WGSL constants carry the Go codes.
func TestCodesWGSL(t *testing.T) {
	src := codesWGSL()
	for _, tc := range []struct {
		name string
		v    uint32
	}{
		{"WT_F32", uint32(WeightF32)}, {"WT_F16", uint32(WeightF16)}, {"WT_BF16", uint32(WeightBF16)},
		{"WT_I8", uint32(WeightI8)}, {"WT_I4", uint32(WeightI4)}, {"ST_F32", uint32(ScaleF32)}, {"ST_F16", uint32(ScaleF16)},
		{"ACT_SILU", uint32(ActSiLU)}, {"ACT_GELU_TANH", uint32(ActGELUTanh)}, {"ACT_GELU", uint32(ActGELU)}, {"ACT_RELU", uint32(ActReLU)},
		{"ROPE_PAIRS", uint32(RopePairs)}, {"ROPE_HALVES", uint32(RopeHalves)},
		{"MOE_BIAS_GATE", MoEBiasGate}, {"MOE_BIAS_UP", MoEBiasUp}, {"MOE_BIAS_DOWN", MoEBiasDown}, {"MOE_BIAS_S2", MoEBiasS2},
		{"QL_B32", uint32(LayoutB32)}, {"QL_K45", uint32(LayoutK45)}, {"QL_K6", uint32(LayoutK6)}, {"QL_K23", uint32(LayoutK23)},
	} {
		if want := fmt.Sprintf("const %s: u32 = %du;", tc.name, tc.v); !strings.Contains(src, want) {
			t.Errorf("missing %q", want)
		}
	}
	if a, ok := ActivationByName("gelu_tanh"); !ok || a != ActGELUTanh {
		t.Errorf("ActivationByName(gelu_tanh) = %v, %v", a, ok)
	}
	if _, ok := ActivationByName("swish"); ok {
		t.Error("unknown activation accepted")
	}
}

func TestEncode(t *testing.T) {
	b, err := Encode(KVParams{KVCols: 1, HeadDim: 2, MaxLen: 0x01020304, PosAt: 5, Row0: 6})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 0, 0, 0, 2, 0, 0, 0, 4, 3, 2, 1, 5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Errorf("Encode = %v, want %v", b, want)
	}
}

func TestGetUnknown(t *testing.T) {
	if _, err := Get("nope"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("err = %v, want ErrUnknown", err)
	}
}

func TestParseFamilyErrors(t *testing.T) {
	tests := []struct{ name, src string }{
		{"no entry", "@group(0) @binding(0) var<uniform> p: u32;"},
		{"gap", "@group(0) @binding(1) var<uniform> p: u32;\n@compute @workgroup_size(1)\nfn main() {}"},
		{"dup", "@group(0) @binding(0) var<uniform> p: u32;\n@group(0) @binding(0) var<uniform> q: u32;\n@compute @workgroup_size(1)\nfn main() {}"},
	}
	for _, tc := range tests {
		if _, err := parseFamily(tc.name, tc.src); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestSPIRVCurrent regenerates the SPIR-V with naga and compares it with the
// committed modules, then validates each with spirv-val. Where the tools are
// missing it skips, or fails under CI.
func TestSPIRVCurrent(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		ci.Missing(t, "naga v30 (see README: cargo install naga-cli)")
	}
	dir := t.TempDir()
	fams, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	in := make([]spirvgen.Module, len(fams))
	for i, m := range fams {
		in[i] = spirvgen.Module{Name: m.Name, WGSL: m.WGSL, Entry: m.Entry}
	}
	if err := spirvgen.Generate(naga, dir, in); err != nil {
		t.Fatal(err)
	}
	if committed, _ := filepath.Glob("spirv/*.spv"); len(committed) != len(fams) {
		t.Errorf("%d committed modules, %d generated: remove stale ones with go generate ./shaders", len(committed), len(fams))
	}
	val, valErr := exec.LookPath("spirv-val")
	for _, f := range fams {
		fresh, err := os.ReadFile(filepath.Join(dir, f.Name+".spv"))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := SPIRV(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s: committed SPIR-V is stale: run go generate ./shaders", f.Name)
		}
		if valErr == nil {
			out, err := exec.Command(val, "--target-env", "vulkan1.1", filepath.Join(dir, f.Name+".spv")).CombinedOutput()
			if err != nil {
				t.Errorf("%s: spirv-val: %v: %s", f.Name, err, out)
			}
		}
	}
}

// TestNoNearCopies keeps helpers in one place: no function of the WGSL
// sources (families, ext and lib files as written, before expansion) has
// the same body as another, and the generated pieces (activation
// accessors, included snippets) are not written out by hand again.
func TestNoNearCopies(t *testing.T) {
	files, err := fs.Glob(wgslFS, "wgsl/*.wgsl")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"wgsl/ext/*.wgsl", "wgsl/lib/*.wgsl"} {
		more, err := fs.Glob(wgslFS, dir)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	fnRE := regexp.MustCompile(`(?m)^fn ([A-Za-z_][A-Za-z0-9_]*)\(([^)]*)\)[^{]*\{\n((?:.*\n)*?)\}\n`)
	accessorRE := regexp.MustCompile(`act_value\((atomicLoad\(&)?[a-z0-9_]+_w\[select\(i, i >> 1u, h\)\]`)
	seen := map[string]string{}
	for _, f := range files {
		b, err := wgslFS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if !strings.HasPrefix(f, "wgsl/lib/") && strings.Contains(src, "fn sincos(") {
			t.Errorf("%s defines sincos: include wgsl/lib/sincos.wgsl instead", f)
		}
		if f != "wgsl/common.wgsl" && accessorRE.MatchString(src) {
			t.Errorf("%s writes an activation accessor by hand: name the binding in an activations directive", f)
		}
		for _, m := range fnRE.FindAllStringSubmatch(src, -1) {
			body := strings.Join(strings.Fields(m[3]), " ")
			if strings.Count(m[3], "\n") < 3 {
				continue // one- and two-line wrappers may look alike
			}
			where := f + ": " + m[1]
			if other, dup := seen[body]; dup {
				t.Errorf("%s repeats %s", where, other)
				continue
			}
			seen[body] = where
		}
	}
}

// TestExpandActivations checks the accessors a directive writes and its
// errors.
func TestExpandActivations(t *testing.T) {
	const binds = `@group(0) @binding(1) var<storage, read> a_w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out_w: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> v4_w: array<vec4<u32>>;
`
	for _, tc := range []struct {
		directive string
		want, not []string // substrings of the expansion
		err       string
	}{
		{directive: "// activations: a", want: []string{"fn a_at(i: u32) -> f32", "p.a_f16 != 0u", "act_value(a_w[select(i, i >> 1u, h)], i, h)"}, not: []string{"fn a_set"}},
		{directive: "// activations: out", want: []string{"fn out_at(", "atomicLoad(&out_w[", "fn out_set(i: u32, v: f32)", "atomicOr(&out_w[j]", "p.out_f16"}},
		{directive: "// activations: a(x_f16), out", want: []string{"p.x_f16", "fn a_at(", "fn out_set("}, not: []string{"p.a_f16"}},
		{directive: "// activations: b", err: "no binding b_w"},
		{directive: "// activations: v4", err: "no binding v4_w"},
		{directive: "// activations: a(", err: "bad item"},
	} {
		got, err := expandActivations("test", binds+tc.directive+"\n")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.directive, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.directive, err)
			continue
		}
		if strings.Contains(got, "// activations:") {
			t.Errorf("%q: directive left in place", tc.directive)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: expansion lacks %q:\n%s", tc.directive, w, got)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%q: expansion has %q", tc.directive, w)
			}
		}
	}
	if _, err := expandIncludes("test", "// include: nosuch\n"); err == nil {
		t.Error("include of a missing lib file: no error")
	}
}

// TestRopeKVVariants checks qkv.wgsl's modules: 9 storage bindings (a
// browser stage has 10) and two uniform blocks, one kernel per module, for
// every weight layout.
func TestRopeKVVariants(t *testing.T) {
	R, W, U := StorageRead, StorageRW, Uniform
	want := []BindingKind{U, R, R, R, R, W, R, R, W, W, U}
	n := 0
	for _, v := range MatMulVariants() {
		if v.GLU || v.Subgroups {
			continue
		}
		spec, err := GetVariant(RopeKV, v.RopeKVVariant())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(spec.Bindings) != fmt.Sprint(want) || spec.Entry != RopeKV {
			t.Errorf("%s: bindings %v entry %q, want %v", spec.Name, spec.Bindings, spec.Entry, want)
		}
		n++
	}
	if n != 7 {
		t.Errorf("%d qkv modules, want 7", n)
	}
}

// The step tensor's WGSL struct agrees with its Go twin, and the check
// catches drift: a renamed field, a resized array.
func TestStepLayout(t *testing.T) {
	if err := CheckStepLayout(); err != nil {
		t.Fatal(err)
	}
	fams, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	var src string
	for _, f := range fams {
		if f.Name == "step" {
			src = f.WGSL
		}
	}
	for name, bad := range map[string]string{
		"renamed": strings.Replace(src, "valid_len: u32", "valid: u32", 1),
		"resized": strings.Replace(src, "stops: array<u32, 8>", "stops: array<u32, 4>", 1),
		"retyped": strings.Replace(src, "done: u32", "done: f32", 1),
		"dropped": strings.Replace(src, "    count: u32,", "", 1),
	} {
		if bad == src {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if err := checkStepStruct(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if f, _ := reflect.TypeOf(DecodeStep{}).FieldByName("InvTemperature"); f.Offset != 4*DecodeStepRuleAt {
		t.Errorf("DecodeStep.InvTemperature at byte %d, DecodeStepRuleAt says word %d", f.Offset, DecodeStepRuleAt)
	}
	if got := binary.Size(DecodeStep{}); got != DecodeStepHeader+4*MaxSteps {
		t.Errorf("DecodeStep is %d bytes, want the header %d + ids %d", got, DecodeStepHeader, 4*MaxSteps)
	}
}

// qkv.wgsl's second uniform block agrees with its Go twin, and the check
// catches drift: a renamed field, a resized frequency table, a dropped word.
func TestRopeQKVLayout(t *testing.T) {
	if err := CheckRopeQKVLayout(); err != nil {
		t.Fatal(err)
	}
	if got := binary.Size(RopeQKV{}); got != RopeQKVBytes {
		t.Errorf("RopeQKV is %d bytes, RopeQKVBytes says %d", got, RopeQKVBytes)
	}
	src := load().families["qkv"].WGSL
	for name, bad := range map[string]string{
		"renamed": strings.Replace(src, "k_first: u32", "kfirst: u32", 1),
		"resized": strings.Replace(src, "freq: array<vec4<f32>, 64>", "freq: array<vec4<f32>, 32>", 1),
		"retyped": strings.Replace(src, "freq: array<vec4<f32>, 64>", "freq: array<vec4<u32>, 64>", 1),
		"dropped": strings.Replace(src, "    pad4: u32,\n    freq", "    freq", 1),
	} {
		if bad == src {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if err := checkBlock("qkv", bad, "RopeQKV", reflect.TypeOf(RopeQKV{})); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var r RopeQKV
	r.Heads = 7
	r.SetFreq(5, 0.5)
	b, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != RopeQKVBytes || binary.LittleEndian.Uint32(b) != 7 || math.Float32frombits(binary.LittleEndian.Uint32(b[64+4*5:])) != 0.5 {
		t.Errorf("RopeQKV bytes: heads or freq[5] not at words 0 and 16+5")
	}
}

// Kernels index the step buffer only through the generated step-word
// constants (STEP_*, RULE_*), and compare activation and rope style codes
// only with ACT_* and ROPE_*, never a literal: a raw step[N] fails here.
func TestNoRawStepIndex(t *testing.T) {
	// A step index with a literal, or an activation or rope style code
	// compared with a literal.
	raw := regexp.MustCompile(`\bstep\s*\[[^\]]*\b[0-9]|\b(act|style)\s*[!=]=\s*[0-9]`)
	comment := regexp.MustCompile(`//[^\n]*`)
	err := fs.WalkDir(wgslFS, "wgsl", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := wgslFS.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := raw.FindString(comment.ReplaceAllString(line, "")); m != "" {
				t.Errorf("%s:%d: raw index or code %q: use a STEP_*, RULE_*, ACT_* or ROPE_* constant (shaders/step.go, codes.go)", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if raw.FindString("let n = min(step[1], p.nrows);") == "" || raw.FindString("step[a + 2u]") == "" || raw.FindString("if p.style == 1u {") == "" {
		t.Error("the raw-index pattern misses a raw index")
	}
	if m := raw.FindString("step[STEP_TOKEN + t] + step[p.pos_at + t]"); m != "" {
		t.Errorf("the raw-index pattern flags named words: %q", m)
	}
}

// The step words are where DecodeStep (the step tensor's Go and WGSL
// layout) has them, the rule words in SampleParams' and DecodeStep's order,
// and the generated WGSL declares every one.
func TestStepWords(t *testing.T) {
	ds := reflect.TypeOf(DecodeStep{})
	for _, tc := range []struct {
		field string
		word  int
	}{
		{"Pos", StepPos}, {"Tokens", StepRows}, {"Token", StepToken},
		{"InvTemperature", DecodeStepRuleAt + RuleInvTemperature}, {"TopK", DecodeStepRuleAt + RuleTopK},
		{"TopP", DecodeStepRuleAt + RuleTopP}, {"SeedLo", DecodeStepRuleAt + RuleSeedLo}, {"SeedHi", DecodeStepRuleAt + RuleSeedHi},
	} {
		f, ok := ds.FieldByName(tc.field)
		if !ok || f.Offset != uintptr(4*tc.word) {
			t.Errorf("DecodeStep.%s at byte %d, its constant says word %d", tc.field, f.Offset, tc.word)
		}
	}
	sp := reflect.TypeOf(SampleParams{})
	first, _ := sp.FieldByName("InvTemperature")
	for _, tc := range []struct {
		field string
		word  int
	}{{"TopK", RuleTopK}, {"TopP", RuleTopP}, {"SeedLo", RuleSeedLo}, {"SeedHi", RuleSeedHi}} {
		if f, _ := sp.FieldByName(tc.field); f.Offset-first.Offset != uintptr(4*tc.word) {
			t.Errorf("SampleParams.%s at word %d of the rule, its constant says %d", tc.field, (f.Offset-first.Offset)/4, tc.word)
		}
	}
	src := codesWGSL()
	for _, w := range stepWords {
		if decl := fmt.Sprintf("const %s: u32 = %du;", w.name, w.word); !strings.Contains(src, decl) {
			t.Errorf("generated WGSL lacks %q", decl)
		}
	}
}

// TestGetSampleVariants: the sample kernel is specialized by the row's
// length (its workgroup size), each module with the same bindings (step
// read_write: it advances a DecodeStep, lib/step_advance.wgsl), and Get
// refuses it.
func TestGetSampleVariants(t *testing.T) {
	R, W, U := StorageRead, StorageRW, Uniform
	want := []BindingKind{U, W, R, W, R}
	if _, err := Get("sample"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Get(sample) of a specialized kernel: err = %v, want ErrUnknown", err)
	}
	for n, key := range map[int]string{1: "w8", 512: "w8", SampleShortRow: "w8", SampleShortRow + 1: "w64", 32000: "w64"} {
		if v := SampleVariant(n); v.Key != key {
			t.Errorf("SampleVariant(%d) = %s, want %s", n, v.Key, key)
		}
	}
	for _, v := range SampleVariants() {
		spec, err := GetVariant("sample", v)
		if err != nil {
			t.Fatalf("%s: %v", v.Key, err)
		}
		if !strings.Contains(spec.WGSL, "@workgroup_size(WG)") || !bytes.Equal(spec.SPIRV[:4], []byte{0x03, 0x02, 0x23, 0x07}) {
			t.Errorf("%s: no workgroup size from the variant or no SPIR-V", v.Key)
		}
		if !slices.Equal(spec.Bindings, want) {
			t.Errorf("%s: bindings %v, want %v", v.Key, spec.Bindings, want)
		}
	}
}

// TestHotReductionsSkipZeroInit: the families of the decode step's
// reduction kernels carry spirvgen's marker, so their Vulkan modules do
// not zero workgroup memory at every workgroup's start (lanes_rope_kv lost
// it once, when qkv.wgsl stopped taking matmul.wgsl as its base: 10-20%
// of its device time on lavapipe and SwiftShader).
func TestHotReductionsSkipZeroInit(t *testing.T) {
	r := load()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, name := range []string{"attention", "matmul", "qblocks", "qkv", "sample"} {
		f, ok := r.families[name]
		if !ok {
			t.Fatalf("no family %s", name)
		}
		if !strings.Contains(f.WGSL, "\n"+spirvgen.NoZeroInitMarker+"\n") {
			t.Errorf("%s: no %q line", name, spirvgen.NoZeroInitMarker)
		}
	}
}

// enableLines is the run of `enable` directives src starts with.
func enableLines(src string) string {
	n := 0
	for strings.HasPrefix(src[n:], "enable ") {
		i := strings.IndexByte(src[n:], '\n')
		if i < 0 {
			return src
		}
		n += i + 1
	}
	return src[:n]
}
