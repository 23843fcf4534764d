package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// readCounter wraps a backend and counts the values its programs' Logits
// return and the Argmax and Sample graphs it compiles, so a test sees what crossed
// back to the host, not only the ids. It reports no batching and no
// RunSteps (Caps), so every sequence steps alone, one step per Run, and
// every value read comes back through Logits.
type readCounter struct {
	gpu.Backend
	device  bool // report a device backend (Caps().Host false): a CPU backend picks as a GPU would
	values  int
	argmaxs int
}

func (b *readCounter) Caps() gpu.Caps {
	c := b.Backend.Caps()
	if b.device {
		c.Host = false
	}
	c.Batch, c.MaxSteps = false, 0
	return c
}

func (b *readCounter) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	if slices.ContainsFunc(g.Ops, func(op fusion.Op) bool { return op.Kind() == fusion.Argmax || op.Kind() == fusion.Sample }) {
		b.argmaxs++
	}
	p, err := b.Backend.Compile(g, w, kv)
	if err != nil {
		return nil, err
	}
	return &countedProgram{Program: p, b: b}, nil
}

type countedProgram struct {
	gpu.Program
	b *readCounter
}

func (p *countedProgram) Logits(dst []float32) (int, error) {
	n, err := p.Program.Logits(dst)
	p.b.values += n
	return n, err
}

// openBackend opens a GPU backend, skipping without a driver (failing in CI).
func openBackend(t testing.TB, name string) gpu.Backend {
	t.Helper()
	b, err := gpurun.OpenBackend(context.Background(), name, gpurun.BackendOptions{})
	if err != nil && !errors.Is(err, gpu.ErrNoDevice) {
		t.Fatalf("%s: %v", name, err)
	}
	gputest.NoDevice(t, name, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// TestDeviceGreedy: greedy decoding on a GPU backend picks ids with the
// device's argmax, reading one value per decode step (the first token still
// comes from the prefill's logits row), and gives llama.cpp's golden ids,
// the same as host sampling, which reads a row per token. The CPU backend
// posing as a GPU checks the pipeline's side without a driver; sampling at
// a temperature reads one value per step too (fusion.Sample; see
// TestDeviceSampling for its ids), the CPU backend itself reads rows.
func TestDeviceGreedy(t *testing.T) {
	ck := storiesCheckpoint(t)
	vocab := ck.Config.VocabSize
	for _, tc := range []struct {
		backend string // "cpu-as-gpu": internal/backend/cpu reporting another name
		host    bool   // Options.HostSampling
		temp    float32
		device  bool // ids expected from the device (argmax or sampling)
	}{
		{"cpu-as-gpu", false, 0, true},
		{"cpu-as-gpu", true, 0, false},
		{"cpu-as-gpu", false, 0.7, true},
		{"cpu", false, 0, false},
		{"webgpu", false, 0, true},
		{"webgpu", true, 0, false},
		{"vulkan", false, 0, true},
		{"vulkan", true, 0, false},
	} {
		name := tc.backend
		if tc.host {
			name += "/host"
		}
		if tc.temp > 0 {
			name += "/sampled"
		}
		t.Run(name, func(t *testing.T) {
			rc := &readCounter{}
			switch tc.backend {
			case "cpu-as-gpu":
				rc.Backend, rc.device = cpu.New(cpu.Options{}), true
			case "cpu":
				rc.Backend = cpu.New(cpu.Options{})
			default:
				rc.Backend = openBackend(t, tc.backend)
			}
			m := load(t, ck, pipeline.Options{Backend: rc, MaxCache: 128, HostSampling: tc.host})
			compiled := rc.argmaxs
			for _, c := range testmodels.StoriesCases(t) {
				rc.values = 0
				s := m.NewSession()
				opts := pipeline.GenerateOptions{MaxTokens: len(c.GeneratedIDs), Temperature: tc.temp, Seed: 7, TopK: 40}
				got := collect(t, s, pipeline.Prompt{IDs: c.PromptIDs}, opts)
				if len(got) != len(c.GeneratedIDs) {
					t.Fatalf("%s: %d ids, want %d", c.Name, len(got), len(c.GeneratedIDs))
				}
				if tc.temp == 0 && !slices.Equal(got, c.GeneratedIDs) {
					t.Errorf("%s: ids\n got %v\nwant %v", c.Name, got, c.GeneratedIDs)
				}
				// Decode steps: every generated token after the first.
				steps := len(got) - 1
				want := vocab + steps*vocab
				if tc.device {
					want = vocab + steps
				}
				if rc.values != want {
					t.Errorf("%s: %d values read back for %d tokens, want %d", c.Name, rc.values, len(got), want)
				}
			}
			// Both picking programs are compiled at load; only the CPU
			// backend's sampling program, which cannot take a new rule in
			// its step tensor, is compiled again for the generations' rule.
			atLoad, after := 0, 0
			if tc.device {
				atLoad, after = 2, 2
				if tc.backend == "cpu-as-gpu" && tc.temp > 0 {
					after = 3
				}
			}
			if compiled != atLoad || rc.argmaxs != after {
				t.Errorf("picking programs: %d at load, %d after generating, want %d and %d", compiled, rc.argmaxs, atLoad, after)
			}
		})
	}
}

// TestDeviceSampling: with a fixed seed, temperature 0.8, top-k 40 and
// top-p 0.9, stories260K generates the same 64 tokens for each golden
// prompt on the CPU backend (internal/sampler on the host), on the CPU
// backend posing as a GPU (fusion.Sample in internal/backend/cpu) and on WebGPU and
// Vulkan (the sample kernel), the GPU backends reading back one id per
// decode step. The draws must matter: the tokens differ from greedy
// decoding's, and from another seed's.
func TestDeviceSampling(t *testing.T) {
	ck := storiesCheckpoint(t)
	vocab := ck.Config.VocabSize
	const n = 64
	opts := pipeline.GenerateOptions{MaxTokens: n, Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1234, IgnoreStopTokens: true}
	generate := func(t *testing.T, rc *readCounter, o pipeline.GenerateOptions) [][]int {
		// f32 activations: the sampled ids are compared with the CPU's,
		// and f16 activations (auto on Vulkan) move a draw near a
		// boundary (prompt 1 diverged at step 10 after the fuse6 merge).
		m := load(t, ck, pipeline.Options{Backend: rc, MaxCache: 128, Activations: "f32"})
		var out [][]int
		for _, c := range testmodels.StoriesCases(t) {
			rc.values = 0
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: c.PromptIDs}, o)
			if len(got) != n {
				t.Fatalf("%s: %d ids, want %d", c.Name, len(got), n)
			}
			if want := vocab + n - 1; !rc.Caps().Host {
				if rc.values != want {
					t.Errorf("%s: %d values read back, want %d (the prefill's row, then one id per step)", c.Name, rc.values, want)
				}
			}
			out = append(out, got)
		}
		return out
	}
	ref := generate(t, &readCounter{Backend: cpu.New(cpu.Options{})}, opts)
	greedy := opts
	greedy.Temperature = 0
	other := opts
	other.Seed++
	for i, g := range generate(t, &readCounter{Backend: cpu.New(cpu.Options{})}, greedy) {
		if slices.Equal(g, ref[i]) {
			t.Errorf("prompt %d: sampled ids equal greedy ones %v", i, g)
		}
	}
	for i, g := range generate(t, &readCounter{Backend: cpu.New(cpu.Options{})}, other) {
		if slices.Equal(g, ref[i]) {
			t.Errorf("prompt %d: seeds %d and %d gave the same ids %v", i, opts.Seed, other.Seed, g)
		}
	}
	for _, backend := range []string{"cpu-as-gpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			rc := &readCounter{}
			if backend == "cpu-as-gpu" {
				rc.Backend, rc.device = cpu.New(cpu.Options{}), true
			} else {
				rc.Backend = openBackend(t, backend)
			}
			for i, got := range generate(t, rc, opts) {
				if !slices.Equal(got, ref[i]) {
					t.Errorf("prompt %d: ids\n got %v\nwant %v (cpu)", i, got, ref[i])
				}
			}
			// Argmax and sampling programs at load; the CPU backend's,
			// which cannot take the rule in its step tensor, once more.
			want := 2
			if backend == "cpu-as-gpu" {
				want = 3
			}
			if rc.argmaxs != want {
				t.Errorf("%d picking programs compiled, want %d", rc.argmaxs, want)
			}
		})
	}
}
