//go:build js

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall/js"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/webgpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// yieldEvery is how often a generation on a backend that never waits for
// the browser (the CPU) hands the event loop a turn.
const yieldEvery = 15 * time.Millisecond

// chunkBytes is how much of the file one read brings into wasm memory.
const chunkBytes = 8 << 20

// state is the page's one model; calls take turns on mu.
type state struct {
	mu      sync.Mutex
	model   *pipeline.Model
	tpl     *chat.Template
	backend gpu.Backend
	// backendName is the backend load asked for when it opened backend,
	// and dev its WebGPU device (nil on the CPU). A load asking for the
	// same keeps both, and with them the kernels backend compiled for the
	// previous model: loading the same model again compiles nothing.
	backendName string
	dev         *webgpu.Device
	cancel      context.CancelFunc // the running generation's
	cmu         sync.Mutex         // guards cancel (stop must not wait for mu)
}

func main() {
	s := &state{}
	api := js.Global().Get("Object").New()
	api.Set("load", promiseFunc(s.load))
	api.Set("generate", promiseFunc(s.generate))
	api.Set("chat", promiseFunc(s.chat))
	api.Set("profile", promiseFunc(s.profile))
	api.Set("timeDecode", promiseFunc(s.timeDecode))
	api.Set("stop", js.FuncOf(func(js.Value, []js.Value) any {
		s.cmu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.cmu.Unlock()
		return nil
	}))
	api.Set("maxModelBytes", MaxModelBytes)
	visionAPI(s, api)
	js.Global().Set("gpurun", api)
	if ready := js.Global().Get("gpurunReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // serve calls until the page goes away
}

// promiseFunc wraps f as a JS function returning a Promise that f settles
// from a goroutine of its own, off the event loop.
func promiseFunc(f func(args []js.Value) (any, error)) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) any {
		var resolve, reject js.Value
		executor := js.FuncOf(func(_ js.Value, a []js.Value) any {
			resolve, reject = a[0], a[1]
			return nil
		})
		p := js.Global().Get("Promise").New(executor)
		executor.Release()
		go func() {
			var v any
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("gpurun: internal error: %v", r)
					}
				}()
				v, err = f(args)
			}()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(v)
		}()
		return p
	})
}

// await blocks the calling goroutine (never the event loop's) until the
// promise settles.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- result{v: a[0]}; return nil })
	fail := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- result{err: errors.New(a[0].Call("toString").String())}
		return nil
	})
	defer ok.Release()
	defer fail.Release()
	p.Call("then", ok, fail)
	r := <-ch
	return r.v, r.err
}

// yieldToLoop lets the JS event loop run a turn (a setTimeout of 0).
func yieldToLoop() {
	ch := make(chan struct{})
	f := js.FuncOf(func(js.Value, []js.Value) any { close(ch); return nil })
	js.Global().Call("setTimeout", f, 0)
	<-ch
	f.Release()
}

// readBlob copies the blob into one Go slice, chunk by chunk, reporting
// progress: the only copy of the file the page keeps.
func readBlob(blob js.Value, progress js.Value) ([]byte, error) {
	size := int64(blob.Get("size").Float())
	if err := checkSize(size); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	for off := int64(0); off < size; {
		end := min(off+chunkBytes, size)
		ab, err := await(blob.Call("slice", off, end).Call("arrayBuffer"))
		if err != nil {
			return nil, fmt.Errorf("read bytes %d..%d: %w", off, end, err)
		}
		if n := js.CopyBytesToGo(data[off:end], js.Global().Get("Uint8Array").New(ab)); int64(n) != end-off {
			return nil, fmt.Errorf("read bytes %d..%d: got %d", off, end, n)
		}
		off = end
		if progress.Type() == js.TypeFunction {
			progress.Invoke(off, size)
		}
	}
	return data, nil
}

// headBytes is the first read of a GGUF file's header; it doubles until the
// header (metadata, vocabulary, tensor infos) parses.
const headBytes = 1 << 20

// blobReader reads byte ranges of a Blob into new Go slices, chunkBytes at a
// time, counting the bytes read for the progress bar.
type blobReader struct {
	blob     js.Value
	progress js.Value
	done     int64
	total    int64 // what progress counts up to
}

func (r *blobReader) read(off, n int64) ([]byte, error) {
	out := make([]byte, n)
	for at := int64(0); at < n; {
		end := min(at+chunkBytes, n)
		ab, err := await(r.blob.Call("slice", off+at, off+end).Call("arrayBuffer"))
		if err != nil {
			return nil, fmt.Errorf("read bytes %d..%d: %w", off+at, off+end, err)
		}
		if got := js.CopyBytesToGo(out[at:end], js.Global().Get("Uint8Array").New(ab)); int64(got) != end-at {
			return nil, fmt.Errorf("read bytes %d..%d: got %d", off+at, off+end, got)
		}
		r.done += end - at
		at = end
		if r.total > 0 && r.progress.Type() == js.TypeFunction {
			r.progress.Invoke(min(r.done, r.total), r.total)
		}
	}
	return out, nil
}

// openGGUF parses a GGUF blob from its head, its tensors left in the blob
// until the backend takes them.
func openGGUF(blob, progress js.Value) (*gguf.File, error) {
	size := int64(blob.Get("size").Float())
	r := &blobReader{blob: blob, progress: progress}
	for n := min(int64(headBytes), size); ; n = min(2*n, size) {
		head, err := r.read(0, n)
		if err != nil {
			return nil, err
		}
		f, err := gguf.ParseHead(head, size, r.read)
		if errors.Is(err, io.ErrUnexpectedEOF) && n < size {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.done, r.total = 0, size-f.DataOffset
		return f, nil
	}
}

// openBackend opens the page's WebGPU adapter, or the CPU backend when the
// page has none (or name is "cpu"); dev is the WebGPU device (nil on the
// CPU), which closing the backend leaves open.
func openBackend(ctx context.Context, name string) (b gpu.Backend, dev *webgpu.Device, err error) {
	switch name {
	case "cpu":
		return cpu.New(cpu.Options{}), nil, nil
	case "webgpu", "auto", "":
		dev, err := openPageWebGPU(ctx)
		if err == nil {
			return compute.New(dev), dev, nil
		}
		if name == "webgpu" {
			return nil, nil, fmt.Errorf("the page's WebGPU: %w", err)
		}
		js.Global().Get("console").Call("log", "gpurun: no WebGPU on this page ("+err.Error()+"), using the CPU backend")
		return cpu.New(cpu.Options{}), nil, nil
	}
	return nil, nil, fmt.Errorf("unknown backend %q (want auto, webgpu or cpu)", name)
}

// openPageWebGPU opens the page's WebGPU device, saying in the page's
// terms (navigator.gpu, the browser's adapter) why there is none.
func openPageWebGPU(ctx context.Context) (*webgpu.Device, error) {
	g := js.Global().Get("navigator").Get("gpu")
	if !g.Truthy() {
		return nil, errors.New("this browser gives the page no WebGPU (navigator.gpu is missing: an old browser, WebGPU turned off, or a page not served over https or localhost)")
	}
	if a, err := await(g.Call("requestAdapter")); err != nil || !a.Truthy() {
		return nil, fmt.Errorf("the browser's WebGPU offers the page no adapter (navigator.gpu.requestAdapter gave %v, %v: WebGPU may be blocked for this GPU or driver)", a, err)
	}
	return webgpu.OpenDevice(ctx)
}

// backendFor is the backend a load asking for name uses: the one the
// previous load opened when it asked for the same (its compiled kernels
// kept), otherwise a new one, the previous closed. s.mu is held and no
// model is open.
func (s *state) backendFor(ctx context.Context, name string) (gpu.Backend, error) {
	if s.backend != nil && s.backendName == name {
		return s.backend, nil
	}
	s.closeBackend()
	b, dev, err := openBackend(ctx, name)
	if err != nil {
		return nil, err
	}
	s.backend, s.dev, s.backendName = b, dev, name
	return b, nil
}

// closeBackend closes the page's backend and its device. s.mu is held.
func (s *state) closeBackend() {
	if s.backend != nil {
		s.backend.Close()
	}
	if s.dev != nil {
		s.dev.Close()
	}
	s.backend, s.dev, s.backendName = nil, nil, ""
}

func str(o js.Value, k string) string {
	if o.Type() != js.TypeObject {
		return ""
	}
	if v := o.Get(k); v.Type() == js.TypeString {
		return v.String()
	}
	return ""
}

func num(o js.Value, k string, def float64) float64 {
	if o.Type() != js.TypeObject {
		return def
	}
	if v := o.Get(k); v.Type() == js.TypeNumber {
		return v.Float()
	}
	return def
}

// pipelineOptions are a load's: the backend, and from its options the KV
// cache length (maxCache) and the decode steps per submission
// (stepsPerSubmit, pipeline.Options.StepsPerSubmit; 0 or absent: the
// default, as natively).
func pipelineOptions(b gpu.Backend, opts js.Value) pipeline.Options {
	return pipeline.Options{Backend: b, MaxCache: int(num(opts, "maxCache", 0)), StepsPerSubmit: int(num(opts, "stepsPerSubmit", 0))}
}

// load(blob, {tokenizer, backend, maxCache, stepsPerSubmit, onProgress})
func (s *state) load(args []js.Value) (any, error) {
	if len(args) < 1 || args[0].Type() != js.TypeObject {
		return nil, errors.New("load: want a File or Blob")
	}
	var opts js.Value
	if len(args) > 1 {
		opts = args[1]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model != nil {
		s.model.Close()
		s.model = nil
	}
	var progress, tokBlob js.Value
	if opts.Type() == js.TypeObject {
		progress, tokBlob = opts.Get("onProgress"), opts.Get("tokenizer")
	}
	size := int64(args[0].Get("size").Float())
	if err := checkSize(size); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	ctx := context.Background()
	if isGGUF(args[0]) {
		// A GGUF streams: its header now, each tensor when the backend
		// takes it (into GPU buffers, dropped from wasm memory after).
		f, err := openGGUF(args[0], progress)
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		b, err := s.backendFor(ctx, str(opts, "backend"))
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		before := s.pipelines()
		m, source, err := loadGGUF(ctx, f, pipelineOptions(b, opts))
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		return s.loaded(m, source, size, s.pipelines()-before)
	}
	data, err := readBlob(args[0], progress)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	var tok []byte
	if tokBlob.Type() == js.TypeObject {
		if tok, err = readBlob(tokBlob, js.Undefined()); err != nil {
			return nil, fmt.Errorf("load tokenizer: %w", err)
		}
	}
	b, err := s.backendFor(ctx, str(opts, "backend"))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	before := s.pipelines()
	m, source, err := loadModel(ctx, data, tok, pipelineOptions(b, opts))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return s.loaded(m, source, size, s.pipelines()-before)
}

// isGGUF reports a blob that starts with GGUF's magic.
func isGGUF(blob js.Value) bool {
	ab, err := await(blob.Call("slice", 0, 4).Call("arrayBuffer"))
	if err != nil {
		return false
	}
	var head [4]byte
	n := js.CopyBytesToGo(head[:], js.Global().Get("Uint8Array").New(ab))
	return n == 4 && string(head[:]) == gguf.Magic
}

// pipelines is how many compute pipelines the page's WebGPU device has
// compiled (0 on the CPU).
func (s *state) pipelines() int64 {
	if s.dev == nil {
		return 0
	}
	return s.dev.PipelinesCreated()
}

// loaded makes m the page's model (s.mu is held); compiled is how many
// pipelines its load compiled.
func (s *state) loaded(m *pipeline.Model, source string, size int64, compiled int64) (any, error) {
	tpl, err := chatTemplate(m, source)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("load: chat template: %w", err)
	}
	s.model, s.tpl = m, tpl
	info := m.BackendInfo()
	return map[string]any{
		"backend":     info.Backend,
		"device":      info.Name,
		"vocab":       m.Config().VocabSize,
		"maxCache":    m.MaxCache(),
		"kvCache":     m.KVDType().String(),
		"activations": m.ActivationDType().String(),
		// timestamps: the page's device times its work (gpurun.profile
		// and gpurun.timeDecode work).
		"timestamps": s.backend.Caps().Timestamps,
		// subgroupSize: the smallest subgroup size the page's device
		// may run, 0 where the browser offers no subgroups (the decode
		// products reduce through them where it does: matvec_sg).
		"subgroupSize": s.backend.Caps().SubgroupSize,
		"bytes":        size,
		"chat":         map[bool]string{true: "plain", false: "template"}[tpl.IsPlain()],
		// compiledPipelines is what this load compiled: 0 when the
		// previous loads on this backend compiled all it needs.
		"compiledPipelines": compiled,
	}, nil
}

// generate(prompt, {maxTokens, temperature, topK, topP, seed, promptIds, ignoreStop, stopTokens, images, audio}, onToken)
func (s *state) generate(args []js.Value) (any, error) {
	if len(args) < 1 {
		return nil, errors.New("generate: want a prompt")
	}
	var opts, onToken js.Value
	if len(args) > 1 {
		opts = args[1]
	}
	if len(args) > 2 {
		onToken = args[2]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, errors.New("generate: no model loaded")
	}
	prompt := pipeline.Prompt{Text: args[0].String()}
	if opts.Type() == js.TypeObject {
		if ids := opts.Get("promptIds"); ids.Type() == js.TypeObject && ids.Length() > 0 {
			for i := range ids.Length() {
				prompt.IDs = append(prompt.IDs, ids.Index(i).Int())
			}
		}
		var err error
		if prompt.Images, err = jsImages(opts.Get("images")); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		if prompt.Audio, err = jsAudio(opts.Get("audio")); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
	}
	g := genOptions(opts)
	return s.run(prompt, g, onToken)
}

// chat(messages, opts, onToken): messages is [{role, content, images,
// audio}], ending with the user's turn (images or audio: media files for
// the content's mediaMarkers, one kind in a conversation).
func (s *state) chat(args []js.Value) (any, error) {
	if len(args) < 1 || args[0].Type() != js.TypeObject {
		return nil, errors.New("chat: want an array of {role, content} messages")
	}
	var opts, onToken js.Value
	if len(args) > 1 {
		opts = args[1]
	}
	if len(args) > 2 {
		onToken = args[2]
	}
	var msgs []chat.Message
	var images, audio bool // the kinds of media the conversation has
	for i := range args[0].Length() {
		m := args[0].Index(i)
		media, isAudio, err := jsMessageMedia(m)
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		audio = audio || isAudio && len(media) > 0
		images = images || !isAudio && len(media) > 0
		msgs = append(msgs, chat.Message{Role: str(m, "role"), Content: str(m, "content"), Images: media})
	}
	if images && audio {
		return nil, errors.New("chat: images and audio in one conversation (a model's projector takes one kind)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, errors.New("chat: no model loaded")
	}
	g := genOptions(opts)
	prompt, err := chatPrompt(s.model, s.tpl, msgs, &g)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	if audio {
		prompt = audioPrompt(prompt)
	}
	return s.run(prompt, g, onToken)
}

// profile(promptIds): the model's prefill step of the prompt and a decode
// step after it, each op timed by the device (pipeline.Model.Profile,
// where the page's adapter offers timestamp queries), as
// [{step, tokens, pos, ops: [{op, kind, kernels, nanos, bytes, flops}]}]
// (kind: fusion.Kind's number):
// what gpurun bench --profile reports, so the bench's browser row gives
// the page's device time per decode step beside its wall time.
func (s *state) profile(args []js.Value) (any, error) {
	if len(args) < 1 || args[0].Type() != js.TypeObject || args[0].Length() == 0 {
		return nil, errors.New("profile: want an array of prompt ids")
	}
	ids := make([]int, args[0].Length())
	for i := range ids {
		ids[i] = args[0].Index(i).Int()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, errors.New("profile: no model loaded")
	}
	steps, err := s.model.Profile(context.Background(), ids)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	out := make([]any, len(steps))
	for i, st := range steps {
		ops := make([]any, len(st.Ops))
		for j, op := range st.Ops {
			kernels := make([]any, len(op.Kernels))
			for k, name := range op.Kernels {
				kernels[k] = name
			}
			ops[j] = map[string]any{"op": op.Op, "kind": int(op.Kind), "kernels": kernels,
				"nanos": float64(op.Nanos), "bytes": float64(op.Bytes), "flops": float64(op.FLOPs)}
		}
		out[i] = map[string]any{"step": st.Step, "tokens": st.Tokens, "pos": st.Pos, "ops": ops}
	}
	return out, nil
}

// timeDecode(promptIds, steps): the prompt, then steps greedy decode steps
// as a generation runs them, with device timestamps around each submission
// (pipeline.Model.TimeDecode, where the page's adapter offers timestamp
// queries) -> {steps, submissions, deviceMs, stepsMs, wallMs} (stepsMs:
// the host's clock around the submissions, each with its timestamp read;
// wallMs: the whole call's, the prompt included): the device's share of a
// decode step, which gpurun bench sets against the page's wall time per
// step to give the page's host time.
func (s *state) timeDecode(args []js.Value) (any, error) {
	if len(args) < 2 || args[0].Type() != js.TypeObject || args[0].Length() == 0 || args[1].Type() != js.TypeNumber {
		return nil, errors.New("timeDecode: want an array of prompt ids and a step count")
	}
	ids := make([]int, args[0].Length())
	for i := range ids {
		ids[i] = args[0].Index(i).Int()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, errors.New("timeDecode: no model loaded")
	}
	start := time.Now()
	d, err := s.model.TimeDecode(context.Background(), ids, args[1].Int())
	if err != nil {
		return nil, fmt.Errorf("timeDecode: %w", err)
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	return map[string]any{"steps": d.Steps, "submissions": d.Submissions, "deviceMs": ms(d.Device), "stepsMs": ms(d.Wall),
		"wallMs": ms(time.Since(start))}, nil
}

func genOptions(opts js.Value) pipeline.GenerateOptions {
	return pipeline.GenerateOptions{
		MaxTokens:   int(num(opts, "maxTokens", 128)),
		Temperature: float32(num(opts, "temperature", 0)),
		TopK:        int(num(opts, "topK", 0)),
		TopP:        float32(num(opts, "topP", 0)),
		Seed:        uint64(num(opts, "seed", 0)),
		// ignoreStop: generate maxTokens whatever comes (gpurun bench).
		IgnoreStopTokens: opts.Type() == js.TypeObject && opts.Get("ignoreStop").Truthy(),
		// stopTokens: ids that end generation besides the model's.
		StopTokens: jsInts(opts, "stopTokens"),
	}
}

// jsInts returns the numbers of the array opts[name], nil where it has
// none.
func jsInts(opts js.Value, name string) []int {
	if opts.Type() != js.TypeObject {
		return nil
	}
	a := opts.Get(name)
	if a.Type() != js.TypeObject {
		return nil
	}
	var out []int
	for i := range a.Length() {
		out = append(out, a.Index(i).Int())
	}
	return out
}

// run generates on a fresh session, streaming to onToken. s.mu is held.
func (s *state) run(prompt pipeline.Prompt, g pipeline.GenerateOptions, onToken js.Value) (any, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cmu.Lock()
	s.cancel = cancel
	s.cmu.Unlock()
	defer func() {
		s.cmu.Lock()
		s.cancel = nil
		s.cmu.Unlock()
		cancel()
	}()
	sess := s.model.NewSession()
	yields := s.backend.Caps().Host
	var ids []any
	start := time.Now()
	lastYield := start
	for tok, err := range sess.Generate(ctx, prompt, g) {
		if err != nil {
			if errors.Is(err, context.Canceled) {
				break
			}
			return nil, fmt.Errorf("generate: %w", err)
		}
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
		if onToken.Type() == js.TypeFunction {
			onToken.Invoke(tok.ID, tok.Piece)
		}
		// Let the page paint and see a stop click about once a frame: the
		// event loop runs only while every goroutine waits, and a
		// setTimeout per token would cap the CPU backend near 250 tok/s
		// (browsers clamp nested timeouts to 4 ms). Only the CPU backend
		// (Caps().Host) needs it: on WebGPU every submission awaits its
		// buffer map, which hands the loop a turn, and a timeout there
		// would add up to 4 ms every 15 to the decode steps of a fast GPU.
		if yields && time.Since(lastYield) >= yieldEvery {
			yieldToLoop()
			lastYield = time.Now()
		}
	}
	m := sess.Metrics()
	return map[string]any{
		"ids":              ids,
		"stopReason":       string(m.StopReason),
		"promptTokens":     m.PromptTokens,
		"prefillTokens":    m.PrefillTokens,
		"generatedTokens":  m.GeneratedTokens,
		"ttftMs":           float64(m.TimeToFirstToken) / float64(time.Millisecond),
		"prefillTokPerSec": m.PrefillTokensPerSec,
		"decodeTokPerSec":  m.DecodeTokensPerSec,
		"wallMs":           float64(time.Since(start)) / float64(time.Millisecond),
	}, nil
}
