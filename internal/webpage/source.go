package webpage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
)

// Module is the module whose cmd/gpurun-web the page runs.
const Module = "github.com/gpurun/gpurun"

// BinaryVersion is the version of Module this program was built from, as
// its build information records it: the main module's version for gpurun
// itself (a `go install ...@REV` gives the module version, a build in a
// checkout "(devel)" or a "+dirty" pseudo-version), or the required
// version when another program imports gpurun; "" when unknown.
func BinaryVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == Module {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// Source finds the gpurun module source Build compiles the page from: the
// current directory's module when it is gpurun (a checkout: the page then
// runs the working tree's code), otherwise Module at version (normally
// BinaryVersion) in the Go module cache, which `go install
// github.com/gpurun/gpurun/cmd/gpurun@REV` filled (`go mod download`
// fetches it through GOPROXY if it is not there). No built wasm is
// committed or embedded: the page is compiled from the same source as the
// binary that serves it, by the go command that installed it.
func Source(ctx context.Context, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.Output(); err == nil {
		if path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), "\t"); ok && path == Module && dir != "" {
			return dir, nil
		}
	}
	if version == "" || version == "(devel)" || strings.HasSuffix(version, "+dirty") {
		return "", fmt.Errorf("page: this gpurun was built from a checkout (version %q) and the current directory is not in one: run it inside the gpurun repository, or install a released revision (go install %s/cmd/gpurun@REV)", version, Module)
	}
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+version)
	dl.Dir = os.TempDir() // outside any module, so no go.mod or vendor setting applies
	dl.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	dl.Stderr = &stderr
	out, runErr := dl.Output()
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" || info.Dir == "" || runErr != nil {
		msg := strings.TrimSpace(info.Error + " " + stderr.String())
		if runErr == nil && err != nil {
			runErr = err
		}
		return "", fmt.Errorf("page: finding the source of %s@%s in the module cache (go mod download): %v %s", Module, version, runErr, msg)
	}
	return info.Dir, nil
}

// BuildPage compiles the page's wasm into out from Source(ctx, version)
// and returns that source directory.
func BuildPage(ctx context.Context, version, out string) (string, error) {
	dir, err := Source(ctx, version)
	if err != nil {
		return "", err
	}
	return dir, Build(ctx, dir, out)
}
