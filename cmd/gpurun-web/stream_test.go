//go:build !js

package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// TestStreamedGGUF loads GGUF files the way the page does, from the
// header with each tensor read when the backend takes it (here from an
// os.File rather than a Blob), on the CPU backend and on a GPU backend
// (the page's WebGPU, natively on lavapipe), and checks the greedy ids
// equal llama.cpp's (phi2_fusedqkv: its fused QKV split at fill time) and
// that the GPU backend let every tensor's bytes go after the upload.
func TestStreamedGGUF(t *testing.T) {
	for _, tc := range []struct{ arch, backend string }{
		{"llama", "cpu"}, {"phi2_fusedqkv", "cpu"}, {"llama-q8_0", "cpu"},
		{"llama", "webgpu"}, {"phi2_fusedqkv", "webgpu"},
	} {
		arch := tc.arch
		t.Run(arch+"/"+tc.backend, func(t *testing.T) {
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
			var b gpu.Backend = cpu.New(cpu.Options{})
			if tc.backend != "cpu" {
				b.Close()
				var err error
				b, err = gpurun.OpenBackend(context.Background(), tc.backend, gpurun.BackendOptions{})
				if err != nil && !errors.Is(err, gpu.ErrNoDevice) {
					t.Fatal(err)
				}
				gputest.NoDevice(t, tc.backend, err)
			}
			defer b.Close()
			ck, err := f.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: b, MaxCache: testCache})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, w := range ck.Tensors {
				if w.Deferred() != (tc.backend != "cpu") {
					t.Fatalf("%s on %s: deferred %v after the load", w.Name, tc.backend, w.Deferred())
				}
			}
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
