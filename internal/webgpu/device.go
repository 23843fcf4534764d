//go:build cgo || js

package webgpu

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/memcount"
)

// ErrClosed reports use of a closed device.
var ErrClosed = errors.New("webgpu: device closed")

// timestampSlots is the size of the timestamp query set.
const timestampSlots = 1024

// Device is a gpu.Device on a wgpu-native Vulkan, Metal or D3D12 adapter. Its methods are
// safe for concurrent use; they serialize on one mutex because the queue and
// the staging buffer are shared.
type Device struct {
	mu      sync.Mutex
	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue
	info    gpu.Info
	caps    gpu.Caps
	limits  wgpu.Limits
	closed  bool

	staging     *wgpu.Buffer // map-readable, grown on demand
	stagingSize int64
	readBufs    []readBuf // free map-readable buffers of reads ahead (readahead.go)

	queries  *querySet    // timestamps, when supported
	resolved *wgpu.Buffer // resolve target of the query set
	stamps   pageStamps   // the page's timestamps read with the last read (replay_js.go)
	ahead    replayAhead  // the page's next submission, encoded while the device runs (replay_js.go)

	mem memcount.Counter // bytes of buffers allocated

	pipelines atomic.Int64 // compute pipelines created (PipelinesCreated)
}

var _ gpu.Device = (*Device)(nil)

// MemoryUse is the size of the buffers (the read-back staging buffer
// included) this device created; WebGPU reports no more than that.
func (d *Device) MemoryUse() gpu.MemoryUse { return d.mem.Use() }

// ResetPeakMemory makes the peak the current allocation.
func (d *Device) ResetPeakMemory() { d.mem.ResetPeak() }

// Open opens the best Vulkan, Metal or D3D12 adapter (discrete, then
// integrated, then CPU such as lavapipe). The OpenGL fallback adapter wgpu offers without a
// Vulkan driver has no compute features worth using and is refused with
// gpu.ErrNoDevice.
func Open(ctx context.Context) (gpu.Device, error) {
	return OpenDevice(ctx)
}

// OpenDevice is Open returning the concrete type.
func OpenDevice(ctx context.Context) (*Device, error) { return OpenSelected(ctx, "") }

// OpenSelected opens the adapter sel names: its position among the
// adapters gpurun uses ("0", "1", ...: Vulkan, Metal and D3D12 ones, as
// `gpurun devices` numbers them), a case-insensitive part of its name, or
// its backend ("vulkan", "metal", "d3d12": the first adapter of it);
// "" picks the device gpu.DeviceEnv names where it is set, else the best
// (discrete, then integrated, then CPU).
func OpenSelected(ctx context.Context, sel string) (*Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sel == "" {
		sel = gpu.DefaultDevice()
	}
	quiet()
	// CreateInstance with a descriptor mallocs an unzeroed extras struct
	// (platform-notes.md); nil is safe.
	inst := wgpu.CreateInstance(nil)
	if inst == nil {
		return nil, fmt.Errorf("webgpu: create instance: %w", gpu.ErrNoDevice)
	}
	var adapter *wgpu.Adapter
	var err error
	if sel == "" {
		adapter, err = pickAdapter(inst)
	} else {
		adapter, err = selectAdapter(inst, sel)
	}
	if err != nil {
		inst.Release()
		return nil, err
	}
	d := &Device{inst: inst, adapter: adapter}
	if err := d.init(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func rank(t wgpu.AdapterType) int {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return 0
	case wgpu.AdapterTypeIntegratedGPU:
		return 1
	case wgpu.AdapterTypeCPU:
		return 2
	}
	return 3
}

func pickAdapter(inst *wgpu.Instance) (*wgpu.Adapter, error) {
	var best *wgpu.Adapter
	var seen []string
	bestRank := 99
	for _, a := range enumerateUsable(inst) {
		info := a.GetInfo()
		seen = append(seen, fmt.Sprintf("%s (%s)", info.Name, info.BackendType))
		if !usableBackend(info) || rank(info.AdapterType) >= bestRank {
			a.Release()
			continue
		}
		if best != nil {
			best.Release()
		}
		best, bestRank = a, rank(info.AdapterType)
	}
	if best == nil {
		return nil, fmt.Errorf("webgpu: %s (saw %s): %w", noAdapter, strings.Join(seen, ", "), gpu.ErrNoDevice)
	}
	return best, nil
}

// selectAdapter returns the adapter sel names (see OpenSelected).
func selectAdapter(inst *wgpu.Instance, sel string) (*wgpu.Adapter, error) {
	index, err := strconv.Atoi(sel)
	if err != nil {
		index = -1
	}
	var found *wgpu.Adapter
	var names []string
	n := 0
	for _, a := range enumerateUsable(inst) {
		info := a.GetInfo()
		if !usableBackend(info) {
			a.Release()
			continue
		}
		name, _ := adapterName(info)
		backend := info.BackendType.String()
		names = append(names, fmt.Sprintf("%d: %s (%s)", n, name, backend))
		if found == nil && (n == index || (index < 0 && selects(sel, name, backend))) {
			found = a
		} else {
			a.Release()
		}
		n++
	}
	if found == nil {
		return nil, fmt.Errorf("webgpu: no adapter %q among %d (%s): %w", sel, n, strings.Join(names, ", "), gpu.ErrNoDevice)
	}
	return found, nil
}

// selects reports whether a --device selection that is not an index names
// an adapter: its backend ("metal"), or part of its name, case-insensitive.
func selects(sel, name, backend string) bool {
	sel = strings.ToLower(sel)
	return sel == backend || strings.Contains(strings.ToLower(name), sel)
}

func (d *Device) init() error {
	limits := d.adapter.GetLimits().Limits
	// The binding reads MaxPushConstantSize from an uninitialized extras
	// struct; we use no push constants.
	limits.MaxPushConstantSize = 0
	desc := &wgpu.DeviceDescriptor{Label: "gpurun", RequiredLimits: &wgpu.RequiredLimits{Limits: limits}}
	f16, sg, timestamps := usedFeatures(d.adapter)
	if timestamps {
		desc.RequiredFeatures = []wgpu.FeatureName{wgpu.FeatureNameTimestampQuery}
	}
	dev, err := requestDevice(d.adapter, desc, sg.min > 0)
	if err != nil {
		return fmt.Errorf("webgpu: request device: %w (%w)", err, gpu.ErrNoDevice)
	}
	d.dev = dev
	d.queue = dev.GetQueue()
	d.limits = dev.GetLimits().Limits
	ai := adapterInfo(d.adapter)
	name, driver := adapterName(ai)
	d.info = gpu.Info{
		Backend: "webgpu",
		Name:    name,
		Type:    deviceType(ai.AdapterType),
		Driver:  driver,
	}
	d.caps = gpu.Caps{
		F16Storage:          f16, // WebGPU's shader-f16 gives both
		F16Math:             f16,
		Subgroups:           sg.min > 0,
		SubgroupSize:        sg.min,
		SubgroupMaxSize:     sg.max,
		Timestamps:          timestamps,
		MaxBufferSize:       int64(d.limits.MaxBufferSize),
		MaxStorageBinding:   int64(d.limits.MaxStorageBufferBindingSize),
		MaxWorkgroupStorage: int(d.limits.MaxComputeWorkgroupStorageSize),
		MaxWorkgroupInvocs:  int(d.limits.MaxComputeInvocationsPerWorkgroup),
		StorageOffsetAlign:  int(d.limits.MinStorageBufferOffsetAlignment),
		MaxStorageBuffers:   int(d.limits.MaxStorageBuffersPerShaderStage),
		MaxUniformBuffers:   int(d.limits.MaxUniformBuffersPerShaderStage),
		ReadAhead:           true, // SubmitRead (readahead.go)
	}
	if timestamps {
		qs, err := createTimestamps(dev, timestampSlots)
		if err != nil {
			return fmt.Errorf("webgpu: timestamp query set: %w", err)
		}
		d.queries = qs
		d.resolved, err = dev.CreateBuffer(&wgpu.BufferDescriptor{
			Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc,
			Size:  timestampSlots * 8,
		})
		if err != nil {
			return fmt.Errorf("webgpu: timestamp buffer: %w", err)
		}
	}
	return nil
}

// Info describes the device.
func (d *Device) Info() gpu.Info { return d.info }

// Caps is what the device can do (its features and limits). WebGPU places
// no buffer in host memory for compute: HostBuffers is false.
func (d *Device) Caps() gpu.Caps { return d.caps }

// NewHostBuffer fails with gpu.ErrUnsupported: WebGPU has no host-visible
// storage buffers (Caps().HostBuffers is false).
func (d *Device) NewHostBuffer(int64) (gpu.Buffer, error) {
	return nil, fmt.Errorf("webgpu: host-visible storage buffers: %w", gpu.ErrUnsupported)
}

// Close releases the device. Buffers, kernels and commands must be released
// first. It first waits, polling, for work still on the device: a wait
// cancelled by its context leaves its submission running, and dropping
// the device under it would let wgpu-core's blocking wait on the device
// (at most five seconds: see pollUntil) free what the driver still
// executes (a prefill of over five seconds cancelled on lavapipe, then
// closed, crashed in the driver: TestCancelDuringDeviceWait).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.dev != nil {
		_ = pollUntil(context.Background(), 0, func() bool { return queueIdle(d.dev) })
	}
	if d.staging != nil {
		d.staging.Release()
		d.mem.Sub(d.stagingSize)
	}
	d.releaseReadBufs()
	if d.resolved != nil {
		d.resolved.Release()
	}
	if d.queries != nil {
		d.queries.Release()
	}
	if d.queue != nil {
		d.queue.Release()
	}
	if d.dev != nil {
		d.dev.Release()
	}
	if d.adapter != nil {
		d.adapter.Release()
	}
	if d.inst != nil {
		d.inst.Release()
	}
	return nil
}

// maxPollDelay bounds the sleep between WaitContext's polls: the kernel
// backend waits this way after every decode step's submission, so a step
// that finishes just after a poll costs at most this much (a desktop GPU's
// decode step takes milliseconds), and a cancel is seen as soon.
const maxPollDelay = 100 * time.Microsecond

// WaitContext is Wait, returning as soon as
// ctx is done. wgpu-native's blocking poll cannot be interrupted, so it
// polls without blocking, checking ctx between polls, on the caller's
// goroutine and under the device's lock (a blocking poll on a goroutine of
// its own raced the device's other calls: lavapipe crashed executing a
// submission whose buffers wgpu was freeing). After a cancelled wait the
// work still runs on the device; later calls wait for it.
func (d *Device) WaitContext(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := pollUntil(ctx, 0, func() bool { return queueIdle(d.dev) }); err != nil {
		return fmt.Errorf("webgpu: waiting for submitted work: %w", err)
	}
	return nil
}

// pollUntil calls done, sleeping between calls (from 5µs, doubling up to
// maxPollDelay), until it reports true, ctx is done or, when limit is not
// zero, limit has passed (context.DeadlineExceeded).
//
// The device is only ever polled without blocking: the bundled wgpu-core's
// blocking poll waits at most five seconds for its fence and then treats
// the submission as finished whether or not it is, freeing command buffers
// and buffers the driver is still executing (SwiftShader crashed in its
// queue thread that way, on a prefill submission of over five seconds;
// a slow GPU's long prefill would too).
func pollUntil(ctx context.Context, limit time.Duration, done func() bool) error {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	for delay := 5 * time.Microsecond; ; delay = min(2*delay, maxPollDelay) {
		if done() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(delay)
	}
}

// Wait blocks until all submitted work has finished (WaitContext without
// a cancel).
func (d *Device) Wait() error { return d.WaitContext(context.Background()) }
