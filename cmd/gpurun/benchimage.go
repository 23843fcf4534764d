package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// imageBench is what bench-image reports: each timed encode of the image,
// its wall time and the process's CPU time (user + system) over it.
type imageBench struct {
	MMProj   string    `json:"mmproj"`
	Image    string    `json:"image"`
	Backend  string    `json:"backend"`
	Device   string    `json:"device"`
	Threads  int       `json:"threads,omitempty"` // CPU backend; 0: its default
	Tokens   int       `json:"tokens"`            // embeddings per image
	LoadMs   float64   `json:"load_ms"`           // weights loaded and the encoder compiled (the first encode's extra)
	EncodeMs []float64 `json:"encode_ms"`         // wall time of each timed encode
	CPUMs    []float64 `json:"cpu_ms"`            // the process's CPU time over each
}

func newBenchImage() *cobra.Command {
	var (
		mmproj, image, backend string
		cpuProfile             string
		threads, reps, warmup  int
		asJSON                 bool
	)
	cmd := &cobra.Command{
		Use:   "bench-image --mmproj FILE --image FILE",
		Short: "Time a vision projector's image encode (preprocessed image to embeddings), as llama-mtmd-cli's encode time",
		Long: `bench-image times the encoder of a vision projector (llama.cpp's mmproj
GGUF) on one image: the image is decoded and preprocessed once, the
projector's weights loaded and its encoder compiled by an untimed first
encode, then --warmup more untimed encodes and --reps timed ones, each
from the preprocessed patches to the embeddings the text model takes
(what llama-mtmd-cli's "batch encoding done in N ms" times). It prints
each encode's wall time and the process's CPU time over it.`,
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mmproj == "" || image == "" {
				return errors.New("--mmproj FILE and --image FILE are required")
			}
			if reps < 1 || warmup < 0 || threads < 0 {
				return fmt.Errorf("--reps %d, --warmup %d, --threads %d: want reps >= 1, warmup >= 0, threads >= 0", reps, warmup, threads)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			r, err := benchImage(cmd.Context(), mmproj, image, backend, threads, reps, warmup)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(r)
			}
			fmt.Fprintf(out, "%s on %s (%s), %d embeddings: load+compile %.0f ms\n", r.MMProj, r.Backend, r.Device, r.Tokens, r.LoadMs)
			for i := range r.EncodeMs {
				fmt.Fprintf(out, "encode %d: %.0f ms (CPU %.0f ms)\n", i+1, r.EncodeMs[i], r.CPUMs[i])
			}
			s := slices.Clone(r.EncodeMs)
			slices.Sort(s)
			fmt.Fprintf(out, "median encode %.0f ms\n", s[len(s)/2])
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&mmproj, "mmproj", "", "vision projector (llama.cpp's mmproj GGUF)")
	f.StringVar(&image, "image", "", "image file (PNG, JPEG, GIF, WebP)")
	f.StringVar(&backend, "backend", "cpu", "backend: cpu, webgpu or vulkan")
	f.IntVar(&threads, "threads", 0, "CPU backend threads (0: its default)")
	f.IntVar(&reps, "reps", 3, "timed encodes")
	f.IntVar(&warmup, "warmup", 0, "untimed encodes after the first (which loads and compiles)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file")
	return cmd
}

func benchImage(ctx context.Context, mmproj, image, backend string, threads, reps, warmup int) (*imageBench, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	clip, err := gguf.OpenClip(mmproj)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(image)
	if err != nil {
		return nil, err
	}
	img, err := vision.Decode(data, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", image, err)
	}
	be, err := gpurun.OpenBackend(ctx, backend, gpurun.BackendOptions{CPU: cpu.Options{Threads: threads, Math: gpurun.DefaultCPUMath}})
	if err != nil {
		return nil, err
	}
	defer be.Close()
	enc, err := pipeline.NewVisionEncoder(be, clip)
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	patches, err := enc.Preprocess(img)
	if err != nil {
		return nil, err
	}
	r := &imageBench{MMProj: mmproj, Image: image, Backend: backend, Device: be.Info().Name, Threads: threads, Tokens: enc.Tokens()}
	encode := func() (wall, cpuTime time.Duration, err error) {
		c0 := processCPU()
		t0 := time.Now()
		_, err = enc.EncodePatches(ctx, patches)
		return time.Since(t0), processCPU() - c0, err
	}
	first, _, err := encode()
	if err != nil {
		return nil, err
	}
	for range warmup {
		if _, _, err := encode(); err != nil {
			return nil, err
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for range reps {
		wall, c, err := encode()
		if err != nil {
			return nil, err
		}
		r.EncodeMs = append(r.EncodeMs, ms(wall))
		r.CPUMs = append(r.CPUMs, ms(c))
	}
	r.LoadMs = max(0, ms(first)-slices.Min(r.EncodeMs))
	return r, nil
}
