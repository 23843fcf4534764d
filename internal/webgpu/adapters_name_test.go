//go:build cgo || js

package webgpu

import (
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
)

func TestAdapterName(t *testing.T) {
	for _, tc := range []struct {
		device, description, name, driver string
	}{
		{"0x0", "llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe (LLVM 15.0.6, 256 bits)", ""},
		{"NVIDIA GeForce RTX 4090", "NVIDIA 550.54", "NVIDIA GeForce RTX 4090", "NVIDIA 550.54"},
		{"0x2684", "", "0x2684", ""},
	} {
		name, driver := adapterName(wgpu.AdapterInfo{Name: tc.device, DriverDescription: tc.description})
		if name != tc.name || driver != tc.driver {
			t.Errorf("device %q description %q: name %q driver %q, want %q %q", tc.device, tc.description, name, driver, tc.name, tc.driver)
		}
	}
}
