// Package spirvgen turns the WGSL kernel modules (shaders.Modules: plain
// families and every variant of a specialized family, with the generated
// constants and common.wgsl prepended) into SPIR-V with naga, then runs
// two passes of its own over naga's output: DropWorkgroupZeroInit (modules
// with NoZeroInitMarker) and DropUnusedCapabilities (every module). The
// generator command and the freshness test share it.
package spirvgen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Module is one unit to compile: shaders.Module's fields (this package may
// not import shaders, whose tests use it).
type Module struct {
	Name  string
	WGSL  string
	Entry string // "": every entry point; else only this one (naga --entry-point --compact)
}

// SPIRVVersion is the SPIR-V version naga emits (subgroup ops need 1.3).
const SPIRVVersion = "1.3"

// Generate writes outDir/<module>.spv for every module and removes stale
// .spv files of modules that no longer exist.
func Generate(naga, outDir string, modules []Module) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	tmp, err := os.MkdirTemp("", "spirvgen")
	if err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	defer os.RemoveAll(tmp)
	keep := map[string]bool{}
	for _, m := range modules {
		full := filepath.Join(tmp, m.Name+".wgsl")
		if err := os.WriteFile(full, []byte(ForNaga(m.WGSL)), 0o644); err != nil {
			return fmt.Errorf("spirvgen: %w", err)
		}
		out := filepath.Join(outDir, m.Name+".spv")
		keep[m.Name+".spv"] = true
		args := []string{"--spirv-version", SPIRVVersion}
		if m.Entry != "" {
			args = append(args, "--entry-point", m.Entry, "--compact")
		}
		cmd := exec.Command(naga, append(args, full, out)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("spirvgen: naga %s: %w: %s", m.Name, err, stderr.String())
		}
		spv, err := os.ReadFile(out)
		if err != nil {
			return fmt.Errorf("spirvgen: %w", err)
		}
		if strings.Contains(m.WGSL, "\n"+NoZeroInitMarker+"\n") {
			if spv, err = DropWorkgroupZeroInit(spv); err != nil {
				return fmt.Errorf("spirvgen: %s: %w", m.Name, err)
			}
		}
		// naga declares capabilities some modules do not use (f16 ones:
		// StorageInputOutput16, which lavapipe lacks).
		if spv, err = DropUnusedCapabilities(spv); err != nil {
			return fmt.Errorf("spirvgen: %s: %w", m.Name, err)
		}
		if err := os.WriteFile(out, spv, 0o644); err != nil {
			return fmt.Errorf("spirvgen: %w", err)
		}
	}
	old, err := filepath.Glob(filepath.Join(outDir, "*.spv"))
	if err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	for _, f := range old {
		if !keep[filepath.Base(f)] && strings.HasSuffix(f, ".spv") {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("spirvgen: %w", err)
			}
		}
	}
	return nil
}

// ForNaga is WGSL source as naga 30 takes it: without `enable subgroups;`,
// which WGSL asks of a module using subgroup builtins (the browsers' Tint
// refuses them without it) and naga refuses ("the `subgroups`
// enable-extension is not yet supported"), though it compiles the builtins.
func ForNaga(wgsl string) string {
	return subgroupsEnable.ReplaceAllString(wgsl, "")
}

var subgroupsEnable = regexp.MustCompile(`(?m)^enable subgroups;\n`)
