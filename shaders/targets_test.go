package shaders

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/shaders/internal/spirvgen"
)

// The languages wgpu translates WGSL into on Metal and D3D12, with naga,
// the translator wgpu itself uses. A kernel Metal or D3D12 would reject
// fails here, on a Linux machine, rather than on a user's Mac or PC.
// Versions are the lowest wgpu-native's backends ask for: MSL 2.1 (wgpu's
// Metal backend on macOS 10.14, the oldest it supports), HLSL shader model
// 5.1 (FXC, wgpu's D3D12 compiler unless DXC is shipped beside it) and 6.0
// (DXC's lowest, and subgroup operations'). No Debian package compiles the
// HLSL further (DXC and FXC are not packaged; bookworm's vkd3d-compiler
// 1.2 reads no HLSL), so naga's translation is where the check ends.
var nagaTargets = []struct {
	name string
	args []string
	ext  string
}{
	{"MSL 2.1", []string{"--metal-version", "2.1"}, ".metal"},
	{"HLSL SM 5.1", []string{"--shader-model", "51"}, ".hlsl"},
	{"HLSL SM 6.0", []string{"--shader-model", "60"}, ".hlsl"},
}

// writeWGSL writes m's source to dir, where translate reads it.
func writeWGSL(dir string, m Module) error {
	return os.WriteFile(filepath.Join(dir, m.Name+".wgsl"), []byte(spirvgen.ForNaga(m.WGSL)), 0o644)
}

// translate runs naga on one module (written by writeWGSL) for one target,
// writing into dir.
func translate(naga, dir string, m Module, args []string, ext string) error {
	in := filepath.Join(dir, m.Name+".wgsl")
	if m.Entry != "" {
		args = append(args, "--entry-point", m.Entry, "--compact")
	}
	out := filepath.Join(dir, m.Name+strings.ReplaceAll(strings.Join(args, ""), "-", "")+ext)
	cmd := exec.Command(naga, append(args, in, out)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("naga %s: %w: %s", strings.Join(cmd.Args[1:], " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		return fmt.Errorf("naga wrote no %s (%v)", out, err)
	}
	return nil
}

// TestMSLHLSL translates every kernel module (what the SPIR-V generator
// compiles, and what the WebGPU backend hands wgpu) to MSL and HLSL with
// naga, failing on any error.
func TestMSLHLSL(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		ci.Missing(t, "naga v30 (see README: cargo install naga-cli)")
	}
	mods, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now()
	type job struct {
		m           Module
		target, ext string
		args        []string
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := translate(naga, dir, j.m, j.args, j.ext); err != nil {
					mu.Lock()
					t.Errorf("%s to %s: %v", j.m.Name, j.target, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, m := range mods {
		if err := writeWGSL(dir, m); err != nil {
			t.Fatal(err)
		}
		for _, tg := range nagaTargets {
			jobs <- job{m, tg.name, tg.ext, append([]string(nil), tg.args...)}
		}
	}
	close(jobs)
	wg.Wait()
	names := make([]string, len(nagaTargets))
	for i, tg := range nagaTargets {
		names[i] = tg.name
	}
	t.Logf("%d modules translated to %s in %v", len(mods), strings.Join(names, ", "), time.Since(start).Round(time.Millisecond))
}

// TestTranslateFails: translate reports naga's error, so TestMSLHLSL can
// fail: a module naga rejects gives an error naming it.
func TestTranslateFails(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		ci.Missing(t, "naga v30 (see README: cargo install naga-cli)")
	}
	bad := Module{Name: "bad", WGSL: "@compute @workgroup_size(1)\nfn main() { let x: u32 = 1.5; }\n"}
	dir := t.TempDir()
	if err := writeWGSL(dir, bad); err != nil {
		t.Fatal(err)
	}
	for _, tg := range nagaTargets {
		if err := translate(naga, dir, bad, tg.args, tg.ext); err == nil || !strings.Contains(err.Error(), "bad.wgsl") {
			t.Errorf("%s: %v, want naga's error naming bad.wgsl", tg.name, err)
		}
	}
}
