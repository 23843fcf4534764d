package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/pipeline"
)

// BenchmarkPrefixCacheTTFT measures, on the 110M Llama shape with random
// int8 weights on the CPU backend, the time to first token of a request
// with a 1000-token prompt (cold), then of two requests with other
// 300-token prompts taking the slot, then of a request sharing the first
// request's 1000 tokens with a new ending (hit, from the prefix cache),
// and reports both and their ratio. Run with -benchtime=1x.
func BenchmarkPrefixCacheTTFT(b *testing.B) {
	cfg, ok := synthetic.ByName("llama-110m")
	if !ok {
		b.Fatal("no llama-110m spec")
	}
	ck, err := synthetic.Checkpoint(cfg, synthetic.Options{Quant: synthetic.QuantInt8, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	be := cpu.New(cpu.Options{Math: cpu.MathDynamic}) // gpurun's default math
	b.Cleanup(func() { be.Close() })
	m := load(b, ck, pipeline.Options{MaxCache: 1100, Backend: be, PrefixCacheBytes: pipeline.DefaultPrefixCacheBytes})
	vocab := m.Config().VocabSize
	prompt := func(seed, n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = 3 + (seed*7919+i*104729)%(vocab-3)
		}
		return p
	}
	ttft := func(ids []int) (time.Duration, pipeline.Metrics) {
		s := m.NewSession()
		for _, err := range s.Generate(context.Background(), pipeline.Prompt{IDs: ids}, pipeline.GenerateOptions{MaxTokens: 1}) {
			if err != nil {
				b.Fatal(err)
			}
		}
		return s.Metrics().TimeToFirstToken, s.Metrics()
	}
	var cold, hit time.Duration
	for i := range b.N {
		shared := prompt(100+i, 1000)
		cold, _ = ttft(append(shared, prompt(200+i, 8)...))
		ttft(prompt(300+i, 300))
		ttft(prompt(400+i, 300))
		var met pipeline.Metrics
		hit, met = ttft(append(shared, prompt(500+i, 8)...))
		if met.CachedTokens != 1000 {
			b.Fatalf("hit: %d cached tokens, want 1000", met.CachedTokens)
		}
	}
	b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
	b.ReportMetric(float64(hit.Microseconds())/1000, "hit-ms")
	b.ReportMetric(cold.Seconds()/hit.Seconds(), "speedup")
}
