// Command gpurun-web is gpurun in the browser: built with GOOS=js
// GOARCH=wasm it runs models on the page's WebGPU adapter (navigator.gpu)
// through internal/webgpu, or on the pure-Go CPU backend when the page has no
// WebGPU, and exposes a small JavaScript API on globalThis.gpurun:
//
//	await gpurun.load(blob, {tokenizer: blob2, backend: "auto", maxCache, stepsPerSubmit, onProgress: (done, total) => {}})
//	    -> {backend, device, vocab, maxCache, kvCache, activations, bytes, chat, compiledPipelines}
//	await gpurun.generate(prompt, {maxTokens, temperature, topK, topP, seed, promptIds, ignoreStop},
//	    (id, piece) => {}) -> {ids, stopReason, promptTokens, prefillTokens, generatedTokens,
//	    ttftMs, decodeTokPerSec, prefillTokPerSec, wallMs}
//	await gpurun.chat([{role: "user", content: "Hi"}], {maxTokens, ...}, (id, piece) => {}) -> as generate
//	gpurun.stop()
//	await gpurun.timeDecode(promptIds, steps) -> {steps, submissions, deviceMs, stepsMs, wallMs}
//	await gpurun.profile(promptIds) -> [{step, tokens, pos, ops: [{op, kind, kernels, nanos, bytes, flops}]}]
//
// timeDecode and profile need timestamp queries on the page's adapter
// (load's result says timestamps: true): timeDecode runs a generation's
// decode steps again with timestamps around each submission, which gpurun
// bench sets against the page's wall time per step (the page's host time),
// and profile times each op of a prefill and a decode step (bench
// --profile).
//
// blob is a File (picked by the user) or any Blob (a model the server
// offers, fetched); it is a model file or .task bundle, a GGUF file, or a
// llama2.c .bin with its tokenizer. A GGUF streams: gpurun reads its
// header, then each tensor (8 MiB slices at a time) just before the backend
// takes it, so on WebGPU the weights go into GPU buffers a tensor at a time
// and never sit whole in wasm memory (onProgress counts those bytes); the
// other formats are read whole into wasm memory, once. chat renders the whole conversation
// with the model's chat template (or gpurun chat's plain format) as the
// desktop does and generates the reply, stopping at the end of the turn.
// A load asking for the backend the previous one did keeps the page's
// device and the kernels compiled for earlier models (compiledPipelines
// counts what this load compiled; the compiles happen during the load, not
// in the first generation).
// Every call returns a Promise and runs
// in a goroutine of its own: gpurun waits for the GPU (buffer maps) by
// awaiting promises, which would deadlock on the event loop's goroutine.
//
// Package page serves the page (index.html), wasm_exec.js and the built
// wasm; see its doc for the build command.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/convert"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// MaxModelBytes is the largest model file the page loads: wasm32 addresses
// at most 4 GiB, the CPU backend and the non-GGUF formats hold the whole
// file in that memory (once), and the KV cache, activations and Go's heap
// need room besides.
const MaxModelBytes = 3 << 30

// ErrTooLarge: a model file over MaxModelBytes.
var ErrTooLarge = errors.New("model too large for the browser")

// checkSize refuses a file that cannot fit before anything is read.
func checkSize(size int64) error {
	if size > MaxModelBytes {
		return fmt.Errorf("%w: the file is %.2f GiB; a wasm32 page addresses at most 4 GiB and gpurun-web may hold the whole file in it, so files over %.0f GiB cannot load (use the native gpurun)",
			ErrTooLarge, float64(size)/(1<<30), float64(MaxModelBytes)/(1<<30))
	}
	return nil
}

// isModelFile reports a gpurun model flatbuffer or .task bundle.
func isModelFile(data []byte) bool {
	return len(data) >= 8 && (string(data[:4]) == "PK\x03\x04" || string(data[4:8]) == "TFL3")
}

// loadModel prepares the model in data (a model file, a .task, a GGUF or a
// llama2.c checkpoint with tokenizer) on opts.Backend. The weights alias data on the
// CPU backend and are uploaded from it on a GPU backend. It returns the
// model's chat template too (Jinja source, "" for none), as gpurun.Open
// finds it: a model file's gpurun.chat_template, a GGUF's
// tokenizer.chat_template.
func loadModel(ctx context.Context, data, tokenizer []byte, opts pipeline.Options) (*pipeline.Model, string, error) {
	if isModelFile(data) {
		f, err := modelfile.Parse(data)
		if err != nil {
			return nil, "", err
		}
		var template string
		if t, ok := f.Metadata(convert.MetaChatTemplate); ok {
			template = string(t)
		}
		m, err := pipeline.FromModelFile(ctx, f, opts)
		if err != nil {
			f.Close()
			return nil, "", err
		}
		return m, template, nil
	}
	var template string
	if len(data) >= 4 && string(data[:4]) == gguf.Magic {
		if f, err := gguf.Parse(data); err == nil {
			if v, ok := f.Get("tokenizer.chat_template"); ok {
				template, _ = v.Str()
			}
		}
	}
	ck, err := checkpoint.Parse(data, tokenizer)
	if err != nil {
		return nil, "", err
	}
	m, err := pipeline.FromCheckpoint(ctx, ck, opts)
	return m, template, err
}

// loadGGUF prepares a GGUF file parsed whole (gguf.Parse) or from its head
// (gguf.ParseHead: its tensors are read one by one as b takes them, so on a
// GPU backend the weights pass through host memory a tensor at a time). It
// returns the model's chat template source too.
func loadGGUF(ctx context.Context, f *gguf.File, opts pipeline.Options) (*pipeline.Model, string, error) {
	ck, err := f.Checkpoint()
	if err != nil {
		return nil, "", err
	}
	var template string
	if v, ok := f.Get("tokenizer.chat_template"); ok {
		template, _ = v.Str()
	}
	m, err := pipeline.FromCheckpoint(ctx, ck, opts)
	return m, template, err
}

// chatTemplate parses the model's template, or the plain format for "".
func chatTemplate(m *pipeline.Model, source string) (*chat.Template, error) {
	if source == "" {
		return chat.Plain(), nil
	}
	text := func(id int) string {
		for s, i := range m.ControlTokens() {
			if i == id {
				return s
			}
		}
		return ""
	}
	return chat.Parse(source, text(m.Config().BOS), text(m.Config().EOS))
}

// chatPrompt renders a conversation (ending with the user's turn) with the
// template into the prompt and stops of its reply.
func chatPrompt(m *pipeline.Model, tpl *chat.Template, msgs []chat.Message, g *pipeline.GenerateOptions) (pipeline.Prompt, error) {
	p, err := chat.Render(m, tpl, msgs)
	if err != nil {
		return pipeline.Prompt{}, err
	}
	g.StopTokens = append(g.StopTokens, p.StopTokens...)
	g.StopStrings = append(g.StopStrings, p.StopStrings...)
	return pipeline.Prompt{IDs: p.IDs, Images: p.Images}, nil
}
