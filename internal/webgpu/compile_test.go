//go:build cgo || js

package webgpu

import (
	"testing"

	"github.com/gpurun/gpurun/shaders"
)

// TestCompileAllKernels compiles every kernel of the shaders package, in
// every portable variant (the Extended ones, which need subgroups or f16,
// aside), with wgpu-native's own (old) naga: the WGSL must stay inside what
// it accepts.
func TestCompileAllKernels(t *testing.T) {
	d := open(t)
	specs, err := shaders.PortableSpecs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) <= len(shaders.Names()) {
		t.Fatalf("%d specs for %d kernels: variants missing", len(specs), len(shaders.Names()))
	}
	for _, spec := range specs {
		k, err := d.NewKernel(spec)
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		k.Release()
	}
}
