package synthetic

import (
	"bufio"
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/pipeline"
)

// Full-size runs take minutes and gigabytes, so they only run on request:
//
//	go test ./internal/synthetic -run TestRealShapes -v -timeout 60m -args -real-shapes [-real-shapes-only=gemma-2b] [-real-shapes-quant=int8]
var (
	realShapes      = flag.Bool("real-shapes", false, "build and run every spec at full size on the CPU backend")
	realShapesOnly  = flag.String("real-shapes-only", "", "comma-separated spec names to run (default all)")
	realShapesQuant = flag.String("real-shapes-quant", QuantInt4, "storage mode of the full-size runs")
	// The pipeline's defaults (a 1280-position f32 KV cache and prefill
	// graphs of 8 to 512 tokens) show what a benchmark with default
	// options costs in memory.
	realShapesDefaults = flag.Bool("real-shapes-defaults", false, "load with the pipeline's default cache and prefill sizes")
)

// TestRealShapes builds each spec at full size, prefills 16 tokens and
// decodes 4 more on the CPU backend, checking the logits of the prefill and
// of every decode step, and logs what it measured.
func TestRealShapes(t *testing.T) {
	if !*realShapes {
		t.Skip("full-size models need -real-shapes")
	}
	only := map[string]bool{}
	for _, n := range strings.Split(*realShapesOnly, ",") {
		if n != "" {
			only[n] = true
		}
	}
	t.Logf("%-15s %-5s %8s %9s %8s %8s %9s %10s %10s %8s %8s",
		"model", "quant", "params", "weights", "build", "load", "ttft", "prefill/s", "decode/s", "rss", "peakrss")
	for _, s := range Specs() {
		if len(only) > 0 && !only[s.Name] {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			runRealShape(t, s)
			runtime.GC()
			debug.FreeOSMemory()
		})
	}
}

func runRealShape(t *testing.T, s Spec) {
	ctx := context.Background()
	cfg := s.Config
	cfg.EOS, cfg.StopTokens = -1, nil // a benchmark runs a fixed number of steps
	opts := Options{Quant: *realShapesQuant, Seed: 1}
	params, err := Params(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ck, err := Checkpoint(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	build := time.Since(start)
	size, _ := Bytes(cfg, opts)

	const promptLen, decodeSteps = 16, 4
	start = time.Now()
	popts := pipeline.Options{MaxCache: promptLen + decodeSteps + 1, PrefillSizes: []int{promptLen}}
	if *realShapesDefaults {
		popts = pipeline.Options{}
	}
	be := cpu.New(cpu.Options{})
	defer be.Close()
	popts.Backend = be
	m, err := pipeline.FromCheckpoint(ctx, ck, popts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	load := time.Since(start)

	ids := prompt(promptLen, cfg.VocabSize)
	p := make([]int, len(ids))
	for i, id := range ids {
		p[i] = int(id)
	}
	sess := m.NewSession()
	n := 0
	for _, err := range sess.Generate(ctx, pipeline.Prompt{IDs: p}, pipeline.GenerateOptions{MaxTokens: decodeSteps + 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	mt := sess.Metrics()
	if n != decodeSteps+1 {
		t.Errorf("generated %d tokens, want %d (%+v)", n, decodeSteps+1, mt)
	}
	rss, peak := memStatus()
	t.Logf("%-15s %-5s %7.2fB %8.2fG %7.1fs %7.1fs %8.1fs %10.2f %10.3f %7.2fG %7.2fG",
		s.Name, opts.Quant, float64(params)/1e9, float64(size)/(1<<30), build.Seconds(), load.Seconds(),
		mt.TimeToFirstToken.Seconds(), mt.PrefillTokensPerSec, mt.DecodeTokensPerSec, rss, peak)
	// The pipeline does not expose logits: check those of one decode step
	// through a program of its own (the CPU backend aliases the weights, so
	// this costs one token).
	runSteps(ctx, t, be, ck, ids[:1], 0)
}

// memStatus reads the resident and peak resident set sizes in GiB from
// /proc/self/status (0 where unavailable).
func memStatus() (rss, peak float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			rss = kb / (1 << 20)
		case "VmHWM:":
			peak = kb / (1 << 20)
		}
	}
	return rss, peak
}
