package benchreport

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// HostEnvironment describes this process's machine and build: OS, CPU
// model and count, Go version and the gpurun revision from the binary's
// build information. Devices and peak memory are the caller's to fill.
func HostEnvironment() Environment {
	e := Environment{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Revision: "unknown", Devices: []Device{},
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				e.Revision = s.Value
			case "vcs.modified":
				e.Modified = s.Value == "true"
			case "vcs.time":
				e.RevisionTime = s.Value
			}
		}
		if e.Revision == "unknown" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			e.Revision = bi.Main.Version
		}
	}
	return e
}

// cpuModel is the first "model name" of /proc/cpuinfo, or GOARCH where
// there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
