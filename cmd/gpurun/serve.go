package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/serve"
)

func newServe() *cobra.Command {
	var (
		mf           modelFlags
		sf           specFlags
		addr         string
		parallel     int
		queue        int
		apiKey       string
		cors         string
		name         string
		tf           templateFlags
		grace        time.Duration
		web          bool
		remoteImages bool
		adapters     adapterFlag
		rformat      string
		rbudget      int
		models       modelList
		budgetMB     int
		keep         = keepAliveFlag{serve.DefaultKeepAlive}
	)
	cmd := &cobra.Command{
		Use:   "serve [MODEL... | -m [ID=]MODEL...] [--models-mb MB] [--keep-alive 5m] [--addr 127.0.0.1:8080] [--parallel N] [--api-key KEY] [--cors ORIGIN]",
		Short: "Serve a model over OpenAI's, Anthropic's and ollama's HTTP APIs (chat and text completions, messages, embeddings, streaming)",
		Long: `Serve answers OpenAI's API, Anthropic's Messages API and ollama's API on
--addr (loopback by default):

    POST /v1/chat/completions   POST /v1/completions   POST /v1/embeddings
    GET /v1/models   GET /health
    POST /v1/messages   POST /v1/messages/count_tokens
    POST /api/chat   POST /api/generate   POST /api/embed   POST /api/embeddings
    POST /api/show   GET /api/tags   GET /api/ps   GET /api/version

Responses are whole JSON objects, or server-sent events with "stream": true.
Chat messages are rendered with the model's chat template, or the plain
format of gpurun chat for models without one. Requests take temperature
(0 to 2, default 1; 0 is greedy), top_p, top_k (an extension), max_tokens or
max_completion_tokens (default: until a stop or a full cache), stop, seed,
n (1 only), response_format (json_object or json_schema: the output is
constrained to valid JSON) and, for chat, tools and tool_choice (calls in
the template's syntax come back as tool_calls). A prompt that starts with
tokens an earlier request left in the prefix cache (--prefix-cache-mb)
prefills only the rest; usage.prompt_tokens_details.cached_tokens counts
them.

A model's thinking (the <think>...</think> block of Qwen 3 or DeepSeek R1
style templates, gpt-oss's analysis channel) comes apart from the answer
as reasoning_content (--reasoning-format deepseek, the default "auto"),
or stays in the content (none; deepseek-legacy gives both); a request's
reasoning_format overrides it. --reasoning-budget N closes the thinking
after N tokens (the server writes the end marker and the model goes on
with its answer); 0 turns thinking off (enable_thinking false); -1, the
default, sets no limit; a request's reasoning_budget overrides it.
Requests may pass chat_template_kwargs, enable_thinking and
reasoning_effort to the template. /v1/messages takes Anthropic's system,
messages with text, tool_use, tool_result and thinking blocks, tools,
tool_choice, max_tokens, stop_sequences, temperature, top_p, top_k,
thinking ({"type": "enabled", "budget_tokens": N}) and stream (Anthropic's
events); its errors have Anthropic's shape, and its clients' x-api-key
header is taken as --api-key.

An embedding model (a GGUF with <arch>.pooling_type: gemma-embedding,
Qwen3-Embedding, BERT) answers /v1/embeddings and /api/embed with L2-normalized
vectors pooled as it declares (mean, CLS or last token). The ollama
routes stream NDJSON unless "stream": false, take options (temperature,
top_k, top_p, seed, num_predict, stop), think, tools, format ("json" or a
schema) and keep_alive (with one model, accepted: it stays loaded while
the server runs); see docs/cli.md.

Several models (MODEL..., repeated -m MODEL or -m ID=MODEL, or a
directory of model files, ids from the file names) are listed by
/v1/models and /api/tags and each loaded on its first request, which
its "model" field routes (404 naming the ids for another); /api/ps lists
the loaded ones. --models-mb MB bounds the memory they hold (weights,
KV caches, prefix cache; 0, the default: no limit): a load unloads the
least recently used idle models to fit, and waits (up to 30s, then 503)
while the others have requests running. A model unloads after
--keep-alive idle (5m; 0: when its requests end; -1: never), or a
request's keep_alive. Each model has its own slots, queue and caches.

The weights are loaded once; --parallel N gives them N KV caches of
--max-cache positions each, so that N requests generate at once, their
decode steps batched into one step per round (continuous batching),
except on the CPU backend for models under 20 MiB of weights, where each
request steps apart (faster there). Further requests wait, up to
--queue of them; beyond that they get 429 with Retry-After. A client that
disconnects cancels its generation. On SIGTERM or an interrupt the server
stops accepting, lets running requests finish for --grace, then cancels
them.

The model's name in the API is --name, by default the file name without
its extension. --api-key requires "Authorization: Bearer KEY" (the key can
also come from GPURUN_API_KEY); --cors ORIGIN ("*" for any) lets browser
pages at ORIGIN call the server.

--web serves gpurun's browser page instead of the API: gpurun compiled to
WebAssembly, running models on the page's WebGPU adapter (or its CPU
backend where the browser has no WebGPU), with MODEL (and --tokenizer)
offered to the page and any file the user picks. It builds the wasm from
source at start-up with the go command: the checkout it runs in, or else
this gpurun's version in the Go module cache (where go install put it).`,
		Args: nArgs(0, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			served, multi, err := servedModels(models, args)
			if err != nil {
				return err
			}
			if multi && !web {
				if err := pullServed(cmd, served); err != nil {
					return err
				}
				reasoning, err := serve.ParseReasoningFormat(rformat)
				if err != nil {
					return fmt.Errorf("--reasoning-format: %w", err)
				}
				if err := sf.check(); err != nil {
					return err
				}
				if apiKey == "" {
					apiKey = os.Getenv("GPURUN_API_KEY")
				}
				return serveMulti(cmd, multiServe{mf: &mf, tf: &tf, models: served, addr: addr, parallel: parallel, queue: queue,
					apiKey: apiKey, cors: cors, grace: grace, budgetMB: budgetMB, keepAlive: keep.d, reasoning: reasoning, rbudget: rbudget})
			}
			args = nil
			if len(served) == 1 {
				mf.model = served[0].path
				if name == "" && served[0].named {
					name = served[0].id
				}
			}
			if web {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("--addr %s: %w", addr, err)
				}
				defer ln.Close()
				return serveWeb(cmd.Context(), cmd.ErrOrStderr(), ln, mf.model, mf.tokenizer)
			}
			if err := mf.takeModelArg(cmd, args); err != nil {
				return err
			}
			if err := sf.check(); err != nil {
				return err
			}
			if apiKey == "" {
				apiKey = os.Getenv("GPURUN_API_KEY")
			}
			if name == "" {
				name = strings.TrimSuffix(filepath.Base(filepath.Clean(mf.model)), filepath.Ext(mf.model))
			}
			source, vars, err := tf.load()
			if err != nil {
				return err
			}
			reasoning, err := serve.ParseReasoningFormat(rformat)
			if err != nil {
				return fmt.Errorf("--reasoning-format: %w", err)
			}
			if rbudget == 0 {
				// No thinking: the templates that ask are told so.
				if vars == nil {
					vars = map[string]any{}
				}
				if _, set := vars["enable_thinking"]; !set {
					vars["enable_thinking"] = false
				}
			}
			// Listen first: a taken port fails before the model loads.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr %s: %w", addr, err)
			}
			defer ln.Close()
			start := time.Now()
			m, err := loadModel(func() (*gpurun.Model, error) {
				return gpurun.Open(cmd.Context(), mf.model, append(append(mf.options(cmd), adapters.options()...), gpurun.WithParallel(parallel))...)
			})
			if err != nil {
				return pathError("load", mf.model, err)
			}
			defer m.Close()
			printLoaded(cmd.ErrOrStderr(), m.Pipeline(), m.Format(), time.Since(start))
			if !m.HasTokenizer() {
				return noTokenizer(m)
			}
			spec, closeDraft, err := sf.open(cmd, &mf, m, parallel)
			if err != nil {
				return err
			}
			defer closeDraft()
			tpl, _, err := tf.parse(m, source, vars)
			if err != nil {
				return err
			}
			errOut := cmd.ErrOrStderr()
			var variants map[string]*pipeline.Model
			for n, v := range m.Variants() {
				if variants == nil {
					variants = map[string]*pipeline.Model{}
				}
				variants[name+":"+n] = v.Pipeline()
			}
			srv, err := serve.New(serve.Config{Model: m.Pipeline(), ModelID: name, Variants: variants, Template: tpl, APIKey: apiKey, CORSOrigin: cors, MaxQueue: cmp.Or(queue, -1), Speculation: spec,
				ReasoningFormat: reasoning, ReasoningBudget: max(rbudget, 0), NoThinking: rbudget == 0, RemoteImages: remoteImages,
				Log: func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) }})
			if err != nil {
				return err
			}
			kind := "plain chat format"
			if !tpl.IsPlain() {
				kind = "chat template"
			}
			if m.Slots() > 1 {
				if m.Pipeline().Batching() {
					kind += ", decode steps batched"
				} else {
					kind += ", decode steps per request"
				}
			}
			fmt.Fprintf(errOut, "serving %q on http://%s (%d parallel, queue %d, %s)\n", name, ln.Addr(), m.Slots(), queue, kind)
			for _, n := range adapters.names {
				fmt.Fprintf(errOut, "serving %q: %s with adapter %s\n", name+":"+n, name, n)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			err = srv.Serve(ctx, ln, grace)
			fmt.Fprintln(errOut, "server stopped")
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("shutdown: requests still running after --grace %s were cancelled", grace)
			}
			return err
		},
	}
	sf.register(cmd)
	mf.register(cmd)
	mf.registerPrefixCache(cmd)
	// -m repeats here: serve takes several models.
	mflag := cmd.Flags().Lookup("model")
	mflag.Value = &models
	mflag.Usage = "a model to serve (a .tflite file or .task bundle, a GGUF file, a llama2.c .bin, or a Hugging Face directory), " +
		"as ID=PATH to name it in the API; repeatable, as are the arguments; a directory of model files serves each (ids from the file names)"
	parallel, queue = 1, serve.DefaultMaxQueue
	f := cmd.Flags()
	f.Var(&adapters, "adapter", "serve the model with a LoRA adapter applied at run time as model NAME beside it "+
		"(requests give \"model\": \"MODEL:NAME\"; /v1/models lists it), over the same copy of the base weights, with --parallel slots of its own; repeatable")
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; 0.0.0.0:PORT exposes the server beyond this machine)")
	f.Var(&intFlag{&parallel, 1, pipeline.MaxSlots, fmt.Sprintf("an integer in 1..%d", pipeline.MaxSlots)}, "parallel",
		"requests generating at once, each with its own KV cache over the shared weights")
	f.Var(&intFlag{&queue, 0, 1 << 20, "an integer in 0..1048576"}, "queue", "requests that may wait beyond the running ones (more get 429)")
	f.StringVar(&apiKey, "api-key", "", "require this key as a Bearer token (default: $GPURUN_API_KEY; none when both are empty)")
	f.StringVar(&cors, "cors", "", `allow browser requests from this origin ("*" for any); off by default`)
	f.StringVar(&name, "name", "", "the model's id in the API (default: the file name without its extension)")
	tf.register(cmd)
	f.StringVar(&rformat, "reasoning-format", "auto", "how replies give the model's thinking: auto or deepseek (apart, as reasoning_content), deepseek-legacy (apart and also in the content), none (left in the content)")
	rbudget = -1
	f.Var(&intFlag{&rbudget, -1, 1 << 30, "an integer >= -1"}, "reasoning-budget", "tokens of thinking a reply may take before the server closes it (-1: no limit; 0: no thinking)")
	f.BoolVar(&remoteImages, "allow-remote-images", false, "let chat requests' image_url parts name http(s) URLs, which the server fetches (default: data: URLs only)")
	f.BoolVar(&web, "web", false, "serve the browser page (gpurun in WebAssembly on the page's WebGPU) instead of the API; MODEL is optional")
	f.Var(&intFlag{&budgetMB, 0, 1 << 30, "an integer in 0..1073741824"}, "models-mb",
		"with several models: MiB of memory the loaded ones may hold (weights, KV caches, prefix cache), the least recently used idle model unloaded to make room; 0: no limit")
	f.Var(&keep, "keep-alive", "with several models: how long a model stays loaded after its last request unless the request says (ollama's keep_alive): 0 unloads it then, -1 never")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long running requests may finish after SIGTERM before they are cancelled")
	return cmd
}
