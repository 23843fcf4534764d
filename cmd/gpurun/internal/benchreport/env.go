package benchreport

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Module is gpurun's module path; the git fallback of HostEnvironment only
// trusts a checkout of it.
const Module = "github.com/gpurun/gpurun"

// Where Environment.Revision came from.
const (
	RevisionBuildInfo = "build info"
	RevisionGit       = "git, working directory"
)

// HostEnvironment describes this process's machine and build: OS, CPU
// model and count, Go version and the gpurun revision from the binary's
// build information. Devices and peak memory are the caller's to fill.
//
// Binaries built without version control stamps (go run, -buildvcs=false,
// or a git worktree, which cmd/go does not recognize) have no revision in
// their build information; when the working directory is then inside a
// gpurun checkout, whose sources `go run ./cmd/gpurun` compiles, the
// revision is read from git there and RevisionSource says so.
func HostEnvironment() Environment {
	e := Environment{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Revision: "unknown", Devices: []Device{},
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				e.Revision, e.RevisionSource = s.Value, RevisionBuildInfo
			case "vcs.modified":
				e.Modified = s.Value == "true"
			case "vcs.time":
				e.RevisionTime = s.Value
			}
		}
		if e.Revision == "unknown" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			e.Revision, e.RevisionSource = bi.Main.Version, RevisionBuildInfo
		}
		if e.Revision == "unknown" && bi.Main.Path == Module {
			gitRevision(&e)
		}
	}
	return e
}

// gitRevision fills the revision from git in the working directory when it
// is a checkout of Module.
func gitRevision(e *Environment) {
	if c, ok := GitCheckout(); ok {
		e.Revision, e.Modified, e.RevisionTime, e.RevisionSource = c.Revision, c.Modified, c.Time, RevisionGit
	}
}

// Checkout is the state of a git checkout.
type Checkout struct {
	Revision string // the commit checked out (HEAD)
	Modified bool   // tracked files differ from it
	Time     string // its commit time, RFC 3339
}

// GitCheckout reads the checkout of Module the working directory is in
// with git; ok is false outside one, or without git.
func GitCheckout() (c Checkout, ok bool) {
	git := func(args ...string) (string, bool) {
		out, err := exec.Command("git", args...).Output()
		return string(bytes.TrimSpace(out)), err == nil
	}
	top, ok := git("rev-parse", "--show-toplevel")
	if !ok {
		return c, false
	}
	mod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module "+Module+"\n")) {
		return c, false
	}
	rev, ok := git("rev-parse", "HEAD")
	if !ok || rev == "" {
		return c, false
	}
	status, ok := git("status", "--porcelain", "--untracked-files=no")
	if !ok {
		return c, false
	}
	when, _ := git("log", "-1", "--format=%cI")
	return Checkout{Revision: rev, Modified: status != "", Time: when}, true
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

// LoadAverage is the one-minute load average (Linux /proc/loadavg); ok is
// false where there is none.
func LoadAverage() (load float64, ok bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil && v >= 0
}
