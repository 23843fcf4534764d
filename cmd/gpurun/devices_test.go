package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/gpurun/gpurun"
)

// TestDevicesFeaturesAsUsed: the features `gpurun devices` lists for a GPU
// device are those the backend uses when it opens it (gpu.Info: f16,
// subgroups, timestamps), on WebGPU as on Vulkan; an adapter's own
// features (wgpu's shader-f16 among them) are listed apart.
func TestDevicesFeaturesAsUsed(t *testing.T) {
	var rep devicesReport
	if err := json.Unmarshal([]byte(mustRun(t, "", "devices", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			b, err := gpurun.OpenBackend(context.Background(), backend, gpurun.BackendOptions{Device: "0"})
			if err != nil {
				t.Fatal(err)
			}
			want := capsFeatures(b.Caps())
			b.Close()
			i := slices.IndexFunc(rep.Devices, func(d deviceReport) bool {
				return (d.Backend == backend || d.Backend == backend+"/vulkan") && d.Device == "0"
			})
			if i < 0 {
				t.Fatalf("no %s device 0 in %+v", backend, rep.Devices)
			}
			if got := rep.Devices[i].Features; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("devices lists features %v, the opened device uses %v", got, want)
			}
		})
	}
}
