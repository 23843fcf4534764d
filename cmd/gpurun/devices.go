package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/vulkan"
	"github.com/gpurun/gpurun/internal/webgpu"
)

// deviceReport is one entry of `gpurun devices`. Limits use WebGPU's limit
// names for every backend so reports compare across backends.
type deviceReport struct {
	Backend string         `json:"backend"`
	Name    string         `json:"name"`
	Type    gpu.DeviceType `json:"type"`
	Driver  string         `json:"driver"`
	Usable  bool           `json:"usable"`
	Device  string         `json:"device,omitempty"`       // what --device takes to pick it (with --backend)
	Memory  int64          `json:"memory_bytes,omitempty"` // device memory, where known
	// Features are those gpurun uses on the device: f16, subgroups,
	// timestamps (gpu.Info's), or for the CPU what it computes in.
	Features []string `json:"features"`
	// AdapterFeatures are a WebGPU adapter's own features, used or not.
	AdapterFeatures []string          `json:"adapter_features,omitempty"`
	Limits          map[string]uint64 `json:"limits"`
}

type devicesReport struct {
	Devices []deviceReport    `json:"devices"`
	Errors  map[string]string `json:"errors,omitempty"` // backend -> why it lists nothing
}

func newDevices() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the devices each backend (cpu, webgpu, vulkan) can use, with features and key limits",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := listDevices()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.writeText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func listDevices() devicesReport {
	rep := devicesReport{Errors: map[string]string{}}
	rep.Devices = append(rep.Devices, deviceReport{
		Backend: "cpu", Name: fmt.Sprintf("%s/%s, %d threads", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Type: gpu.CPU, Driver: runtime.Version(), Usable: true, Device: "0", Features: []string{"f32", "f16 weights", "int8", "int4"},
	})
	if vds, err := vulkan.Devices(); err != nil {
		rep.Errors["vulkan"] = err.Error()
	} else {
		for i, d := range vds {
			rep.Devices = append(rep.Devices, deviceReport{
				Backend: "vulkan", Name: d.Name, Type: d.Type, Driver: d.Driver, Usable: true, Device: fmt.Sprint(i), Memory: d.MemoryBytes,
				Features: capsFeatures(d.Caps), Limits: capsLimits(d.Caps),
			})
		}
	}
	if ads, err := webgpu.Adapters(); err != nil {
		rep.Errors["webgpu"] = err.Error()
	} else {
		n := 0
		for _, a := range ads {
			r := deviceReport{
				Backend: "webgpu/" + a.Backend, Name: a.Name, Type: a.Type, Driver: a.Driver, Usable: a.Usable,
				Features:        capsFeatures(gpu.Caps{F16Storage: a.F16, F16Math: a.F16, Subgroups: a.Subgroups, Timestamps: a.Timestamps}),
				AdapterFeatures: a.Features, Limits: a.Limits,
			}
			if a.Usable {
				// --device counts the adapters webgpu uses (Vulkan, Metal, D3D12).
				r.Device = fmt.Sprint(n)
				n++
			}
			rep.Devices = append(rep.Devices, r)
		}
	}
	if len(rep.Errors) == 0 {
		rep.Errors = nil
	}
	return rep
}

// capsFeatures names the features of caps gpurun uses: f16 (storage and
// arithmetic), subgroups, timestamps.
func capsFeatures(c gpu.Caps) []string {
	fs := []string{}
	for _, f := range []struct {
		on   bool
		name string
	}{{c.F16(), "f16"}, {c.Subgroups, "subgroups"}, {c.Timestamps, "timestamps"}} {
		if f.on {
			fs = append(fs, f.name)
		}
	}
	return fs
}

func capsLimits(i gpu.Caps) map[string]uint64 {
	return map[string]uint64{
		"maxBufferSize":                     uint64(i.MaxBufferSize),
		"maxStorageBufferBindingSize":       uint64(i.MaxStorageBinding),
		"maxComputeWorkgroupStorageSize":    uint64(i.MaxWorkgroupStorage),
		"maxComputeInvocationsPerWorkgroup": uint64(i.MaxWorkgroupInvocs),
		"minStorageBufferOffsetAlignment":   uint64(i.StorageOffsetAlign),
	}
}

func (r devicesReport) writeText(w io.Writer) error {
	for _, d := range r.Devices {
		usable := ""
		if !d.Usable {
			usable = " (not used by gpurun)"
		}
		dev := ""
		if d.Device != "" {
			dev = "--device " + d.Device + ": "
		}
		fmt.Fprintf(w, "%-14s %s%s [%s]%s\n", d.Backend, dev, d.Name, d.Type, usable)
		if d.Memory > 0 {
			fmt.Fprintf(w, "%14s memory: %s\n", "", humanBytes(d.Memory))
		}
		if d.Driver != "" {
			fmt.Fprintf(w, "%14s driver: %s\n", "", d.Driver)
		}
		if len(d.Features) > 0 {
			fmt.Fprintf(w, "%14s features: %s\n", "", strings.Join(d.Features, ", "))
		} else if d.Backend != "cpu" {
			fmt.Fprintf(w, "%14s features: none of f16, subgroups, timestamps\n", "")
		}
		if len(d.AdapterFeatures) > 0 {
			fmt.Fprintf(w, "%14s adapter features (WebGPU's, used or not): %s\n", "", strings.Join(d.AdapterFeatures, ", "))
		}
		if l := d.Limits; l != nil {
			fmt.Fprintf(w, "%14s max storage binding %s, max buffer %s, workgroup storage %s, invocations %d\n", "",
				humanBytes(int64(l["maxStorageBufferBindingSize"])), humanBytes(int64(l["maxBufferSize"])),
				humanBytes(int64(l["maxComputeWorkgroupStorageSize"])), l["maxComputeInvocationsPerWorkgroup"])
		}
	}
	for b, e := range r.Errors {
		fmt.Fprintf(w, "%-14s unavailable: %s\n", b, e)
	}
	return nil
}
