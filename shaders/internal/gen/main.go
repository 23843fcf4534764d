// Command gen compiles every kernel family of the shaders package from WGSL
// to SPIR-V with naga (common.wgsl prepended), one module per family:
//
//	go run ./internal/gen -out spirv [-naga naga]
//
// Run from the shaders directory (go generate does).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpurun/gpurun/shaders/internal/spirvgen"
)

func main() {
	out := flag.String("out", "spirv", "output directory")
	naga := flag.String("naga", "naga", "naga executable")
	src := flag.String("src", "wgsl", "WGSL directory")
	flag.Parse()
	if err := spirvgen.Generate(*naga, *src, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
