package shaders

import (
	"testing"
)

// FuzzParseFamily: any source either parses into dense bindings of known
// kinds and at least one kernel, or fails with an error; never a panic.
func FuzzParseFamily(f *testing.F) {
	f.Add("@group(0) @binding(0) var<uniform> p: P;\n@compute @workgroup_size(1)\nfn main() {}")
	f.Add("@group(0) @binding(1) var<storage, read> a: array<u32>;\n@compute @workgroup_size(64)\nfn k() {}")
	f.Add("@group(0)@binding(0)var<storage,read_write>o:array<f32>;@compute\nfn x(){}")
	f.Add("")
	f.Fuzz(func(t *testing.T, src string) {
		fam, err := parseFamily("fuzz", src)
		if err != nil {
			return
		}
		if len(fam.Kernels) == 0 {
			t.Fatal("family without kernels accepted")
		}
		for i, k := range fam.Bindings {
			if k != StorageRead && k != StorageRW && k != Uniform {
				t.Fatalf("binding %d: kind %d", i, k)
			}
		}
	})
}
