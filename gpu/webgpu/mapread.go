//go:build !js

package webgpu

// The binding's Buffer.MapAsync hands C the address of a Go-local cgo.Handle
// that the callback later dereferences, which crashes once the local is gone
// (platform-notes.md). mapRead does the whole map-copy-unmap cycle in C with a
// C callback writing its status into C memory, polling the device until it
// ran. The declarations below mirror the few wgpu-native entry points it
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

// gpurun_map_read maps [0,size) of buf for reading, copies it to dst and
// unmaps. It returns the map status (0 is success), or GPURUN_PENDING when
// the callback did not run within max_polls polls; the status slot is then
// leaked on purpose, because the callback may still write it.
static int gpurun_map_read(WGPUDevice dev, WGPUBuffer buf, size_t size, void* dst, int max_polls) {
	volatile int* status = (volatile int*)malloc(sizeof(int));
	if (status == NULL) {
		return -2;
	}
	*status = GPURUN_PENDING;
	wgpuBufferMapAsync(buf, 1, 0, size, gpurun_map_done, (void*)status);
	for (int i = 0; i < max_polls && *status == GPURUN_PENDING; i++) {
		wgpuDevicePoll(dev, 1, NULL);
	}
	int st = *status;
	if (st == GPURUN_PENDING) {
		return st;
	}
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
	"errors"
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// errMapTimeout reports a map callback that never ran.
var errMapTimeout = errors.New("webgpu: buffer map did not complete")

// maxMapPolls bounds the blocking polls of one map (each waits for the
// queue), so a lost device fails instead of hanging.
const maxMapPolls = 10000

// mapRead copies the first len(dst) bytes of the map-readable buffer b into
// dst. b must not be mapped and all work writing it must be submitted.
func mapRead(dev *wgpu.Device, b *wgpu.Buffer, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	d := deviceRef(dev)
	r := bufferRef(b)
	if d == nil || r == nil {
		return fmt.Errorf("webgpu: map read: nil handle")
	}
	st := C.gpurun_map_read(C.WGPUDevice(d), C.WGPUBuffer(r), C.size_t(len(dst)), unsafe.Pointer(&dst[0]), C.int(maxMapPolls))
	switch st {
	case 0:
		return nil
	case -1:
		return errMapTimeout
	default:
		return fmt.Errorf("webgpu: buffer map failed with status %d", int(st))
	}
}
