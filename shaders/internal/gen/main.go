// Command gen compiles every kernel module of the shaders package (see
// shaders.Modules) from WGSL to SPIR-V with naga:
//
//	go run ./internal/gen -out spirv [-naga naga]
//
// Run from the shaders directory (go generate does).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/shaders/internal/spirvgen"
)

func main() {
	out := flag.String("out", "spirv", "output directory")
	naga := flag.String("naga", "naga", "naga executable")
	flag.Parse()
	mods, err := shaders.Modules()
	if err == nil {
		in := make([]spirvgen.Module, len(mods))
		for i, m := range mods {
			in[i] = spirvgen.Module{Name: m.Name, WGSL: m.WGSL, Entry: m.Entry}
		}
		err = spirvgen.Generate(*naga, *out, in)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
