//go:build cgo && !js

package webgpu

import (
	"context"
	"errors"
	"testing"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
)

// TestUsableBackends: gpurun opens Vulkan, Metal and D3D12 adapters, and
// none of the others wgpu-native may offer (GL, D3D11, its null backend).
func TestUsableBackends(t *testing.T) {
	for b, want := range map[wgpu.BackendType]bool{
		wgpu.BackendTypeVulkan: true, wgpu.BackendTypeMetal: true, wgpu.BackendTypeD3D12: true,
		wgpu.BackendTypeOpenGL: false, wgpu.BackendTypeOpenGLES: false, wgpu.BackendTypeD3D11: false,
		wgpu.BackendTypeNull: false, wgpu.BackendTypeUndefined: false,
	} {
		if got := usableBackend(wgpu.AdapterInfo{BackendType: b}); got != want {
			t.Errorf("%s: usable %v, want %v", b, got, want)
		}
	}
}

// TestSelects: --device names an adapter by its backend or part of its
// name, in any case.
func TestSelects(t *testing.T) {
	for _, tc := range []struct {
		sel, name, backend string
		want               bool
	}{
		{"metal", "Apple M2", "metal", true},
		{"Metal", "Apple M2", "metal", true},
		{"D3D12", "NVIDIA GeForce RTX 4090", "d3d12", true},
		{"d3d12", "NVIDIA GeForce RTX 4090", "vulkan", false},
		{"geforce", "NVIDIA GeForce RTX 4090", "d3d12", true},
		{"llvmpipe", "llvmpipe (LLVM 15.0.6, 256 bits)", "vulkan", true},
		{"radeon", "llvmpipe (LLVM 15.0.6, 256 bits)", "vulkan", false},
	} {
		if got := selects(tc.sel, tc.name, tc.backend); got != tc.want {
			t.Errorf("selects(%q, %q, %q) = %v, want %v", tc.sel, tc.name, tc.backend, got, tc.want)
		}
	}
}

// TestSelectByBackend: on this machine's Vulkan drivers, --device vulkan
// opens a Vulkan adapter and --device metal finds none, with an error
// that lists the adapters there are.
func TestSelectByBackend(t *testing.T) {
	d, err := OpenSelected(context.Background(), "vulkan")
	gputest.NoDevice(t, "webgpu", err)
	if b := d.adapter.GetInfo().BackendType; b != wgpu.BackendTypeVulkan {
		t.Errorf("--device vulkan opened a %s adapter", b)
	}
	d.Close()
	ads, err := Adapters()
	if err != nil {
		t.Fatal(err)
	}
	var metal bool
	for _, a := range ads {
		metal = metal || a.Backend == "metal"
	}
	if !metal {
		if _, err := OpenSelected(context.Background(), "metal"); !errors.Is(err, gpu.ErrNoDevice) {
			t.Errorf("--device metal without a Metal adapter: %v, want gpu.ErrNoDevice", err)
		}
	}
}
