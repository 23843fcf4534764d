package pipeline

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/internal/vulkan"
	"github.com/gpurun/gpurun/internal/webgpu"
)

// BenchmarkSpeculativeVerify measures the cost of verifying K drafted
// tokens, one step of K+1 tokens returning every row's logits, against one
// decode step, for K = 2, 4, 8, on the 110M Llama shape with random int8
// weights, at position 256 of the cache. Each iteration runs the four
// steps in turn (so contention falls on all alike) and the report gives
// each one's mean milliseconds and its ratio to the decode step. The
// backend is GPURUN_BENCH_BACKEND (cpu, webgpu, vulkan; default cpu).
// Run with -benchtime=20x.
func BenchmarkSpeculativeVerify(b *testing.B) {
	cfg, ok := synthetic.ByName("llama-110m")
	if !ok {
		b.Fatal("no llama-110m spec")
	}
	ck, err := synthetic.Checkpoint(cfg, synthetic.Options{Quant: synthetic.QuantInt8, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var be gpu.Backend = cpu.New(cpu.Options{Math: cpu.MathDynamic})
	if name := os.Getenv("GPURUN_BENCH_BACKEND"); name != "" && name != "cpu" {
		var dev gpu.Device
		switch name {
		case "vulkan":
			dev, err = vulkan.Open(ctx)
		case "webgpu":
			dev, err = webgpu.Open(ctx)
		default:
			b.Fatalf("GPURUN_BENCH_BACKEND=%s: want cpu, vulkan or webgpu", name)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		be = compute.New(dev)
	}
	defer be.Close()
	m, err := FromCheckpoint(ctx, ck, Options{Backend: be, MaxCache: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	sl := m.slots[0]
	const pos = 256
	ids := make([]int32, 9)
	for i := range ids {
		ids[i] = int32(3 + i*97)
	}
	steps := []struct {
		name string
		prog gpu.Program
		n    int
	}{{"decode", sl.decode, 1}}
	for _, k := range []int{2, 4, 8} {
		p, err := m.verifier(sl, k+1)
		if err != nil {
			b.Fatal(err)
		}
		steps = append(steps, struct {
			name string
			prog gpu.Program
			n    int
		}{fmt.Sprintf("k%d", k), p, k + 1})
	}
	logits := make([]float32, 9*cfg.VocabSize)
	total := make([]time.Duration, len(steps))
	for i, st := range steps { // warm up
		if err := m.run(ctx, st.prog, ids[:st.n], pos, logits); err != nil {
			b.Fatalf("%s: %v", steps[i].name, err)
		}
	}
	b.ResetTimer()
	for range b.N {
		for i, st := range steps {
			start := time.Now()
			if err := m.run(ctx, st.prog, ids[:st.n], pos, logits); err != nil {
				b.Fatalf("%s: %v", st.name, err)
			}
			total[i] += time.Since(start)
		}
	}
	for i, st := range steps {
		b.ReportMetric(total[i].Seconds()*1000/float64(b.N), st.name+"-ms")
		if i > 0 {
			b.ReportMetric(total[i].Seconds()/total[0].Seconds(), st.name+"/decode")
		}
	}
}
