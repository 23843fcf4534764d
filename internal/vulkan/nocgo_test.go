//go:build !cgo

package vulkan

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

// TestNotBuilt: without cgo every entry point says the backend is not in
// this build, as a gpu.ErrNoDevice, and none panics.
func TestNotBuilt(t *testing.T) {
	if _, err := Open(context.Background()); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Open: %v, want gpu.ErrNoDevice", err)
	}
	if _, err := OpenDevice(context.Background(), 0); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("OpenDevice: %v, want ErrNotBuilt", err)
	}
	if devs, err := Devices(); len(devs) != 0 || !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Devices: %v, %v, want none and ErrNotBuilt", devs, err)
	}
}
