// Package serve is an OpenAI-compatible HTTP server over a pipeline.Model:
// POST /v1/chat/completions and /v1/completions (whole responses, or
// server-sent events in OpenAI's chunk format with stream: true),
// GET /v1/models and GET /health, on net/http alone.
//
// A request's generation holds one of the model's slots (its KV caches,
// pipeline.Options.Slots) from prefill to its last token, so up to that
// many run at once; the others wait in a bounded queue, and a request
// finding the queue full gets 429 with Retry-After. A client that
// disconnects cancels its generation. Chat messages are rendered with the
// model's chat template, or package chat's plain fallback, the same as
// `gpurun chat`; the server keeps no conversation state between requests,
// but a prompt's tokens already in a KV cache (the slot's own, or the
// model's prefix cache, pipeline.Options.PrefixCacheBytes) are not run
// again: usage.prompt_tokens_details.cached_tokens counts them.
//
// Requests take OpenAI's fields model, messages or prompt, stream,
// stream_options.include_usage, temperature (0 to 2, default 1; 0 is
// greedy), top_p, top_k (an extension; 0 for no limit), max_tokens or
// max_completion_tokens (default: until a stop or a full cache), stop (a
// string or up to 4), seed, n (1 only) and response_format (json_object,
// or json_schema with a schema of package constrain's subset; the output
// is constrained token by token), and for chat tools and tool_choice (the
// template's tool-call syntax read back into tool_calls; a forced call is
// constrained to the tools' schemas); other fields are ignored. Errors
// are OpenAI-shaped JSON with the HTTP status that fits.
//
// A model's thinking, where its template marks one (chat.ThinkSyntax),
// comes apart from the answer as reasoning_content (Config.ReasoningFormat,
// a request's reasoning_format), and a thinking budget
// (Config.ReasoningBudget, a request's reasoning_budget) closes it when
// spent (reasoning.go). Chat requests also take chat_template_kwargs,
// enable_thinking and reasoning_effort, passed to the template.
//
// Anthropic's Messages API is served beside OpenAI's: POST /v1/messages
// (whole, or Anthropic's streamed events) and /v1/messages/count_tokens,
// with system prompts, text, thinking, tool_use and tool_result blocks,
// tools, and errors in Anthropic's shape (anthropic.go).
//
// POST /v1/embeddings serves an embedding model's pooled, L2-normalized
// vectors in OpenAI's shape (embeddings.go), and ollama's API is served
// beside (/api/chat, /api/generate, /api/embed, /api/show, /api/tags,
// /api/ps, /api/version; NDJSON streams; ollama.go).
//
// Import it to serve a model over HTTP to OpenAI, Anthropic and ollama clients from your own
// program (gpurun serve is this server).
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxQueue = 256     // requests waiting beyond the running ones
	DefaultMaxBody  = 4 << 20 // bytes of a request body
)

// Config configures a Server.
type Config struct {
	// Model generates; its Slots is how many requests run at once.
	Model *pipeline.Model
	// ModelID is the name /v1/models lists and requests must give.
	ModelID string
	// Variants are further models by id, served beside Model and listed
	// after it: a request runs on the one its "model" field names (gpurun
	// serve --adapter gives the base model with LoRA adapters, ids
	// "base:adapter", over one copy of the base weights). Each has its
	// own slots.
	Variants map[string]*pipeline.Model
	// Template renders chat messages; nil means chat.Plain().
	Template *chat.Template
	// APIKey, when set, is required as "Authorization: Bearer KEY" on the
	// /v1/ routes (/health stays open).
	APIKey string
	// CORSOrigin, when set, lets browsers at that origin ("*" for any)
	// call the server: responses carry Access-Control-Allow-Origin and
	// OPTIONS preflight requests are answered.
	CORSOrigin string
	// MaxQueue is how many requests may wait for a slot; more get 429.
	// 0 means DefaultMaxQueue, -1 none.
	MaxQueue int
	// MaxBody is the largest request body in bytes (413 beyond); 0 means
	// DefaultMaxBody.
	MaxBody int64
	// RemoteImages lets chat requests' image_url parts name http(s)
	// URLs, which the server then fetches (at most MaxBody bytes each,
	// 30 s); without it only data: URLs are taken.
	RemoteImages bool
	// Log, when set, gets one line per failed generation.
	Log func(format string, args ...any)
	// Speculation, when set, decodes every request speculatively (see
	// pipeline.Speculation; its draft model needs as many slots as Model).
	Speculation *pipeline.Speculation
	// ReasoningFormat is how chat replies give the model's thinking, where
	// the template marks it (chat.ThinkSyntax); "" means ReasoningAuto.
	// A request's reasoning_format overrides it.
	ReasoningFormat ReasoningFormat
	// ReasoningBudget, when > 0, is how many tokens of thinking a reply
	// may take: then the server writes the thinking's end marker
	// (chat.ThinkSyntax.End) into the reply as if the model had, and the
	// model goes on with its answer. A request's reasoning_budget (or
	// Anthropic's thinking.budget_tokens) overrides it.
	ReasoningBudget int
	// NoThinking renders chat templates with enable_thinking false and
	// closes a thinking the prompt opens before the model runs (a budget
	// of 0).
	NoThinking bool
}

// Server serves one model. Create it with New.
type Server struct {
	grammars grammarCache
	cfg      Config
	tpl      *chat.Template
	created  int64
	admit    chan struct{} // one token per running or waiting request
	closing  atomic.Bool
	mux      *http.ServeMux
	inFlight atomic.Int64
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, errors.New("serve: no model")
	}
	if cfg.ModelID == "" {
		return nil, errors.New("serve: no model id")
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.MaxQueue < 0 {
		cfg.MaxQueue = 0
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	s := &Server{cfg: cfg, tpl: cfg.Template, created: time.Now().Unix()}
	if s.tpl == nil {
		s.tpl = chat.Plain()
	}
	s.admit = make(chan struct{}, s.slots()+cfg.MaxQueue)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.auth(s.chatCompletions))
	mux.HandleFunc("POST /v1/completions", s.auth(s.completions))
	mux.HandleFunc("POST /v1/messages", s.authWith(s.messages, anthropicError))
	mux.HandleFunc("POST /v1/messages/count_tokens", s.authWith(s.countTokens, anthropicError))
	mux.HandleFunc("POST /v1/embeddings", s.auth(s.embeddings))
	mux.HandleFunc("GET /v1/models", s.auth(s.models))
	mux.HandleFunc("GET /v1/models/{id...}", s.auth(s.model))
	mux.HandleFunc("GET /health", s.health)
	s.ollamaRoutes(mux)
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/health"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			anthropicError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("unknown route %s %s", r.Method, r.URL.Path)})
	})
	s.mux = mux
	return s, nil
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)})
}

// serveWithCORS answers a CORS preflight when origin is set (adding the
// CORS headers to every answer), else hands the request to next.
func serveWithCORS(w http.ResponseWriter, r *http.Request, origin string, next http.Handler) {
	if origin != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		if origin != "*" {
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	next.ServeHTTP(w, r)
}

// ServeHTTP routes a request, answering CORS preflights first when CORS
// is on.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveWithCORS(w, r, s.cfg.CORSOrigin, s.mux)
}

// auth requires the API key when one is set.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc { return s.authWith(h, writeError) }

// authWith requires the API key when one is set, as "Authorization:
// Bearer KEY" or as Anthropic's clients send it, "x-api-key: KEY";
// refusals are written by fail.
func (s *Server) authWith(h http.HandlerFunc, fail func(http.ResponseWriter, *apiError)) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	bearer, key := []byte("Bearer "+s.cfg.APIKey), []byte(s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) != 1 &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), key) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			fail(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)"})
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
		return
	}
	writeJSON(w, map[string]any{"status": "ok", "model": s.cfg.ModelID, "slots": s.slots(), "in_flight": s.inFlight.Load()})
}

// modelObject is a model as OpenAI's API lists it, with the fields of
// Anthropic's listing beside (type, display_name, created_at), so that
// both APIs' clients read GET /v1/models.
type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func (s *Server) modelObject(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: s.created, OwnedBy: "gpurun",
		Type: "model", DisplayName: id, CreatedAt: time.Unix(s.created, 0).UTC().Format(time.RFC3339)}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	var list []modelObject
	for _, id := range s.ids() {
		list = append(list, s.modelObject(id))
	}
	writeJSON(w, map[string]any{"object": "list", "data": list,
		"has_more": false, "first_id": list[0].ID, "last_id": list[len(list)-1].ID})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := s.cfg.Variants[id]; ok {
		writeJSON(w, s.modelObject(id))
		return
	}
	if id != s.cfg.ModelID {
		writeError(w, s.notFound(id))
		return
	}
	writeJSON(w, s.modelObject(id))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// readBody reads the request body up to the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", s.cfg.MaxBody)}
	case err != nil:
		return nil, badRequest("", "invalid_body", "reading the body: "+err.Error())
	}
	return body, nil
}

// enter admits a request into the running or waiting ones, or fails with
// 429 when the queue is full (503 while shutting down).
func (s *Server) enter() *apiError {
	if s.closing.Load() {
		return &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 5, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"}
	}
	select {
	case s.admit <- struct{}{}:
		s.inFlight.Add(1)
		return nil
	default:
		return &apiError{Status: http.StatusTooManyRequests, RetryAfter: 1, Type: "rate_limit_error", Code: "queue_full",
			Message: fmt.Sprintf("the server is busy: %d requests running or waiting", cap(s.admit))}
	}
}

func (s *Server) leave() {
	s.inFlight.Add(-1)
	<-s.admit
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var msgs []chat.Message
	var smp sampling
	var think thinkingFields
	var remote []remoteImage
	var audioParts, imageParts int
	r, m, grammar, ok := s.begin(w, r, func(body []byte, id string) (sampling, *apiError) {
		var aerr *apiError
		var req *chatRequest
		req, msgs, smp, aerr = decodeChat(body, id)
		if req != nil {
			think, remote = req.thinkingFields, req.remote
			audioParts, imageParts = req.audioParts, req.imageParts
			if audioParts > 0 && imageParts > 0 {
				aerr = badRequest("messages", "invalid_value", "messages: image_url and input_audio parts in one request (a model's projector takes one kind)")
			}
		}
		return smp, aerr
	})
	if !ok {
		return
	}
	format, budget, vars, aerr := think.decode()
	if aerr == nil {
		aerr = s.fetchImages(r.Context(), msgs, remote)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	tpl, p, tools, aerr := s.renderChat(m, msgs, smp.tools, vars)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if tools != nil && tools.forced != nil {
		grammar = tools.forced
	}
	gen := smp.options()
	gen.Grammar = grammar
	gen.StopTokens = p.StopTokens
	gen.StopStrings = append(gen.StopStrings, p.StopStrings...)
	th := s.thinkingFor(tpl, p.Text, format, budget)
	prompt := pipeline.Prompt{IDs: p.IDs, Images: p.Images}
	if audioParts > 0 {
		prompt = pipeline.Prompt{IDs: p.IDs, Audio: p.Images} // the chat's media files are WAV files
	}
	s.generate(w, r, kindChat, prompt, gen, smp, tpl.IsPlain(), tools, th)
}

// renderChat renders a chat request's messages with the server's template
// (given vars, when any) for model m, offering the request's tools: the
// template, the prompt, and the tool mode (nil when the request has no
// tools or tool_choice none; its forced grammar set when a call is
// required).
func (s *Server) renderChat(m *pipeline.Model, msgs []chat.Message, spec *toolSpec, vars map[string]any) (*chat.Template, chat.Prompt, *toolMode, *apiError) {
	tpl := s.tpl
	if len(vars) > 0 {
		tpl = tpl.WithVars(vars)
	}
	var tools *toolMode
	if spec != nil && spec.choice != "none" {
		tools = &toolMode{format: tpl.ToolFormat()}
		forced, aerr := s.grammars.tools(spec, tools.format)
		if aerr != nil {
			return nil, chat.Prompt{}, nil, aerr
		}
		tools.forced = forced
	}
	var offered []json.RawMessage
	if spec != nil {
		offered = spec.raw
	}
	p, err := chat.RenderTools(m, tpl, msgs, offered)
	if err != nil {
		return nil, chat.Prompt{}, nil, generationError(err, kindChat)
	}
	return tpl, p, tools, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var prompt completionPrompt
	var smp sampling
	r, m, grammar, ok := s.begin(w, r, func(body []byte, id string) (sampling, *apiError) {
		var aerr *apiError
		_, prompt, smp, aerr = decodeCompletion(body, id)
		return smp, aerr
	})
	if !ok {
		return
	}
	p := pipeline.Prompt{Text: prompt.text, IDs: prompt.ids}
	if p.IDs == nil && p.Text == "" {
		// An empty text prompt is BOS alone (when the model uses one).
		if cfg := m.Config(); cfg.AddBOS && cfg.BOS >= 0 {
			p.IDs = []int{cfg.BOS}
		}
	}
	gen := smp.options()
	gen.Grammar = grammar
	s.generate(w, r, kindText, p, gen, smp, false, nil, thinking{budget: -1})
}

// begin is what the chat and text completion handlers share: it reads the
// body, routes the request to the model it names, decodes it with decode
// (given the routed model's id) and compiles its response_format. It
// returns false after writing the error of a bad request.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, decode func(body []byte, id string) (sampling, *apiError)) (*http.Request, *pipeline.Model, *constrain.Grammar, bool) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return r, nil, nil, false
	}
	r, m, id, name := s.route(r, body)
	if name != "" && name != id {
		writeError(w, s.notFound(name))
		return r, nil, nil, false
	}
	smp, aerr := decode(body, id)
	if aerr != nil {
		writeError(w, aerr)
		return r, nil, nil, false
	}
	grammar, aerr := s.grammars.get(smp.format)
	if aerr != nil {
		writeError(w, aerr)
		return r, nil, nil, false
	}
	return r, m, grammar, true
}

// notFound is the error for a request naming a model this server does not
// serve: it lists the ones it does (the model, and its adapters as
// MODEL:ADAPTER).
func (s *Server) notFound(name string) *apiError {
	ids := s.ids()
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = strconv.Quote(id)
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("the model %q does not exist; this server serves %s", name, strings.Join(quoted, ", "))}
}

// options are the pipeline's options for the request's sampling.
func (smp *sampling) options() pipeline.GenerateOptions {
	o := pipeline.GenerateOptions{MaxTokens: smp.maxTokens, StopStrings: append([]string(nil), smp.stops...)}
	if !smp.greedy {
		o.Temperature, o.TopK, o.TopP = smp.temperature, smp.topK, smp.topP
		if o.TopP >= 1 {
			o.TopP = 0
		}
	}
	if smp.seed != nil {
		o.Seed = *smp.seed
	} else {
		o.Seed = mrand.Uint64()
	}
	return o
}

// generationError maps an error from rendering or generating a request of
// kind k to a response.
func generationError(err error, k kind) *apiError {
	switch {
	case errors.Is(err, pipeline.ErrPromptTooLong):
		return badRequest(k.promptParam(), "context_length_exceeded", err.Error())
	case errors.Is(err, pipeline.ErrPrompt), errors.Is(err, pipeline.ErrOptions), errors.Is(err, chat.ErrTemplate):
		return badRequest("", "invalid_value", err.Error())
	case errors.Is(err, pipeline.ErrNoTokenizer):
		return badRequest("", "no_tokenizer", err.Error())
	case errors.Is(err, errEmbeddingModel):
		return badRequest("model", "embedding_model", err.Error())
	case errors.Is(err, pipeline.ErrNoVision):
		return badRequest("", "no_vision", err.Error())
	case errors.Is(err, pipeline.ErrNoAudio):
		return badRequest("", "no_audio", err.Error())
	case errors.Is(err, pipeline.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 5, Type: "server_error", Code: "shutting_down", Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error", Message: err.Error()}
}

// runFailure is the answer to a failed generation of a request of kind
// k, logged: nil when the client went away or the server is shutting
// down (cancelled: nobody to tell).
func (s *Server) runFailure(ctx context.Context, id string, err error, k kind) *apiError {
	if err == errGone || ctx.Err() != nil {
		return nil
	}
	if s.cfg.Log != nil {
		s.cfg.Log("serve: %s: %v", id, err)
	}
	return generationError(err, k)
}

// toolMode is a chat request's tools: its reply is read back for calls in
// the template's format (and held back while streaming to do so).
type toolMode struct {
	format chat.ToolFormat
	forced *constrain.Grammar // a call is required: the grammar of the calls
}

// callID is a new tool call id: OpenAI's form, or the 9 letters and
// digits Mistral's template requires.
func (t *toolMode) callID() string {
	if t.format != chat.ToolsMistral {
		return newID("call_")
	}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [9]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b[:])
}

type kind int

const (
	kindChat kind = iota
	kindText
	kindEmbed
)

// promptParam names the request field that holds the prompt.
func (k kind) promptParam() string {
	switch k {
	case kindText:
		return "prompt"
	case kindEmbed:
		return "input"
	}
	return "messages"
}

// finishReason is OpenAI's name for why a generation ended.
func finishReason(r pipeline.StopReason) string {
	switch r {
	case pipeline.StopMaxTokens, pipeline.StopCacheFull:
		return "length"
	}
	return "stop"
}

type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

// promptDetails is OpenAI's breakdown of the prompt tokens: CachedTokens
// were not run again, their keys and values reused from a cache.
type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(m pipeline.Metrics) *usage {
	return &usage{PromptTokens: m.PromptTokens, CompletionTokens: m.GeneratedTokens, TotalTokens: m.PromptTokens + m.GeneratedTokens,
		PromptTokensDetails: promptDetails{CachedTokens: m.CachedTokens}}
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// generate runs one request's generation and writes the response: a JSON
// object, or with smp.stream an event stream that starts with the first
// piece (so that errors before it, such as a prompt too long, still get
// their status). trimLead drops the reply's leading spaces (the plain chat
// format's "Assistant: "); th splits a chat reply's thinking into
// reasoning_content.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, k kind, prompt pipeline.Prompt, gen pipeline.GenerateOptions, smp sampling, trimLead bool, tools *toolMode, th thinking) {
	if aerr := s.enter(); aerr != nil {
		writeError(w, aerr)
		return
	}
	defer s.leave()
	ctx := r.Context()
	id, object := newID("chatcmpl-"), "chat.completion"
	if k == kindText {
		id, object = newID("cmpl-"), "text_completion"
	}
	created := time.Now().Unix()
	model, modelID := routed(r, s)
	gen.Speculation = s.cfg.Speculation
	var st *eventStream
	if smp.stream {
		st = &eventStream{w: w, k: k, id: id, created: created, model: modelID}
	}
	rep, genErr := s.run(ctx, model, prompt, gen, th, trimLead, func(reasoning, content string) error {
		if st == nil {
			return nil
		}
		if reasoning != "" {
			if err := st.delta(map[string]any{"reasoning_content": reasoning}); err != nil {
				return err
			}
		}
		if content != "" && tools == nil {
			return st.piece(content)
		}
		return nil
	})
	m := rep.metrics
	if genErr != nil {
		aerr := s.runFailure(ctx, id, genErr, k)
		if aerr == nil {
			return
		}
		if st != nil && st.started {
			st.error(aerr)
			return
		}
		writeError(w, aerr)
		return
	}
	reason := finishReason(m.StopReason)
	content := any(rep.content)
	var calls []map[string]any
	if tools != nil {
		var parsed []chat.ToolCall
		content, parsed = chat.ParseToolCalls(tools.format, rep.content)
		for _, c := range parsed {
			calls = append(calls, map[string]any{"id": tools.callID(), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		if len(calls) > 0 {
			reason = "tool_calls"
			if content == "" {
				content = nil
			}
		}
	}
	if st != nil {
		if tools != nil {
			// The reply was held back to tell a call from text: now it goes
			// out as content, or as the calls, each its name and then its
			// arguments, as OpenAI streams them.
			if c, ok := content.(string); ok && c != "" && st.piece(c) != nil {
				return
			}
			for i, c := range calls {
				fn := c["function"].(map[string]any)
				if st.delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c["id"], "type": "function",
					"function": map[string]any{"name": fn["name"], "arguments": ""}}}}) != nil {
					return
				}
				if st.delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": fn["arguments"]}}}}) != nil {
					return
				}
			}
		}
		st.finish(reason, usageOf(m), smp.usage)
		return
	}
	var choice any
	if k == kindChat {
		msg := map[string]any{"role": "assistant", "content": content}
		if rep.reasoning != "" {
			msg["reasoning_content"] = rep.reasoning
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		choice = map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": reason}
	} else {
		choice = map[string]any{"index": 0, "text": rep.content, "logprobs": nil, "finish_reason": reason}
	}
	writeJSON(w, map[string]any{"id": id, "object": object, "created": created, "model": modelID,
		"choices": []any{choice}, "usage": usageOf(m)})
}

// eventStream writes OpenAI's streamed chunks as server-sent events.
type eventStream struct {
	w       http.ResponseWriter
	k       kind
	id      string
	created int64
	model   string
	started bool
}

func (e *eventStream) start() error {
	if e.started {
		return nil
	}
	e.started = true
	startEvents(e.w)
	if e.k == kindChat {
		return e.send(map[string]any{"role": "assistant", "content": ""}, nil, nil, false)
	}
	return nil
}

// send writes one chunk: a chat delta or completion text, and the finish
// reason on the last.
func (e *eventStream) send(delta map[string]any, finish *string, u *usage, noChoices bool) error {
	object := "chat.completion.chunk"
	choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
	if e.k == kindText {
		object = "text_completion"
		choice = map[string]any{"index": 0, "text": delta["content"], "logprobs": nil, "finish_reason": finish}
		if choice["text"] == nil {
			choice["text"] = ""
		}
	}
	chunk := map[string]any{"id": e.id, "object": object, "created": e.created, "model": e.model, "choices": []any{choice}}
	if noChoices {
		chunk["choices"] = []any{}
		chunk["usage"] = u
	}
	data, err := json.Marshal(chunk)
	if err != nil {
		return err
	}
	return e.event(data)
}

func (e *eventStream) event(data []byte) error { return writeEvent(e.w, "", data) }

// startEvents answers 200 with the headers of a server-sent event stream
// (OpenAI's chunks and Anthropic's events alike).
func startEvents(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// writeEvent writes one server-sent event (with an event: line when name
// is set) and flushes it to the client.
func writeEvent(w http.ResponseWriter, name string, data []byte) error {
	if name != "" {
		if _, err := fmt.Fprintf(w, "event: %s\n", name); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// delta sends one chat delta.
func (e *eventStream) delta(d map[string]any) error {
	if err := e.start(); err != nil {
		return err
	}
	return e.send(d, nil, nil, false)
}

func (e *eventStream) piece(p string) error {
	if err := e.start(); err != nil {
		return err
	}
	return e.send(map[string]any{"content": p}, nil, nil, false)
}

func (e *eventStream) finish(reason string, u *usage, includeUsage bool) {
	if e.start() != nil {
		return
	}
	if e.send(map[string]any{}, &reason, nil, false) != nil {
		return
	}
	if includeUsage && e.send(nil, nil, u, true) != nil {
		return
	}
	e.event([]byte("[DONE]"))
}

// error ends a started stream with an error event.
func (e *eventStream) error(aerr *apiError) {
	data, _ := json.Marshal(map[string]any{"error": aerr})
	e.event(data)
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it
// stops accepting, lets running requests finish for up to grace, then
// cancels the generations still running and waits for their handlers.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	genCtx, cancelGens := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelGens()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return genCtx },
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.closing.Store(true)
	shCtx, cancel := context.WithTimeout(context.Background(), grace)
	err := hs.Shutdown(shCtx)
	cancel()
	if err != nil {
		// Grace is over: cancel what still runs and wait for it to end.
		cancelGens()
		shCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = hs.Shutdown(shCtx)
		cancel()
		if err != nil {
			hs.Close()
		}
	}
	if e := <-done; !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}
