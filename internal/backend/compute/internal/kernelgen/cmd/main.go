// Command cmd writes the GPU backend's kernel contracts (see package
// kernelgen):
//
//	go run ./internal/kernelgen/cmd -out kernels_gen.go
//
// Run from internal/backend/compute (go generate does).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpurun/gpurun/internal/backend/compute/internal/kernelgen"
)

func main() {
	out := flag.String("out", "kernels_gen.go", "output file")
	flag.Parse()
	src, err := kernelgen.Source()
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
