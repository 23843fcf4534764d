package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/vulkan"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// benchConfig loads one configuration and runs every test on it. A failure
// becomes the Error of the configuration's results, so the sweep goes on.
// With fresh (GPU backends, --cold-load), the configuration is loaded on a
// backend fresh opens with an empty pipeline cache directory (the cold
// load), which is closed, then on another with the cache it left (the warm
// load): the tests run on that one; otherwise on b.
func benchConfig(ctx context.Context, log io.Writer, bar *progressbar.ProgressBar, rf *benchModelFlags, bf *benchFlags, tests []benchreport.Test,
	src benchSource, ck *model.Checkpoint, ckErr error, b gpu.Backend, fresh func() (gpu.Backend, error), policy string, modelBytes int64, processPeak *int64) []benchreport.Result {
	info := b.Info()
	base := benchreport.Result{Model: src.name, Source: "synthetic", Weights: src.weight, Activations: policy,
		Backend: info.Backend, Device: info.Name, ModelBytes: modelBytes, Runs: []benchreport.Run{}}
	if src.file != "" {
		base.Source = src.file
	}
	if policy == "" {
		base.Activations = benchreport.PolicyModel
	}
	if ck != nil {
		base.Arch = ck.Config.Arch
	}
	runsPer := int64(bf.warmup + bf.reps)
	fail := func(err error) []benchreport.Result {
		fmt.Fprintf(log, "bench: %s on %s, activations: %s: %v\n", src.name+" "+src.weight, info.Backend, base.ActivationsText(), err)
		out := make([]benchreport.Result, len(tests))
		for i, t := range tests {
			out[i] = base
			out[i].Test = t
			out[i].Error = err.Error()
		}
		bar.Add64(runsPer * int64(len(tests)))
		return out
	}
	if ckErr != nil {
		return fail(ckErr)
	}
	*processPeak = max(*processPeak, benchreport.PeakRSS())
	benchreport.ResetPeakRSS()
	var coldSeconds float64
	if fresh != nil {
		warm, secs, cleanup, err := benchColdLoad(ctx, bar, rf, bf, src, ck, fresh, policy, info.Backend)
		defer cleanup()
		if err != nil {
			return fail(err)
		}
		b, coldSeconds = warm, secs
	}
	b.ResetPeakMemory()
	bar.Describe(fmt.Sprintf("loading %s %s on %s", src.name, src.weight, info.Backend))
	gm, loadSeconds, err := benchLoad(ctx, rf, bf, src, ck, b, policy)
	if err != nil {
		return fail(err)
	}
	m := gm.Pipeline()
	defer gm.Close()
	spec, err := benchSpeculation(ctx, rf, bf, b, policy, &base)
	if err != nil {
		return fail(err)
	}
	if spec != nil && spec.Draft != nil {
		defer spec.Draft.Close()
	}
	cfg := m.Config()
	base.Arch = cfg.Arch
	base.KVCache = m.KVCacheTypes()
	base.ActivationDType = m.ActivationDType().String()
	base.MaxCache = m.MaxCache()
	base.DecodeWeightBytes, base.KVBytesPerPosition = m.DecodeBytes()
	base.KVCacheBytes = m.KVCacheBytes()
	base.LoadSeconds = loadSeconds
	if fresh != nil {
		base.LoadColdSeconds = coldSeconds
		if st, ok := gpurun.PipelineCacheStats(b); ok {
			base.PipelineCacheBytes = int64(st.LoadedBytes)
			base.PipelineCacheHits = st.WarmPipelines
		}
	}
	var out []benchreport.Result
	run := 0 // every run's prompt starts with a different token
	for _, t := range tests {
		res := base
		res.Test = t
		bar.Describe(fmt.Sprintf("%s, %s", base.Label(), t.Name))
		done := 0 // runs finished, warm-up included
		err := benchTest(ctx, bar, bf, m, t, spec, &res, &run, &done)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return out
			}
			fmt.Fprintf(log, "bench: %s, %s: %v\n", base.Label(), t.Name, err)
			bar.Add64(runsPer - int64(done)) // the runs the failure skipped
			res.Runs = []benchreport.Run{}
			res.Error = err.Error()
		} else {
			res.Summarize()
			run++
			decodeDevice(ctx, log, m, t, repeatPrompt(benchPrompt(t.PromptTokens, cfg.VocabSize, run), bf.promptRepeat), &res)
		}
		out = append(out, res)
	}
	peak := benchreport.PeakRSS()
	devPeak := b.MemoryUse().Peak // zero on the CPU backend
	for i := range out {
		out[i].PeakRSSBytes = peak
		out[i].DeviceMemoryBytes = devPeak
	}
	*processPeak = max(*processPeak, peak)
	return out
}

// benchLoad loads src onto b with the model flags and returns it with the
// seconds the load took.
func benchLoad(ctx context.Context, rf *benchModelFlags, bf *benchFlags, src benchSource, ck *model.Checkpoint, b gpu.Backend, policy string) (*gpurun.Model, float64, error) {
	// Bench measures speed: a cache past the model's trained context is
	// taken, as llama-bench takes it (tests at a depth on a 2K-context model).
	opts := []gpurun.Option{gpurun.WithGPUBackend(b), gpurun.WithMaxCache(rf.maxCache), gpurun.WithCacheBeyondContext(), gpurun.WithActivations(policy), gpurun.WithStepsPerSubmit(rf.steps)}
	if rf.cacheK != "" || rf.cacheV != "" {
		opts = append(opts, gpurun.WithCacheTypes(rf.cacheK, rf.cacheV))
	}
	if bf.prefillChunk > 0 {
		var sizes []int
		for _, s := range pipeline.DefaultPrefillSizes {
			if s < bf.prefillChunk {
				sizes = append(sizes, s)
			}
		}
		opts = append(opts, gpurun.WithPrefillSizes(append(sizes, bf.prefillChunk)...))
	}
	if rf.noFusion {
		opts = append(opts, gpurun.WithoutFusion())
	}
	if rf.hostSample {
		opts = append(opts, gpurun.WithHostSampling())
	}
	opts = append(opts, rf.lora.options()...)
	start := time.Now()
	var gm *gpurun.Model
	var err error
	if ck != nil {
		gm, err = gpurun.OpenCheckpoint(ctx, ck, opts...)
	} else {
		if rf.tokenizer != "" {
			opts = append(opts, gpurun.WithTokenizer(rf.tokenizer))
		}
		gm, err = gpurun.Open(ctx, src.file, opts...)
	}
	if err != nil {
		return nil, 0, err
	}
	return gm, time.Since(start).Seconds(), nil
}

// decodeSteps is how many decode steps test t's runs take after the
// first token (which the prefill gives); 0 for a test that does not decode.
func decodeSteps(t benchreport.Test) int {
	if _, _, decode := t.Metrics(); !decode {
		return 0
	}
	return t.GenerateTokens - 1
}

// decodeDevice sets res's DecodeStep (after Summarize) from the device time
// of t's decode steps run again after prompt with timestamps
// (pipeline.Model.TimeDecode), where the backend has them and picks tokens
// on the device (not for speculative decoding, whose steps verify drafts,
// nor for a test at a depth, whose context the rerun would not hold);
// a backend without says nothing, another failure goes to log.
func decodeDevice(ctx context.Context, log io.Writer, m *pipeline.Model, t benchreport.Test, prompt []int, res *benchreport.Result) {
	steps := decodeSteps(t)
	if steps < 1 || res.Speculation != "" || t.Depth > 0 {
		return
	}
	d, err := m.TimeDecode(ctx, prompt, steps)
	if errors.Is(err, gpu.ErrUnsupported) {
		return
	}
	if err != nil {
		fmt.Fprintf(log, "bench: %s, %s: device time of the decode steps: %v\n", res.Label(), t.Name, err)
		return
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) / float64(d.Steps) }
	res.SetDecodeDevice(ms(d.Device), ms(d.Wall))
}

// benchPrompt makes a deterministic prompt that differs from run to run in
// its first token, so no run reuses another's cached context. Ids 0-2 (the
// usual unk/bos/eos) are avoided.
func benchPrompt(n, vocab, run int) []int {
	ids := make([]int, n)
	span := max(vocab-3, 1)
	for i := range ids {
		ids[i] = 3 + (i*7919+run*104729)%span
	}
	return ids
}

// profileKernels profiles the steps test t measures (ppN: one prefill
// step of the prompt; tgN: one decode step; both for the combined tests)
// and sums each step's ops per kernel, named "<step> <kernel>" (with the
// variant; an op without kernels by its kind).
func profileKernels(ctx context.Context, m *pipeline.Model, t benchreport.Test, prompt []int) ([]benchreport.Kernel, error) {
	steps, err := m.Profile(ctx, prompt)
	if err != nil {
		return nil, err
	}
	return stepKernels(steps, t)
}

// stepKernels sums each profiled step's ops per kernel, the steps test t
// does not measure left out (see profileKernels).
func stepKernels(steps []pipeline.StepProfile, t benchreport.Test) ([]benchreport.Kernel, error) {
	var out []benchreport.Kernel
	for _, st := range steps {
		if st.Step == "prefill" && t.Kind == benchreport.KindGenerate || st.Step == "decode" && t.Kind == benchreport.KindPrompt {
			continue
		}
		at := map[string]int{}
		for _, op := range st.Ops {
			name := strings.Join(op.Kernels, "+")
			if name == "" {
				name = string(op.Kind)
			}
			name = st.Step + " " + name
			i, ok := at[name]
			if !ok {
				i = len(out)
				at[name] = i
				out = append(out, benchreport.Kernel{Name: name})
			}
			k := &out[i]
			k.Calls++
			k.TimeMS += float64(op.Nanos) / 1e6
			k.Bytes += op.Bytes
			k.Flops += op.FLOPs
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("profile: no step of %s profiled", t.Name)
	}
	return out, nil
}

// benchColdLoad is a GPU configuration's cold load (--cold-load): src
// loaded on a backend fresh opens with an empty pipeline cache directory,
// timed and closed; it returns another fresh backend, with the cache that
// load left, for the tests, and the cold load's seconds. cleanup (always
// set, to be called when the tests are done) closes that backend and
// removes the directory.
func benchColdLoad(ctx context.Context, bar *progressbar.ProgressBar, rf *benchModelFlags, bf *benchFlags, src benchSource, ck *model.Checkpoint,
	fresh func() (gpu.Backend, error), policy, backend string) (warm gpu.Backend, coldSeconds float64, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	dir, err := os.MkdirTemp("", "gpurun-bench-pcache-")
	if err != nil {
		return nil, 0, cleanup, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	// The devices read the variable when they open: both see dir.
	prev, had := os.LookupEnv(vulkan.PipelineCacheEnv)
	os.Setenv(vulkan.PipelineCacheEnv, dir)
	undo = append(undo, func() {
		if had {
			os.Setenv(vulkan.PipelineCacheEnv, prev)
		} else {
			os.Unsetenv(vulkan.PipelineCacheEnv)
		}
	})
	bar.Describe(fmt.Sprintf("cold load of %s %s on %s", src.name, src.weight, backend))
	cold, err := fresh()
	if err != nil {
		return nil, 0, cleanup, err
	}
	gm, secs, err := benchLoad(ctx, rf, bf, src, ck, cold, policy)
	if err == nil {
		coldSeconds = secs
		gm.Close()
	}
	if cerr := cold.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, 0, cleanup, err
	}
	if warm, err = fresh(); err != nil {
		return nil, 0, cleanup, err
	}
	undo = append(undo, func() { warm.Close() })
	return warm, coldSeconds, cleanup, nil
}

// benchTest runs test t on m: the warm-up and measured runs (their
// figures into res.Runs, *done counting the finished ones) and, with
// --profile, the kernel profile of the steps it measures. *run numbers
// every run of the configuration, so that no two prompts start alike.
func benchTest(ctx context.Context, bar *progressbar.ProgressBar, bf *benchFlags, m *pipeline.Model, t benchreport.Test, spec *pipeline.Speculation,
	res *benchreport.Result, run, done *int) error {
	if t.MaxCache != 0 && m.MaxCache() != t.MaxCache {
		return fmt.Errorf("%s needs a %d-token KV cache, the model was loaded with %d (--max-cache; the model's context may be shorter)", t.Name, t.MaxCache, m.MaxCache())
	}
	if t.Depth > 0 && testCache(t) > m.MaxCache() {
		return fmt.Errorf("%s: depth %d + %d prompt + %d generated tokens exceed the KV cache of %d (raise --max-cache; the model's context may be shorter)",
			t.Name, t.Depth, t.PromptTokens, t.GenerateTokens, m.MaxCache())
	}
	if t.PromptTokens+t.GenerateTokens > m.MaxCache() {
		return fmt.Errorf("%s: %d prompt + %d generated tokens exceed the KV cache of %d (raise --max-cache)", t.Name, t.PromptTokens, t.GenerateTokens, m.MaxCache())
	}
	vocab := m.Config().VocabSize
	for r := -bf.warmup; r < bf.reps; r++ {
		*run++
		s := m.NewSession()
		if err := fillDepth(ctx, s, t, vocab, *run); err != nil {
			return err
		}
		p := pipeline.Prompt{IDs: repeatPrompt(benchPrompt(t.PromptTokens, vocab, *run), bf.promptRepeat)}
		for _, err := range s.Generate(ctx, p, pipeline.GenerateOptions{MaxTokens: t.GenerateTokens, IgnoreStopTokens: true, Speculation: spec}) {
			if err != nil {
				return err
			}
		}
		bar.Add(1)
		*done++
		met := s.Metrics()
		if met.PrefillTokens != t.PromptTokens || met.GeneratedTokens != t.GenerateTokens {
			return fmt.Errorf("run %d prefilled %d of %d prompt tokens and generated %d of %d", *run, met.PrefillTokens, t.PromptTokens, met.GeneratedTokens, t.GenerateTokens)
		}
		if r >= 0 {
			res.Runs = append(res.Runs, benchreport.Run{
				PromptTokens: met.PromptTokens, GeneratedTokens: met.GeneratedTokens,
				TimeToFirstTokenMS:  float64(met.TimeToFirstToken.Microseconds()) / 1000,
				PrefillTokensPerSec: met.PrefillTokensPerSec, DecodeTokensPerSec: met.DecodeTokensPerSec,
				DraftTokens: met.DraftTokens, AcceptedTokens: met.AcceptedTokens, TargetSteps: met.TargetSteps,
			})
		}
	}
	if bf.profile {
		*run++
		k, err := profileKernels(ctx, m, t, benchPrompt(t.PromptTokens, vocab, *run))
		if err != nil {
			return err
		}
		res.Kernels = k
	}
	return nil
}

// fillDepth gives session s, new, test t's context (t.Depth positions of
// ids that differ from run to run, none for a test without a depth): run
// as a prompt, or random keys and values (t.DepthFill).
func fillDepth(ctx context.Context, s *pipeline.Session, t benchreport.Test, vocab, run int) error {
	if t.Depth == 0 {
		return nil
	}
	ids := benchPrompt(t.Depth, vocab, run)
	var err error
	if t.DepthFill == benchreport.DepthRandom {
		err = s.FillRandom(ctx, ids, uint64(run))
	} else {
		err = s.Prefill(ctx, ids)
	}
	if err != nil {
		return fmt.Errorf("%s: the context at depth %d (%s): %w", t.Name, t.Depth, t.DepthFill, err)
	}
	return nil
}
