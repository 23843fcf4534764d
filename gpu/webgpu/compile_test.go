package webgpu

import (
	"testing"

	"github.com/gpurun/gpurun/shaders"
)

// TestCompileAllKernels compiles every kernel of the shaders package with
// wgpu-native's own (old) naga: the WGSL must stay inside what it accepts.
func TestCompileAllKernels(t *testing.T) {
	d := open(t)
	for _, name := range shaders.Names() {
		spec, err := shaders.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		k, err := d.NewKernel(spec)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		k.Release()
	}
}
