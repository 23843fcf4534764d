// Package gpurun loads a language model from any file gpurun reads and
// generates text with it on the GPU (WebGPU or Vulkan) or the CPU.
//
// One call opens a model: a converted model file (.tflite) or .task bundle,
// a GGUF file, a llama2.c checkpoint, or a Hugging Face directory
// (config.json and *.safetensors). Checkpoints are imported in memory on the
// way; converting them first (gpurun convert) only saves that time.
//
//	m, err := gpurun.Open(ctx, "stories260K.task", gpurun.WithBackend("auto"))
//	if err != nil { ... }
//	defer m.Close()
//	s := m.NewSession()
//	for tok, err := range s.Generate(ctx, gpurun.Text("Once upon a time"), gpurun.GenerateOptions{}) {
//		if err != nil { ... }
//		fmt.Print(tok.Piece)
//	}
//	fmt.Println(s.Metrics().StopReason)
//
// The zero GenerateOptions decodes greedily until a stop token or a full
// KV cache; set Temperature (TopK, TopP, Seed) to sample. It is the one
// options type of every entry point (package pipeline and the server take
// the same). Options out of range are errors (ErrOptions), never silently
// clamped.
//
// A Session is one conversation: each Generate continues it, reusing the KV
// cache for everything already said. Sessions of one Model share its KV
// cache, taking turns, unless WithParallel gives it one per concurrent
// session. For chat models, package pipeline/chat renders the model's
// chat template and manages the turns.
//
// OpenBackend opens a backend by name, the choice WithBackend makes, as a
// gpu.Backend: compile and run package fusion's op graphs on it directly,
// or hand it to package pipeline, which runs a model on a backend its
// caller gives it (Model.Pipeline is that layer's view of an opened
// model, for packages pipeline/chat and pipeline/serve).
//
// Import it to run a model from a Go program: open any checkpoint or model
// file on the best backend, generate, chat, serve; most users need nothing
// else.
package gpurun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/convert"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// File formats Open reads (Model.Format).
const (
	FormatModelFile = "tflite"  // a gpurun model file (TFLite flatbuffer)
	FormatTask      = "task"    // a .task bundle: model file and tokenizer
	FormatGGUF      = "gguf"    // a GGUF file (llama.cpp)
	FormatLlama2c   = "llama2c" // a llama2.c checkpoint (.bin)
	FormatHF        = "hf"      // a Hugging Face directory (config.json, *.safetensors)
)

// Errors callers can test for with errors.Is. They are the same values
// as package pipeline's, so a test against either matches; test these.
var (
	// ErrOptions: an Open or Generate option out of its range.
	ErrOptions = pipeline.ErrOptions
	// ErrSpeculation: GenerateOptions.Speculation out of range (also
	// ErrOptions).
	ErrSpeculation = pipeline.ErrSpeculation
	// ErrNoTokenizer: a text prompt on a model without a usable tokenizer.
	ErrNoTokenizer = pipeline.ErrNoTokenizer
	// ErrPrompt: an empty prompt, or token ids outside the vocabulary.
	ErrPrompt = pipeline.ErrPrompt
	// ErrPromptTooLong: the conversation with the prompt does not fit in the
	// KV cache (WithMaxCache).
	ErrPromptTooLong = pipeline.ErrPromptTooLong
	// ErrClosed: a Generate on a closed model.
	ErrClosed = pipeline.ErrClosed
	// ErrNotEmbedding: Embed on a model that declares no pooling.
	ErrNotEmbedding = pipeline.ErrNotEmbedding
	// ErrActivations: an unknown WithActivations policy.
	ErrActivations = pipeline.ErrActivations
	// ErrUnknownFormat: a path that is none of the formats Open reads.
	ErrUnknownFormat = checkpoint.ErrUnknownFormat
	// ErrUnsupported: what the model needs that the backend cannot run
	// (an op, a weight type, a size over the device's limits).
	ErrUnsupported = gpu.ErrUnsupported
	// ErrNoDevice: the named backend found no usable device.
	ErrNoDevice = gpu.ErrNoDevice
)

// Option configures Open.
type Option func(*openOptions)

type openOptions struct {
	backendName  string
	device       string
	backend      gpu.Backend
	maxCache     int
	pastContext  bool  // WithCacheBeyondContext
	memoryLimit  int64 // WithMemoryLimit; 0: the device's
	parallel     int
	activations  string
	tokenizer    string
	noFusion     bool
	hostSampling bool
	steps        int
	prefill      []int
	cpuMath      string
	prefixCache  int64
	progress     func(Progress)
	lora         []lora.Spec // WithLoRA, in order
	loraRequant  bool
	loraUnmerged bool
	loraApplied  []lora.Applied // the adapters loaded, when unmerged
	adapters     []namedAdapter // WithAdapter, in order
	mmproj       string         // WithMMProj
	cacheK       string         // WithCacheTypes
	cacheV       string
}

// WithMMProj gives the model a vision or audio projector: a GGUF of
// llama.cpp's clip format ("mmproj"; projector type gemma3 or lfm2 for
// images, qwen2a for audio) that fits it, so that prompts carry images
// (Prompt.Images) or WAV files (Prompt.Audio), one per
// pipeline.MediaMarker of the text. The encoder and the media steps run
// on the model's backend, CPU, WebGPU or Vulkan.
func WithMMProj(path string) Option { return func(o *openOptions) { o.mmproj = path } }

// WithBackend picks the backend by name: "auto" (the default: a real GPU
// through Vulkan when there is one, otherwise the CPU; the CPU for a
// mixture of experts, which the GPU backends do not run yet), "cpu",
// "webgpu" or "vulkan". The model opens it and closes it with itself.
func WithBackend(name string) Option { return func(o *openOptions) { o.backendName = name } }

// WithDevice picks the device within the backend WithBackend names
// ("cpu", "webgpu" or "vulkan"; not "auto"): its index as `gpurun devices`
// lists them, or a case-insensitive part of its name.
func WithDevice(sel string) Option { return func(o *openOptions) { o.device = sel } }

// WithGPUBackend runs the model on a backend the caller opened (see
// OpenBackend) and closes; several models can share it.
func WithGPUBackend(b gpu.Backend) Option { return func(o *openOptions) { o.backend = b } }

// WithMaxCache sets the KV cache length in tokens: at least 1 and at most
// the model's trained context length. Without it the cache holds
// pipeline.DefaultMaxCache (1280) tokens, or the model's context if shorter.
func WithMaxCache(n int) Option { return func(o *openOptions) { o.maxCache = n } }

// WithCacheBeyondContext lets WithMaxCache exceed the model's trained
// context length, as llama.cpp lets -c do: positions past it get rotary
// angles the model never saw, so what it generates there degrades, but a
// step costs what it costs at that context. Benchmarks of long contexts
// on a model trained on a short one (bench's tests at a depth) use it.
func WithCacheBeyondContext() Option { return func(o *openOptions) { o.pastContext = true } }

// WithParallel gives the model n KV caches (1..pipeline.MaxSlots) over its
// one copy of the weights, so that n sessions generate at once, each on its
// own cache; more wait their turn. Without it the model has one.
func WithParallel(n int) Option { return func(o *openOptions) { o.parallel = n } }

// WithPrefixCache keeps the KV caches of finished generations up to bytes
// (device memory on a GPU; pipeline.DefaultPrefixCacheBytes is the command
// line's default), the least recently used dropped first, so that a later
// session whose context starts with kept tokens, such as a shared system
// prompt, prefills only the rest (pipeline.Options.PrefixCacheBytes).
// Without it only each slot's own cache is reused.
func WithPrefixCache(bytes int64) Option { return func(o *openOptions) { o.prefixCache = bytes } }

// WithActivations overrides the model's activation precision policy:
// "auto" (f16 KV cache on GPU backends, f32 on the CPU), "f32" or "f16".
func WithActivations(policy string) Option {
	return func(o *openOptions) { o.activations = policy }
}

// WithCacheTypes chooses the KV cache's key and value types by
// llama.cpp's names (its -ctk and -ctv; fusion.KVTypeNames): q8_0, q4_0,
// q4_1, q5_0, q5_1 or iq4_nl quantize them in llama.cpp's blocks, rotated
// as llama.cpp rotates them where the head dim is a multiple of 64 (the
// CPU backend; the GPU backends refuse them, ErrOptions). "" keeps the
// float cache, whose precision the activation policy decides (f16 on the
// GPU backends, f32 on the CPU; WithActivations); "f16" and "f32" name
// that float cache and fail to load where the policy resolves to the
// other precision.
func WithCacheTypes(k, v string) Option {
	return func(o *openOptions) { o.cacheK, o.cacheV = k, v }
}

// WithTokenizer gives a tokenizer file (SentencePiece .model, Hugging Face
// tokenizer.json or llama2.c tokenizer.bin) for a checkpoint that carries none, such as a llama2.c
// .bin. Model files and bundles carry theirs.
func WithTokenizer(path string) Option { return func(o *openOptions) { o.tokenizer = path } }

// WithoutFusion compiles the forward graphs unfused, one op per kernel (for
// comparison; the results agree).
func WithoutFusion() Option { return func(o *openOptions) { o.noFusion = true } }

// WithHostSampling reads the whole logits row back for greedy decoding on a
// GPU rather than only the id the device picked (for comparison).
func WithHostSampling() Option { return func(o *openOptions) { o.hostSampling = true } }

// WithStepsPerSubmit sets how many decode steps one GPU submission runs
// when the device picks the tokens (1..the backend's gpu.Caps.MaxSteps, 64
// on the GPU backends; without it pipeline.DefaultStepsPerSubmit; a
// window's first submissions run 1, 2, 4, ... steps up to it): the ids
// come back together and are still streamed one by one, with stop strings
// and cancellation checked between them. The CPU backend steps one token
// at a time.
func WithStepsPerSubmit(n int) Option { return func(o *openOptions) { o.steps = n } }

// WithPrefillSizes sets the token counts of the compiled prefill programs
// (default pipeline.DefaultPrefillSizes): a prompt runs in chunks of at
// most the largest, one submission each. Smaller chunks bound the time
// one submission takes on a slow device (a long prompt on a software
// GPU).
func WithPrefillSizes(sizes ...int) Option {
	return func(o *openOptions) { o.prefill = append([]int(nil), sizes...) }
}

// WithCPUMath sets the CPU backend's arithmetic for int8/int4 and K-quant weights:
// "dynamic" (the default, DefaultCPUMath: inputs quantized to
// int8 blocks as llama.cpp does, integer dot products) or "exact" (f32
// inputs times dequantized weights, the reference). A backend given with
// WithGPUBackend keeps its own.
func WithCPUMath(name string) Option { return func(o *openOptions) { o.cpuMath = name } }

// Progress reports Open's stages: "import" (reading a checkpoint into
// memory), "lora" (merging WithLoRA's adapters), "load" (uploading weights and compiling) and, last, "done"
// (whether Open succeeded or not).
type Progress struct {
	Stage string
}

// WithProgress calls f as Open moves from stage to stage.
func WithProgress(f func(Progress)) Option { return func(o *openOptions) { o.progress = f } }

// Model is a loaded model on a backend. Its methods are safe for concurrent
// use; generations of its sessions run at once up to WithParallel's count,
// the others wait.
type Model struct {
	pm          *pipeline.Model
	path        string
	format      string
	template    string
	noTokReason string
	backend     gpu.Backend // closed with the model, nil when the caller owns it
	variants    map[string]*pipeline.Model
	variantOf   *Model // the model that owns this variant (Variants), nil for a model Open returned
}

// Open loads the model at path (any format Open reads: see the package
// documentation) on the backend the options name, "auto" by default. It
// checks the options against the model before allocating anything.
func Open(ctx context.Context, path string, opts ...Option) (*Model, error) {
	o, err := newOpenOptions(opts)
	if err != nil {
		return nil, err
	}
	defer o.report("done")
	src, err := readSource(path, &o)
	if err != nil {
		return nil, err
	}
	if err := mergeLoRA(src, &o); err != nil {
		src.close()
		return nil, err
	}
	m, err := open(ctx, src, &o)
	if err != nil {
		src.close()
		return nil, err
	}
	m.path = path
	return m, nil
}

// OpenCheckpoint loads a checkpoint in memory (LoadCheckpoint's, or one
// built with package tensors/model) like Open loads a file. WithTokenizer
// does not apply.
func OpenCheckpoint(ctx context.Context, ck *model.Checkpoint, opts ...Option) (*Model, error) {
	o, err := newOpenOptions(opts)
	if err != nil {
		return nil, err
	}
	if ck == nil {
		return nil, fmt.Errorf("%w: nil checkpoint", ErrOptions)
	}
	defer o.report("done")
	src := &source{ck: ck}
	if len(o.lora) > 0 {
		// Merging replaces tensors: the caller's checkpoint stays as it is.
		c := *ck
		c.Tensors = slices.Clone(ck.Tensors)
		src.ck = &c
		if err := mergeLoRA(src, &o); err != nil {
			return nil, err
		}
	}
	return open(ctx, src, &o)
}

func (o *openOptions) report(stage string) {
	if o.progress != nil {
		o.progress(Progress{Stage: stage})
	}
}

func newOpenOptions(opts []Option) (openOptions, error) {
	o := openOptions{backendName: "auto", cpuMath: DefaultCPUMath.String()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxCache < 0 || o.maxCache > pipeline.MaxCacheLimit {
		return o, fmt.Errorf("%w: max cache %d outside 1..%d", ErrOptions, o.maxCache, pipeline.MaxCacheLimit)
	}
	if o.parallel < 0 || o.parallel > pipeline.MaxSlots {
		return o, fmt.Errorf("%w: parallel %d outside 1..%d", ErrOptions, o.parallel, pipeline.MaxSlots)
	}
	if !validBackend(o.backendName) && o.backend == nil {
		return o, fmt.Errorf("%w: backend %q, want one of %s", ErrOptions, o.backendName, strings.Join(BackendNames, ", "))
	}
	if _, err := cpu.ParseMath(o.cpuMath); err != nil {
		return o, fmt.Errorf("%w: cpu math %q, want one of %s", ErrOptions, o.cpuMath, strings.Join(cpu.MathNames, ", "))
	}
	switch o.activations {
	case "", model.PolicyAuto, model.PolicyF32, model.PolicyF16:
	default:
		return o, fmt.Errorf("%w: activations %q, want auto, f32 or f16", ErrOptions, o.activations)
	}
	return o, nil
}

// open loads src on the backend; on error the caller closes src.
func open(ctx context.Context, src *source, o *openOptions) (*Model, error) {
	cfg := src.config()
	if o.maxCache > 0 && cfg.MaxSeqLen > 0 && o.maxCache > cfg.MaxSeqLen && !o.pastContext {
		return nil, fmt.Errorf("%w: max cache %d exceeds the model's context length %d (want 1..%d)", ErrOptions, o.maxCache, cfg.MaxSeqLen, cfg.MaxSeqLen)
	}
	o.report("load")
	m := &Model{format: src.format, template: src.template, noTokReason: src.noTokReason}
	b := o.backend
	math, err := cpu.ParseMath(o.cpuMath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if b == nil {
		if b, err = OpenBackend(ctx, o.backendName, BackendOptions{Device: o.device, CPU: cpu.Options{Math: math}}); err != nil {
			return nil, fmt.Errorf("backend %s: %w", o.backendName, err)
		}
		m.backend = b
	}
	info := b.Info()
	policy := o.activations
	if policy == "" {
		policy = cfg.Activations
	}
	kvF16 := policy == model.PolicyF16 || (policy != model.PolicyF32 && !b.Caps().Host)
	cacheK, cacheV, err := cacheTypes(o.cacheK, o.cacheV, kvF16)
	if err != nil {
		if m.backend != nil {
			m.backend.Close()
		}
		return nil, err
	}
	var sets [][]lora.Applied // the variants' adapter sets (WithAdapter)
	if len(o.adapters) > 0 {
		if sets, err = adapterSets(src, o); err != nil {
			if m.backend != nil {
				m.backend.Close()
			}
			return nil, err
		}
	}
	need := estimateMemory(&cfg, weightBytes(src.tensors()), o.maxCache, kvF16, cacheK, cacheV)
	// Every slot has its own cache and programs, and so does every slot
	// of every variant.
	copies := int64(max(o.parallel, 1)) * int64(max(len(sets), 1))
	need.KVCache *= copies
	need.Activations *= copies
	need.Adapters = adapterBytes(o.loraApplied)
	if sets != nil {
		need.Adapters = 0
		for _, set := range sets {
			need.Adapters += adapterBytes(set)
		}
	}
	if err := checkMemory(info, b.Caps(), need, src.file == nil, o.memoryLimit); err != nil {
		if m.backend != nil {
			m.backend.Close()
		}
		return nil, err
	}
	popts := pipeline.Options{Backend: b, MaxCache: o.maxCache, Slots: o.parallel, Activations: o.activations, NoFusion: o.noFusion, HostSampling: o.hostSampling, StepsPerSubmit: o.steps, PrefillSizes: o.prefill, PrefixCacheBytes: o.prefixCache, LoRA: o.loraApplied, MMProj: o.mmproj,
		CacheTypeK: cacheK, CacheTypeV: cacheV}
	if len(o.adapters) > 0 {
		err = m.openVariants(ctx, src, o, popts, sets)
	} else if src.file != nil {
		m.pm, err = pipeline.FromModelFile(ctx, src.file, popts)
	} else {
		m.pm, err = pipeline.FromCheckpoint(ctx, src.ck, popts)
	}
	if err != nil {
		if m.backend != nil {
			m.backend.Close()
		}
		return nil, err
	}
	return m, nil
}

func validBackend(name string) bool {
	for _, n := range BackendNames {
		if n == name {
			return true
		}
	}
	return false
}

// Close releases the model and the backend Open opened for it.
func (m *Model) Close() error {
	if m.variantOf != nil {
		return nil
	}
	err := m.pm.Close()
	for _, v := range m.variants {
		err = errors.Join(err, v.Close())
	}
	m.variants = nil
	if m.backend != nil {
		err = errors.Join(err, m.backend.Close())
		m.backend = nil
	}
	return err
}

// Path is the file or directory the model was opened from.
func (m *Model) Path() string { return m.path }

// Format is the format the model was read from: FormatModelFile,
// FormatTask, FormatGGUF, FormatLlama2c or FormatHF.
func (m *Model) Format() string { return m.format }

// ChatTemplate is the model's chat template (Jinja source, from GGUF
// tokenizer.chat_template or Hugging Face tokenizer_config.json), or "".
func (m *Model) ChatTemplate() string { return m.template }

// TokenizerProblem says why a model has no tokenizer ("" when it has one,
// or when nothing more is known than that the file carries none).
func (m *Model) TokenizerProblem() string { return m.noTokReason }

// weightBytes is the size of the weights as stored (quantized types count
// their packed size).
func weightBytes(ts []*tensors.Tensor) int64 {
	var n int64
	for _, t := range ts {
		n += int64(len(t.Data))
		if t.Scales != nil {
			n += int64(len(t.Scales.Data))
		}
	}
	return n
}

// source is what Open read: a mapped model file or an imported checkpoint.
type source struct {
	format      string
	file        *modelfile.File
	ck          *model.Checkpoint
	template    string
	noTokReason string
}

func (s *source) config() model.Config {
	if s.file != nil {
		return s.file.Config()
	}
	return s.ck.Config
}

func (s *source) tensors() []*tensors.Tensor {
	if s.file != nil {
		return s.file.Tensors()
	}
	return s.ck.Tensors
}

func (s *source) close() {
	if s.file != nil {
		s.file.Close()
	}
}

// readSource opens path as a model file when its content is one (a TFL3
// flatbuffer or a zip bundle) and imports it as a checkpoint otherwise.
func readSource(path string, o *openOptions) (*source, error) {
	kind, err := sniff(path)
	if err != nil {
		return nil, err
	}
	if kind != "" {
		if o.tokenizer != "" {
			return nil, fmt.Errorf("%w: %s is a model file with its own tokenizer (or none); a tokenizer is given only with a checkpoint (bundle one with gpurun bundle)", ErrOptions, path)
		}
		f, err := modelfile.Open(path)
		if err != nil {
			return nil, err
		}
		if !f.HasConfig() {
			f.Close()
			return nil, fmt.Errorf("%w: %s", pipeline.ErrNoConfig, path)
		}
		src := &source{format: kind, file: f}
		if t, ok := f.Metadata(convert.MetaChatTemplate); ok {
			src.template = string(t)
		}
		return src, nil
	}
	format, err := checkpoint.Detect(path)
	if err != nil {
		return nil, err
	}
	o.report("import")
	ck, err := checkpoint.Load(path, checkpoint.Options{Format: format, Tokenizer: o.tokenizer})
	if err != nil {
		return nil, err
	}
	src := &source{format: format, ck: ck}
	switch format {
	case checkpoint.FormatGGUF:
		src.template, src.noTokReason = ggufExtras(path, ck)
	case checkpoint.FormatHF:
		src.template = hfChatTemplate(path)
	case checkpoint.FormatLlama2c:
		if ck.Tokenizer == nil && ck.Vocab == nil {
			src.noTokReason = "a llama2.c checkpoint carries no tokenizer: give one (a SentencePiece .model or llama2.c tokenizer.bin)"
		}
	}
	return src, nil
}

// sniff returns FormatModelFile or FormatTask when path's content is a
// model file or a bundle, "" when it is something else.
func sniff(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case n >= 4 && string(head[:4]) == "PK\x03\x04":
		return FormatTask, nil
	case n >= 8 && string(head[4:8]) == "TFL3":
		return FormatModelFile, nil
	}
	return "", nil
}

// ggufExtras reads what the import leaves out: the chat template and, for a
// vocabulary the tokenizer cannot use, the reason.
func ggufExtras(path string, ck *model.Checkpoint) (template, noTok string) {
	f, err := gguf.Open(path)
	if err != nil {
		return "", ""
	}
	if v, ok := f.Get("tokenizer.chat_template"); ok {
		template, _ = v.Str()
	}
	if ck.Tokenizer == nil && ck.Vocab == nil {
		kind := ""
		if v, ok := f.Get("tokenizer.ggml.model"); ok {
			kind, _ = v.Str()
		}
		// Vocabularies gpurun reads (llama, t5, gpt2, gemma4) are imported, and
		// unknown kinds fail the import; what is left is no vocabulary.
		switch kind {
		case "":
			noTok = "the GGUF file has no tokenizer.ggml vocabulary"
		default:
			noTok = fmt.Sprintf("its GGUF vocabulary kind is %q", kind)
		}
	}
	return template, noTok
}

// ChatTemplateOf reads the chat template a checkpoint carries: a GGUF
// file's tokenizer.chat_template or a Hugging Face directory's
// tokenizer_config.json chat_template ("" when there is none).
func ChatTemplateOf(path string) string {
	switch format, _ := checkpoint.Detect(path); format {
	case checkpoint.FormatGGUF:
		if f, err := gguf.Open(path); err == nil {
			if v, ok := f.Get("tokenizer.chat_template"); ok {
				s, _ := v.Str()
				return s
			}
		}
	case checkpoint.FormatHF:
		return hfChatTemplate(path)
	}
	return ""
}

// hfChatTemplate reads chat_template from a Hugging Face directory's
// tokenizer_config.json: a string, or a list of named templates of which
// "default" is taken.
func hfChatTemplate(path string) string {
	dir := path
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return ""
	}
	return chatTemplateJSON(data)
}
