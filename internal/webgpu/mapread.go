//go:build cgo && !js

package webgpu

// The binding's Buffer.MapAsync hands C the address of a Go-local cgo.Handle
// that the callback later dereferences, which crashes once the local is gone
// (platform-notes.md). mapRead does the whole map-copy-unmap cycle in C with a
// C callback writing its status into C memory, polling the device (without
// blocking) until it ran. The declarations below mirror the few wgpu-native entry points it
// needs (webgpu.h / wgpu.h of the bundled wgpu-native); the binding's cgo
// flags link the library.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct WGPUBufferImpl* WGPUBuffer;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef uint32_t WGPUBool;
typedef uint32_t WGPUMapModeFlags;
typedef int WGPUBufferMapAsyncStatus;
typedef void (*WGPUBufferMapAsyncCallback)(WGPUBufferMapAsyncStatus status, void* userdata);

void wgpuBufferMapAsync(WGPUBuffer buffer, WGPUMapModeFlags mode, size_t offset, size_t size, WGPUBufferMapAsyncCallback callback, void* userdata);
void const* wgpuBufferGetConstMappedRange(WGPUBuffer buffer, size_t offset, size_t size);
void wgpuBufferUnmap(WGPUBuffer buffer);
WGPUBool wgpuDevicePoll(WGPUDevice device, WGPUBool wait, void const* wrappedSubmissionIndex);

// gpurun_pending marks a status slot whose callback has not run yet.
#define GPURUN_PENDING (-1)

static void gpurun_map_done(WGPUBufferMapAsyncStatus status, void* userdata) {
	*(volatile int*)userdata = (int)status;
}

// gpurun_map_start asks for [0,size) of buf to be mapped for reading and
// returns the status slot its callback writes (GPURUN_PENDING until then),
// or NULL when out of memory. A slot whose callback never ran is leaked on
// purpose, because the callback may still write it.
static volatile int* gpurun_map_start(WGPUBuffer buf, size_t size) {
	volatile int* status = (volatile int*)malloc(sizeof(int));
	if (status == NULL) {
		return NULL;
	}
	*status = GPURUN_PENDING;
	wgpuBufferMapAsync(buf, 1, 0, size, gpurun_map_done, (void*)status);
	return status;
}

// gpurun_map_poll polls the device without blocking (callbacks run inside
// it) and returns the status slot's value.
static int gpurun_map_poll(WGPUDevice dev, volatile int* status) {
	wgpuDevicePoll(dev, 0, NULL);
	return *status;
}

// gpurun_map_finish frees the slot of a map whose callback ran with status
// st and, when the map succeeded, copies the range to dst and unmaps. It
// returns st, or -3 when the mapped range is missing.
static int gpurun_map_finish(WGPUBuffer buf, size_t size, void* dst, volatile int* status) {
	int st = *status;
	free((void*)status);
	if (st != 0) {
		return st;
	}
	void const* src = wgpuBufferGetConstMappedRange(buf, 0, size);
	if (src == NULL) {
		wgpuBufferUnmap(buf);
		return -3;
	}
	memcpy(dst, src, size);
	wgpuBufferUnmap(buf);
	return 0;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// errMapTimeout reports a map callback that never ran.
var errMapTimeout = errors.New("webgpu: buffer map did not complete")

// maxMapWait bounds the wait for one map's callback, so a device that
// never finishes fails instead of hanging.
const maxMapWait = 10 * time.Minute

// mapRead copies the first len(dst) bytes of the map-readable buffer b into
// dst. b must not be mapped and all work writing it must be submitted.
//
// It polls without blocking (pollUntil), never with wgpuDevicePoll's wait:
// the bundled wgpu-core's blocking poll gives up on its fence after five
// seconds and then treats the submission as finished, freeing command
// buffers and buffers the driver is still executing (SwiftShader crashed
// that way on a submission of over five seconds).
func mapRead(dev *wgpu.Device, b *wgpu.Buffer, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	d := deviceRef(dev)
	r := bufferRef(b)
	if d == nil || r == nil {
		return fmt.Errorf("webgpu: map read: nil handle")
	}
	status := C.gpurun_map_start(C.WGPUBuffer(r), C.size_t(len(dst)))
	if status == nil {
		return fmt.Errorf("webgpu: map read: out of memory")
	}
	done := pollUntil(context.Background(), maxMapWait, func() bool {
		return C.gpurun_map_poll(C.WGPUDevice(d), status) != C.GPURUN_PENDING
	})
	if done != nil {
		return errMapTimeout // the status slot stays allocated: see gpurun_map_start
	}
	switch st := C.gpurun_map_finish(C.WGPUBuffer(r), C.size_t(len(dst)), unsafe.Pointer(&dst[0]), status); st {
	case 0:
		return nil
	default:
		return fmt.Errorf("webgpu: buffer map failed with status %d", int(st))
	}
}

// mapping is a read ahead's map in flight natively: the status slot its
// callback writes (gpurun_map_start).
type mapping struct{ status *C.int }

// startRead submits cs, then a copy of src[off:off+n] into rb, and asks
// for rb's map (SubmitRead). d.mu is held.
func startRead(d *Device, cs []*commands, src *buffer, off int64, rb *wgpu.Buffer, n int64) (mapping, error) {
	if err := d.submitLocked(cs); err != nil {
		return mapping{}, err
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return mapping{}, fmt.Errorf("webgpu: read ahead: %w", err)
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(src.b, uint64(off), rb, 0, uint64(n)); err != nil {
		return mapping{}, fmt.Errorf("webgpu: read ahead copy: %w", err)
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return mapping{}, fmt.Errorf("webgpu: read ahead: %w", err)
	}
	d.queue.Submit(cb)
	cb.Release()
	r := bufferRef(rb)
	if r == nil {
		return mapping{}, fmt.Errorf("webgpu: read ahead: nil handle")
	}
	status := C.gpurun_map_start(C.WGPUBuffer(r), C.size_t(n))
	if status == nil {
		return mapping{}, fmt.Errorf("webgpu: read ahead: out of memory")
	}
	return mapping{status: (*C.int)(unsafe.Pointer(status))}, nil
}

// waitRead polls the device, under its lock as WaitContext does, until
// m's map ran, then copies the mapped bytes into dst and unmaps. A map
// that did not finish leaves its status slot allocated (see
// gpurun_map_start).
func waitRead(ctx context.Context, d *Device, m mapping, rb *wgpu.Buffer, dst []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	dev, r := deviceRef(d.dev), bufferRef(rb)
	status := (*C.int)(m.status)
	err := pollUntil(ctx, maxMapWait, func() bool {
		return C.gpurun_map_poll(C.WGPUDevice(dev), status) != C.GPURUN_PENDING
	})
	if err != nil {
		return fmt.Errorf("waiting for the map: %w", err)
	}
	if st := C.gpurun_map_finish(C.WGPUBuffer(r), C.size_t(len(dst)), unsafe.Pointer(&dst[0]), status); st != 0 {
		return fmt.Errorf("buffer map failed with status %d", int(st))
	}
	return nil
}
