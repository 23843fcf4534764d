//go:build !js

package main

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/gpu/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/gguf"
)

// TestStreamedGGUF loads GGUF files the way the page does, from the
// header with each tensor read when the backend takes it (here from an
// os.File rather than a Blob), and checks the greedy ids equal
// llama.cpp's (phi2_fusedqkv: its fused QKV split at fill time).
func TestStreamedGGUF(t *testing.T) {
	for _, arch := range []string{"llama", "phi2_fusedqkv", "llama-q8_0"} {
		t.Run(arch, func(t *testing.T) {
			g := testmodels.Arch(t, arch)
			file, err := os.Open(testmodels.Path(t, "arch", arch+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			fi, err := file.Stat()
			if err != nil {
				t.Fatal(err)
			}
			var read int64
			readAt := func(off, n int64) ([]byte, error) {
				b := make([]byte, n)
				_, err := file.ReadAt(b, off)
				read += n
				return b, err
			}
			head, err := readAt(0, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.ParseHead(head, fi.Size(), readAt)
			if err != nil {
				t.Fatal(err)
			}
			b := cpu.New(cpu.Options{})
			defer b.Close()
			m, _, err := loadGGUF(context.Background(), f, b, testCache)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if read < fi.Size()-f.DataOffset {
				t.Errorf("read %d bytes of a %d-byte data section", read, fi.Size()-f.DataOffset)
			}
			var ids []int
			for tk, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: tokens}) {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, tk.ID)
			}
			if want := g.GreedyIDs[:tokens]; !slices.Equal(ids, want) {
				t.Errorf("streamed %s: ids %v, llama.cpp's %v", arch, ids, want)
			}
		})
	}
}
