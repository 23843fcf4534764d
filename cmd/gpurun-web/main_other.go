//go:build !js

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "gpurun-web runs in the browser: build it with GOOS=js GOARCH=wasm go build -o gpurun.wasm ./cmd/gpurun-web and serve it with its page (see package internal/webpage)")
	os.Exit(2)
}
