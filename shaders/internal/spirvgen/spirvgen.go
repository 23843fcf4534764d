// Package spirvgen turns the WGSL kernel families into SPIR-V with naga. The
// generator command and the freshness test share it.
package spirvgen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SPIRVVersion is the SPIR-V version naga emits (subgroup ops need 1.3).
const SPIRVVersion = "1.3"

// Generate writes out/<family>.spv for every srcDir/<family>.wgsl except
// common.wgsl, which is prepended to each.
func Generate(naga, srcDir, outDir string) error {
	common, err := os.ReadFile(filepath.Join(srcDir, "common.wgsl"))
	if err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(srcDir, "*.wgsl"))
	if err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	tmp, err := os.MkdirTemp("", "spirvgen")
	if err != nil {
		return fmt.Errorf("spirvgen: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		family := strings.TrimSuffix(filepath.Base(f), ".wgsl")
		if family == "common" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("spirvgen: %w", err)
		}
		full := filepath.Join(tmp, family+".wgsl")
		if err := os.WriteFile(full, append(append(append([]byte{}, common...), '\n'), src...), 0o644); err != nil {
			return fmt.Errorf("spirvgen: %w", err)
		}
		out := filepath.Join(outDir, family+".spv")
		cmd := exec.Command(naga, "--spirv-version", SPIRVVersion, full, out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("spirvgen: naga %s: %w: %s", family, err, stderr.String())
		}
		if bytes.Contains(src, []byte("\n"+NoZeroInitMarker+"\n")) {
			spv, err := os.ReadFile(out)
			if err != nil {
				return fmt.Errorf("spirvgen: %w", err)
			}
			if spv, err = DropWorkgroupZeroInit(spv); err != nil {
				return fmt.Errorf("spirvgen: %s: %w", family, err)
			}
			if err := os.WriteFile(out, spv, 0o644); err != nil {
				return fmt.Errorf("spirvgen: %w", err)
			}
		}
	}
	return nil
}
