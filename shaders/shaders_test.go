package shaders

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders/internal/spirvgen"
)

// The kernels the GPU backend dispatches, with the binding layout it binds.
// The table is written from the kernel contracts, not read back from the
// parser, so a changed declaration fails here.
func TestGetBindings(t *testing.T) {
	R, W, U := gpu.StorageRead, gpu.StorageRW, gpu.Uniform
	tests := []struct {
		name string
		want []gpu.BindingKind
	}{
		{"embed", []gpu.BindingKind{U, R, R, R, W}},
		{"matvec", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"matvec_glu", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"matmul_glu", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"matvec_glu_lanes", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"matvec_lanes", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"matmul", []gpu.BindingKind{U, R, R, R, R, R, W, R, R}},
		{"norm", []gpu.BindingKind{U, R, R, R, R, W}},
		{"rope", []gpu.BindingKind{U, R, R, W}},
		{"store_kv", []gpu.BindingKind{U, R, R, R, W, W}},
		{"store_kv_f16", []gpu.BindingKind{U, R, R, R, W, W}},
		{"attention", []gpu.BindingKind{U, R, R, R, R, W, W}},
		{"attn_split", []gpu.BindingKind{U, R, R, R, R, W, W}},
		{"attn_split_f16", []gpu.BindingKind{U, R, R, R, R, W, W}},
		{"attn_combine", []gpu.BindingKind{U, R, R, R, R, W, W}},
		{"attention_f16", []gpu.BindingKind{U, R, R, R, R, W, W}},
		{"glu", []gpu.BindingKind{U, R, R, R, W}},
		{"act", []gpu.BindingKind{U, R, R, R, W}},
		{"add", []gpu.BindingKind{U, R, R, R, W}},
		{"add_inplace", []gpu.BindingKind{U, R, R, R, W}},
		{"softcap", []gpu.BindingKind{U, R, R, R, W}},
		{"last_row", []gpu.BindingKind{U, R, R, R, W}},
		{"argmax", []gpu.BindingKind{U, R, W}},
		{"qmatvec", []gpu.BindingKind{U, R, R, R, R, W}},
		{"qmatmul", []gpu.BindingKind{U, R, R, R, R, W}},
		{"qembed", []gpu.BindingKind{U, R, R, R, R, W}},
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
	if got, want := len(Names()), len(tests); got != want {
		t.Errorf("%d kernels, the table knows %d: %v", got, want, Names())
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
// committed modules, then validates each with spirv-val. It skips where the
// tools are missing.
func TestSPIRVCurrent(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		t.Skip("naga not installed")
	}
	dir := t.TempDir()
	if err := spirvgen.Generate(naga, "wgsl", dir); err != nil {
		t.Fatal(err)
	}
	fams, err := Families()
	if err != nil {
		t.Fatal(err)
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
