//go:build !cgo && !js

package webgpu

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

// TestNotBuilt: without cgo every entry point says wgpu-native is not in
// this build, as a gpu.ErrNoDevice, and none panics.
func TestNotBuilt(t *testing.T) {
	if _, err := Open(context.Background()); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Open: %v, want gpu.ErrNoDevice", err)
	}
	if _, err := OpenSelected(context.Background(), "0"); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("OpenSelected: %v, want ErrNotBuilt", err)
	}
	if ads, err := Adapters(); len(ads) != 0 || !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Adapters: %v, %v, want none and ErrNotBuilt", ads, err)
	}
}
