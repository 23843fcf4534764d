//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
)

func TestDevicesReportSaneInfo(t *testing.T) {
	devs, err := Devices()
	gputest.NoDevice(t, "vulkan", err)
	if len(devs) == 0 {
		t.Fatal("Devices returned no devices and no error")
	}
	types := map[gpu.DeviceType]bool{gpu.Discrete: true, gpu.Integrated: true, gpu.Virtual: true, gpu.CPU: true, gpu.Other: true}
	for i, dv := range devs {
		if dv.Index != i || dv.Backend != "vulkan" || dv.Name == "" || !types[dv.Type] || dv.Driver == "" {
			t.Errorf("device %d: incomplete identity %+v", i, dv.Info)
		}
		// Vulkan 1.0 guarantees these minimums (spec, Required Limits).
		if dv.MaxStorageBinding < 1<<27 || dv.MaxWorkgroupStorage < 16384 || dv.MaxWorkgroupInvocs < 128 ||
			dv.StorageOffsetAlign < 1 || dv.StorageOffsetAlign > 256 || dv.MaxBufferSize < 1<<30 {
			t.Errorf("device %d: limits below the Vulkan minimums: %+v", i, dv.Caps)
		}
		if dv.MaxWorkgroupCount[0] < 65535 {
			t.Errorf("device %d: maxComputeWorkGroupCount %v below the minimum", i, dv.MaxWorkgroupCount)
		}
	}
}

// TestLavapipeInfo compares what lavapipe reports with the figures measured
// by vulkaninfo on the build machines (docs/platform-notes.md).
func TestLavapipeInfo(t *testing.T) {
	d := openTest(t, false)
	info := d.DeviceInfo()
	if !strings.Contains(info.Name, "llvmpipe") {
		t.Skipf("device %q is not lavapipe", info.Name)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"type", info.Type, gpu.CPU},
		{"maxStorageBufferRange", info.MaxStorageBinding, int64(128 << 20)},
		{"maxComputeSharedMemorySize", info.MaxWorkgroupStorage, 32 << 10},
		{"maxComputeWorkGroupInvocations", info.MaxWorkgroupInvocs, 1024},
		{"minStorageBufferOffsetAlignment", info.StorageOffsetAlign, 16},
		{"subgroup size", info.SubgroupSize, 8},
		{"subgroups", info.Subgroups, true},
		{"shaderFloat16", info.ShaderFloat16, true},
		{"storageBuffer16BitAccess", info.Storage16Bit, true},
		{"shaderInt8", info.ShaderInt8, true},
		{"f16", info.F16(), true},
		{"timestamps", info.Timestamps, true},
		{"timestamp period", info.TimestampPeriod, 1.0},
		{"driver name", info.DriverName, "llvmpipe"},
		{"unified memory", info.UnifiedMemory, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	want := []string{"f16 arithmetic", "16-bit storage", "int8 arithmetic", "8-bit storage", "subgroups (size 8: basic, vote, arithmetic, ballot, shuffle",
		"timestamps (1 ns/tick"}
	got := strings.Join(info.Features(), "; ")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("Features() = %q, missing %q", got, w)
		}
	}
}

func TestOpenByIndex(t *testing.T) {
	devs, err := Devices()
	gputest.NoDevice(t, "vulkan", err)
	d, err := OpenDevice(context.Background(), len(devs)-1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Info().Name, devs[len(devs)-1].Name; got != want {
		t.Errorf("opened %q, want %q", got, want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := OpenDevice(context.Background(), len(devs)); !errors.Is(err, ErrInvalid) {
		t.Errorf("out-of-range index: got %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

// TestDeviceEnv: GPURUN_DEVICE picks Open's device by a part of its name
// or its index, and a name no device has is an error, not a fallback.
func TestDeviceEnv(t *testing.T) {
	devs, err := Devices()
	gputest.NoDevice(t, "vulkan", err)
	last := devs[len(devs)-1]
	for _, sel := range []string{strings.ToUpper(last.Name), strconv.Itoa(last.Index)} {
		t.Setenv(gpu.DeviceEnv, sel)
		d, err := OpenDevice(context.Background(), -1)
		if err != nil {
			t.Fatalf("%s=%s: %v", gpu.DeviceEnv, sel, err)
		}
		if got := d.Info().Name; got != last.Name {
			t.Errorf("%s=%s opened %q, want %q", gpu.DeviceEnv, sel, got, last.Name)
		}
		d.Close()
	}
	for _, sel := range []string{"no such device anywhere", "99"} {
		t.Setenv(gpu.DeviceEnv, sel)
		if _, err := OpenDevice(context.Background(), -1); !errors.Is(err, gpu.ErrNoDevice) || !strings.Contains(err.Error(), gpu.DeviceEnv) {
			t.Errorf("%s=%q: err = %v, want ErrNoDevice naming the variable", gpu.DeviceEnv, sel, err)
		}
	}
}
