package platforms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// mingw is Debian's MinGW-w64 C compiler for 64-bit Windows
// (gcc-mingw-w64-x86-64), cgo's C compiler for the Windows build.
const mingw = "x86_64-w64-mingw32-gcc"

// wine64 finds Debian's wine64 (package wine64): the wine64 command where
// the wine package's wrappers are installed, else the loader itself.
func wine64() (string, bool) {
	if p, err := exec.LookPath("wine64"); err == nil {
		return p, true
	}
	for _, p := range []string{"/usr/lib/wine/wine64", "/usr/lib/x86_64-linux-gnu/wine/wine64"} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// winPath is a path of this machine as a Windows program under wine sees
// it: wine's drive Z: is the root of the file system.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// buildWindows cross-builds gpurun.exe with cgo through MinGW (the Vulkan
// binding and wgpu-native's Windows library linked in, as a Windows user's
// `go install` with MinGW gets them), and beside it the stand-in for the
// bcryptprimitives.dll wine 8.0 lacks (testdata/bcryptprimitives.c).
func buildWindows(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath(mingw)
	if err != nil {
		ci.Missing(t, "%s (apt-get install gcc-mingw-w64-x86-64; .ci/setup does)", mingw)
	}
	exe := filepath.Join(dir, "gpurun.exe")
	start := time.Now()
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", exe, "./cmd/gpurun")
	cmd.Dir = testmodels.Root(t)
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=1", "CC="+cc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for windows/amd64 with %s: %v\n%s", mingw, err, out)
	}
	t.Logf("gpurun.exe built in %v", time.Since(start).Round(time.Millisecond))
	dll := exec.Command(cc, "-shared", "-O2", "-o", filepath.Join(dir, "bcryptprimitives.dll"), "testdata/bcryptprimitives.c", "-ladvapi32")
	if out, err := dll.CombinedOutput(); err != nil {
		t.Fatalf("bcryptprimitives.dll: %v\n%s", err, out)
	}
	return exe
}

// wineTries is how many runs wineRun gives a command that wine ends
// with a signal: wine now and then kills a process as it exits (seen on
// `devices` in 2 of 14 runs here, its whole output already written, and
// twice in a row once in some 30 CI runs), which says nothing of
// gpurun.exe.
const wineTries = 3

// wineRun runs gpurun.exe under wine in its own prefix and returns its
// stdout and stderr; it fails t on a non-zero exit. A run that wine ends
// with a signal before the test's deadline is run again, logged, up to
// wineTries runs in all; a run that ends so each time fails the test.
func wineRun(t *testing.T, wine, prefix, exe string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for try := 1; ; try++ {
		cmd := exec.CommandContext(ctx, wine, append([]string{exe}, args...)...)
		cmd.Dir = filepath.Dir(exe)
		cmd.Env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "DISPLAY=", "WAYLAND_DISPLAY=")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		// wine's own services (wineserver, explorer) may outlive the program
		// and hold its pipes open: stop waiting for them after a moment.
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		if err == nil {
			return o.String(), e.String()
		}
		var exit *exec.ExitError
		if try < wineTries && ctx.Err() == nil && errors.As(err, &exit) && exit.ExitCode() == -1 {
			t.Logf("wine gpurun.exe %s ended by a signal (%v), run again; its output:\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
			continue
		}
		t.Fatalf("wine gpurun.exe %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, o.String(), e.String())
	}
}

// TestWindowsUnderWine cross-builds gpurun.exe for windows/amd64 with cgo
// (MinGW-w64) and runs it under wine64 on the CPU backend: the README's
// main job (stories260K with its tokenizer, "Once upon a time"), then the
// golden prompt greedily, whose ids must be llama.cpp's. wine's Vulkan
// (winevulkan) does not reach this machine's drivers, so the GPU backends
// are not run; `devices` must still list the CPU and say why the others
// are missing rather than crash.
func TestWindowsUnderWine(t *testing.T) {
	t.Parallel()
	wine, ok := wine64()
	if !ok {
		ci.Missing(t, "wine64 (apt-get install wine64; .ci/setup does)")
	}
	dir := t.TempDir()
	exe := buildWindows(t, dir)
	prefix := filepath.Join(dir, "wineprefix")
	defer func() {
		// End the prefix's wineserver and the services it started.
		server := filepath.Join(filepath.Dir(wine), "wineserver")
		if _, err := os.Stat(server); err != nil {
			server = "wineserver"
		}
		kill := exec.Command(server, "-k")
		kill.Env = append(os.Environ(), "WINEPREFIX="+prefix)
		_ = kill.Run()
	}()
	models := testmodels.Dir(t)
	model, tok := winPath(filepath.Join(models, "stories260K.bin")), winPath(filepath.Join(models, "tok512.model"))

	start := time.Now()
	out, _ := wineRun(t, wine, prefix, exe, "run", model, "--tokenizer", tok, "-p", "Once upon a time")
	t.Logf("README's job under wine (prefix created) in %v", time.Since(start).Round(time.Millisecond))
	if len(strings.Fields(out)) < 20 {
		t.Errorf("README's job generated %q, want a story", out)
	}

	c := testmodels.StoriesCases(t)[0]
	out, _ = wineRun(t, wine, prefix, exe, "run", "--json", model, "--tokenizer", tok, "--backend", "cpu",
		"-p", c.Prompt, "--temperature", "0", "--max-tokens", strconv.Itoa(len(c.GeneratedIDs)))
	lines := strings.Split(strings.TrimRight(out, "\r\n"), "\n")
	var res struct {
		PromptIDs    []int  `json:"prompt_ids"`
		GeneratedIDs []int  `json:"generated_ids"`
		Backend      string `json:"backend"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line of stdout is not the JSON result: %v\n%s", err, out)
	}
	if !slices.Equal(res.PromptIDs, c.PromptIDs) || !slices.Equal(res.GeneratedIDs, c.GeneratedIDs) {
		t.Errorf("golden prompt %q on windows/amd64: prompt %v generated %v, llama.cpp's %v %v",
			c.Prompt, res.PromptIDs, res.GeneratedIDs, c.PromptIDs, c.GeneratedIDs)
	}

	out, _ = wineRun(t, wine, prefix, exe, "devices")
	if !strings.Contains(out, "windows/amd64") || !strings.Contains(out, "vulkan") {
		t.Errorf("devices under wine lists no windows/amd64 CPU or no word on Vulkan:\n%s", out)
	}
	t.Logf("gpurun devices under wine:\n%s", out)
}
