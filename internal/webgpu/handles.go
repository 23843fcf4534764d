//go:build cgo && !js

package webgpu

import (
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// The binding keeps its wgpu-native handles in unexported fields. These
// mirrors of wgpu.Buffer and wgpu.Device (v0.23.0) let mapRead reach them;
// TestBindingLayout checks the layout still matches, so a binding upgrade
// that changes it fails the tests instead of corrupting memory.
type bufferLayout struct {
	deviceRef unsafe.Pointer
	ref       unsafe.Pointer
}

type deviceLayout struct {
	ref unsafe.Pointer
}

func bufferRef(b *wgpu.Buffer) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return (*bufferLayout)(unsafe.Pointer(b)).ref
}

func deviceRef(d *wgpu.Device) unsafe.Pointer {
	if d == nil {
		return nil
	}
	return (*deviceLayout)(unsafe.Pointer(d)).ref
}
