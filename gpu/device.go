package gpu

import (
	"context"
	"fmt"
	"os"

	"github.com/gpurun/gpurun/shaders"
)

// DeviceEnv names the environment variable that changes the default
// device choice of vulkan.Open and webgpu.Open (and so of every GPU test
// and of gpurun.OpenBackend without a selection): a device index as `gpurun
// devices` lists it, or a case-insensitive part of the device's name
// ("llvmpipe", "nvidia"). A value no device matches is an error wrapping
// ErrNoDevice, not a silent fallback. scripts/gpu-check sets it.
const DeviceEnv = "GPURUN_DEVICE"

// DefaultDevice is the selection DeviceEnv holds, "" when unset.
func DefaultDevice() string { return os.Getenv(DeviceEnv) }

// Device is the small GPU abstraction: storage buffers, compute kernels,
// recorded command lists, submission and readback. internal/webgpu and internal/vulkan
// implement it; the GPU backend (internal/backend/compute, built on it)
// implements Backend.
//
// Kernels take parameters through their bindings only (a small uniform or
// storage buffer), never push constants, so one WGSL source serves both the
// wgpu runtime compiler and the offline naga -> SPIR-V path.
//
// What a device can do beyond what every one does is its Caps, read once;
// a method whose capability is off fails with ErrUnsupported.
type Device interface {
	Info() Info
	Caps() Caps
	// NewBuffer creates a storage buffer of size bytes (usable as a storage or
	// uniform binding and as a copy source and destination), zero-filled.
	NewBuffer(size int64) (Buffer, error)
	// Write copies data into b at off. It is ordered before later submissions.
	Write(b Buffer, off int64, data []byte) error
	// Read waits for submitted work (at least the work that uses b) and
	// copies b[off:off+len(dst)] into dst.
	Read(b Buffer, off int64, dst []byte) error
	// NewKernel builds a compute pipeline.
	NewKernel(spec shaders.KernelSpec) (Kernel, error)
	// NewCommands starts a command list. A finished list may be submitted
	// any number of times.
	NewCommands() (Commands, error)
	// Submit queues finished command lists in order.
	Submit(cmds ...Commands) error
	// Wait blocks until all submitted work has finished.
	Wait() error
	// WaitContext waits as Wait does, or returns an error wrapping ctx's
	// as soon as ctx is done (within milliseconds, however long the
	// submission runs). The work still runs: later Read, Write and Wait
	// calls wait for it.
	WaitContext(ctx context.Context) error
	// NewHostBuffer is NewBuffer in host-visible, coherent memory, which
	// Write and Read then access in place, waiting only for the submitted
	// work that uses the buffer (Vulkan: a small buffer the host writes
	// and reads every step, such as the step tensor, which otherwise goes
	// through a staging copy on a discrete GPU). It fails with
	// ErrUnsupported where !Caps().HostBuffers.
	NewHostBuffer(size int64) (Buffer, error)
	// ReadTimestamps waits for submitted work and returns timestamp slots
	// [0, n) (Commands.Timestamp) in nanoseconds of device time, where
	// Caps().Timestamps (else ErrUnsupported).
	ReadTimestamps(n int) ([]uint64, error)
	// SubmitRead submits cmds as Submit does and then, in queue order
	// after them, copies src[off:off+n] into a read-back buffer of the
	// device's own (WebGPU: and starts mapping it; Vulkan: host-visible,
	// in the same vkQueueSubmit), without waiting: the returned
	// PendingRead's Wait gives those bytes once the work submitted up to
	// the copy finished, whatever was submitted after SubmitRead returned
	// (the host queues submission k+1 before it reads submission k's
	// result). It fails with ErrUnsupported where !Caps().ReadAhead.
	SubmitRead(src Buffer, off int64, n int, cmds ...Commands) (PendingRead, error)
	// MemoryUse is what the device allocated through its API.
	MemoryUse() MemoryUse
	// ResetPeakMemory makes the peak the current allocation, so the next
	// MemoryUse covers what follows.
	ResetPeakMemory()
	Close() error
}

// PendingRead is a read back SubmitRead started.
type PendingRead interface {
	// Wait waits for the read and copies its n bytes into dst (len(dst)
	// is n). Call it exactly once, also for a result no longer wanted: it
	// gives the device's read-back buffer back. A wait cancelled by ctx
	// returns an error wrapping ctx's; the read-back buffer is then
	// dropped.
	Wait(ctx context.Context, dst []byte) error
}

// Kernel is a compiled compute pipeline.
type Kernel interface{ Release() }

// Buffer is device memory.
type Buffer interface {
	Size() int64
	Release()
}

// Binding binds [Offset, Offset+Size) of Buf; Size 0 means to the end.
type Binding struct {
	Buf    Buffer
	Offset int64
	Size   int64
}

// Commands records dispatches and copies.
type Commands interface {
	Dispatch(k Kernel, bindings []Binding, x, y, z int) error
	Copy(dst Buffer, dstOff int64, src Buffer, srcOff int64, size int64) error
	// Timestamp records the device time into slot i when Caps().Timestamps.
	Timestamp(i int) error
	Finish() error
	Release()
}

// MemoryUse is the device memory a device (or a backend running on one)
// allocated through its API, in bytes: buffers and their staging copies.
// It is what gpurun holds, not the whole device's use, which neither
// binding reports.
type MemoryUse struct {
	Current int64 // allocated now
	Peak    int64 // most allocated at once since the device opened or the last ResetPeakMemory
}

// CheckBindingLimits reports, wrapping ErrUnsupported, a kernel that has
// more storage or uniform buffer bindings than caps allow (limits of 0:
// unknown, not checked).
func CheckBindingLimits(caps Caps, spec shaders.KernelSpec) error {
	var storage, uniform int
	for _, k := range spec.Bindings {
		if k == shaders.Uniform {
			uniform++
		} else {
			storage++
		}
	}
	if caps.MaxStorageBuffers > 0 && storage > caps.MaxStorageBuffers {
		return fmt.Errorf("kernel %q has %d storage buffer bindings, the device allows %d per stage: %w", spec.Name, storage, caps.MaxStorageBuffers, ErrUnsupported)
	}
	if caps.MaxUniformBuffers > 0 && uniform > caps.MaxUniformBuffers {
		return fmt.Errorf("kernel %q has %d uniform buffer bindings, the device allows %d per stage: %w", spec.Name, uniform, caps.MaxUniformBuffers, ErrUnsupported)
	}
	return nil
}
