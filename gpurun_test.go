package gpurun

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
)

// smallDevice is the CPU backend posing as a device with little memory; it
// records whether anything was allocated on it.
type smallDevice struct {
	gpu.Backend
	memory int64
	loaded bool
}

func (d *smallDevice) Info() gpu.Info {
	i := d.Backend.Info()
	i.Backend, i.Name, i.Type, i.MemoryBytes = "vulkan", "tiny GPU", gpu.Discrete, d.memory
	return i
}

// Caps: a device backend (not Host), as a GPU backend is.
func (d *smallDevice) Caps() gpu.Caps {
	c := d.Backend.Caps()
	c.Host = false
	return c
}

func (d *smallDevice) LoadWeights(ctx context.Context, ws []*tensors.Tensor) (gpu.Weights, error) {
	d.loaded = true
	return d.Backend.LoadWeights(ctx, ws)
}

// TestMemoryCheck: a model that does not fit the device fails before any
// allocation, naming the sizes; one that fits loads.
func TestMemoryCheck(t *testing.T) {
	path := testmodels.Path(t, "stories260K.bin")
	dev := &smallDevice{Backend: cpu.New(cpu.Options{}), memory: 1 << 20}
	_, err := Open(context.Background(), path, WithGPUBackend(dev))
	if !errors.Is(err, ErrTooBig) || dev.loaded {
		t.Fatalf("1 MiB device: %v (allocated: %v)", err, dev.loaded)
	}
	// stories260K: 1,040,128 bytes of f32 weights (the .bin without its
	// header and RoPE tables); an f16 cache (a GPU
	// backend's default) of 5 layers x K,V x 4 heads x 8 dims x 512
	// positions x 2 bytes.
	for _, want := range []string{"weights 1015.8 KiB", "KV cache 320.0 KiB", "activations about", "vulkan device tiny GPU has 1.0 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	dev.memory = 64 << 20
	m, err := Open(context.Background(), path, WithGPUBackend(dev))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	// A software device's heap is host memory: the host's is what counts.
	cpuDev := &smallDevice{Backend: cpu.New(cpu.Options{}), memory: 1 << 20}
	m, err = Open(context.Background(), path, WithGPUBackend(softDevice{cpuDev}))
	if err != nil {
		t.Fatalf("a software device with a nominal 1 MiB heap: %v", err)
	}
	m.Close()
}

// softDevice is a device of type gpu.CPU, as lavapipe is.
type softDevice struct{ *smallDevice }

func (d softDevice) Info() gpu.Info {
	i := d.smallDevice.Info()
	i.Type = gpu.CPU
	return i
}

// TestOpenOptionErrors: options out of range fail before anything is read.
func TestOpenOptionErrors(t *testing.T) {
	path := testmodels.Path(t, "stories260K.bin")
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithMaxCache(-1), "max cache -1 outside 1..16777216"},
		{WithMaxCache(513), "max cache 513 exceeds the model's context length 512 (want 1..512)"},
		{WithBackend("gpu"), `backend "gpu", want one of auto, cpu, webgpu, vulkan`},
		{WithActivations("bf16"), `activations "bf16", want auto, f32 or f16`},
		{WithDevice("3"), "the cpu backend has one device"},
	} {
		opts := []Option{tc.opt}
		if tc.want == "the cpu backend has one device" {
			opts = append(opts, WithBackend("cpu"))
		}
		_, err := Open(context.Background(), path, opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	if _, err := Open(context.Background(), testmodels.Path(t, "NOTICE.md")); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("a text file: %v", err)
	}
}

func TestChatTemplateJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"chat_template": "{{ x }}"}`, "{{ x }}"},
		{`{"chat_template": [{"name": "tool_use", "template": "a"}, {"name": "default", "template": "b"}]}`, "b"},
		{`{"chat_template": [{"name": "rag", "template": "c"}]}`, "c"},
		{`{"bos_token": "<s>"}`, ""},
		{`not json`, ""},
	} {
		if got := chatTemplateJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGGUFChatTemplate: a GGUF's tokenizer.chat_template is the model's
// chat template.
func TestGGUFChatTemplate(t *testing.T) {
	tpl := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	path := testmodels.GGUFWithString(t, testmodels.Path(t, "arch", "llama.gguf"), "tokenizer.chat_template", tpl)
	m, err := Open(context.Background(), path, WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.ChatTemplate(); got != tpl {
		t.Errorf("chat template %q, want %q", got, tpl)
	}
}

// TestMemoryCheckMoE: a mixture of experts counts every expert's weights
// (all are stored, though a token reads only its experts'): the weights
// the check names are the sum of llama.cpp's tensor list for the tiny
// qwen3moe (all F32), rope tables aside.
func TestMemoryCheckMoE(t *testing.T) {
	g := testmodels.Arch2(t, "qwen3moe")
	var want int64
	for name, dims := range g.Tensors {
		if strings.HasPrefix(name, "rope_") {
			continue
		}
		n := int64(4)
		for _, d := range dims {
			n *= int64(d)
		}
		want += n
	}
	dev := &smallDevice{Backend: cpu.New(cpu.Options{}), memory: 1 << 20}
	_, err := Open(context.Background(), testmodels.Path(t, "arch2", "qwen3moe.gguf"), WithGPUBackend(dev))
	if !errors.Is(err, ErrTooBig) || dev.loaded {
		t.Fatalf("1 MiB device: %v (allocated: %v)", err, dev.loaded)
	}
	if s := "weights " + humanBytes(want); !strings.Contains(err.Error(), s) {
		t.Errorf("error %q lacks %q (%d bytes)", err, s, want)
	}
}

// TestMemoryCheckAdapters: served adapters (WithAdapter) count in the load
// check: every variant's KV caches (three variants of the tiny llama with
// two slots each: six caches) and the adapters' F32 matrices, as loaded.
func TestMemoryCheckAdapters(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	path := testmodels.Path(t, "arch", "llama.gguf")
	ck, err := gguf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var adapters int64
	for _, name := range []string{"llama_r4", "llama_r16"} {
		a, err := checkpoint.LoadLoRA(filepath.Join(dir, name+".gguf"), &ck.Config)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range a.Pairs {
			adapters += 4 * int64(len(p.A)+len(p.B))
		}
	}
	c := ck.Config
	const maxCache, slots = 64, 2
	kv := int64(c.Layers) * 2 * int64(c.KVHeads*c.HeadDim) * maxCache * 2 // f16, the GPU default
	dev := &smallDevice{Backend: cpu.New(cpu.Options{}), memory: 1 << 10}
	_, err = Open(context.Background(), path, WithGPUBackend(dev), WithMaxCache(maxCache), WithParallel(slots),
		WithAdapter("a", filepath.Join(dir, "llama_r4.gguf"), 1), WithAdapter("b", filepath.Join(dir, "llama_r16.gguf"), 0.5))
	if !errors.Is(err, ErrTooBig) || dev.loaded {
		t.Fatalf("1 KiB device: %v (allocated: %v)", err, dev.loaded)
	}
	for _, want := range []string{"KV cache " + humanBytes(3*slots*kv), "unmerged adapters " + humanBytes(adapters)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// The bare model alone needs neither.
	_, err = Open(context.Background(), path, WithGPUBackend(dev), WithMaxCache(maxCache), WithParallel(slots))
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "KV cache "+humanBytes(slots*kv)) || strings.Contains(err.Error(), "adapters") {
		t.Errorf("bare model: %v", err)
	}
}
