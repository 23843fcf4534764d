package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// ollama's API (https://github.com/ollama/ollama/blob/main/docs/api.md),
// for the tools that speak it: POST /api/chat, /api/generate, /api/embed
// (and the older /api/embeddings), /api/show, GET /api/tags, /api/ps and
// /api/version. Replies stream as NDJSON (one JSON object a line, the
// last with done: true) unless the request says stream: false, as in
// ollama. Errors are ollama's {"error": "..."} with the HTTP status.
//
// The differences: every model is loaded while the server runs, so
// keep_alive is accepted and changes nothing (an empty chat or generate,
// ollama's way to load or unload, answers done_reason "load" or
// "unload" and leaves the model loaded), and options.num_ctx is accepted
// and ignored (the cache is sized at load: gpurun serve --max-cache).
// Of options, temperature, top_k, top_p, seed, num_predict and stop are
// used (ollama's defaults 0.8, 40 and 0.9 where absent), the others
// ignored, as ollama ignores those a runner does not know. Tools work as
// in ollama, and tool_choice (OpenAI's values) is taken besides, an
// extension that forces a call. Images and suffixes are refused.

// OllamaVersion is what GET /api/version reports: the version of ollama
// whose API this server follows.
const OllamaVersion = "0.12.0"

// ollamaDefaults are ollama's sampling defaults, used where a request's
// options leave them out.
var ollamaDefaults = struct {
	temperature, topP float64
	topK              int
}{0.8, 0.9, 40}

// ollamaError writes an error in ollama's shape.
func ollamaError(w http.ResponseWriter, e *apiError) {
	writeErrorBody(w, e, map[string]string{"error": e.Message})
}

// ollamaRoutes adds the ollama API to mux.
func (s *Server) ollamaRoutes(mux *http.ServeMux) {
	for route, h := range map[string]http.HandlerFunc{
		"POST /api/chat": s.ollamaChat, "POST /api/generate": s.ollamaGenerate,
		"POST /api/embed": s.ollamaEmbed, "POST /api/embeddings": s.ollamaEmbeddings,
		"POST /api/show": s.ollamaShow, "GET /api/tags": s.ollamaTags, "GET /api/ps": s.ollamaPS,
		"GET /api/version": s.ollamaVersion,
	} {
		mux.HandleFunc(route, s.authWith(h, ollamaError))
		_, path, _ := strings.Cut(route, " ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			ollamaError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)})
		})
	}
}

// ollamaName is the served id a request's model name names: ollama's
// "name:latest" is the name; "" when none.
func (s *Server) ollamaName(name string) (*pipeline.Model, string) {
	for _, n := range []string{name, strings.TrimSuffix(name, ":latest")} {
		if n == s.cfg.ModelID {
			return s.cfg.Model, n
		}
		if m, ok := s.cfg.Variants[n]; ok {
			return m, n
		}
	}
	return nil, ""
}

// ollamaNotFound is ollama's error for an unknown model.
func ollamaNotFound(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("model %q not found", name)}
}

// ollamaOptions are the options a generation takes.
type ollamaOptions struct {
	Temperature *float64        `json:"temperature"`
	TopK        *int            `json:"top_k"`
	TopP        *float64        `json:"top_p"`
	Seed        *int64          `json:"seed"`
	NumPredict  *int            `json:"num_predict"`
	Stop        json.RawMessage `json:"stop"`
	NumCtx      *int            `json:"num_ctx"`
}

// ollamaCommon are the fields /api/chat and /api/generate share.
type ollamaCommon struct {
	Model     string          `json:"model"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Think     json.RawMessage `json:"think"`
	Options   ollamaOptions   `json:"options"`
	Images    json.RawMessage `json:"images"`
}

// sampling validates the options as OpenAI's fields are (ollama's
// defaults where absent; num_predict <= 0 is no limit) and reads the
// format: "json", a JSON schema, or none.
func (c *ollamaCommon) sampling(id string) (sampling, *apiError) {
	o := c.Options
	f := samplingFields{Model: id, Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, Seed: o.Seed, Stop: o.Stop}
	if f.Temperature == nil {
		f.Temperature = &ollamaDefaults.temperature
	}
	if f.TopP == nil {
		f.TopP = &ollamaDefaults.topP
	}
	if f.TopK == nil {
		f.TopK = &ollamaDefaults.topK
	}
	if n := o.NumPredict; n != nil && *n > 0 {
		f.MaxTokens = n
	}
	smp, aerr := f.validate(id)
	if aerr != nil {
		return smp, aerr
	}
	smp.stream = c.Stream == nil || *c.Stream
	switch raw := bytes.TrimSpace(c.Format); {
	case len(raw) == 0 || string(raw) == "null" || string(raw) == `""`:
	case string(raw) == `"json"`:
		smp.format = &responseFormat{Type: "json_object"}
	case raw[0] == '{':
		smp.format = &responseFormat{Type: "json_schema"}
		smp.format.JSONSchema = &struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		}{Schema: raw}
	default:
		return smp, badRequest("format", "invalid_value", fmt.Sprintf(`format %s: want "json" or a JSON schema`, raw))
	}
	if len(c.Images) > 0 && string(c.Images) != "null" && string(c.Images) != "[]" {
		return smp, badRequest("images", "unsupported_parameter", "images: this server runs text models only")
	}
	return smp, nil
}

// think reads think (true, false, or "high", "medium", "low") into the
// template's variables and the thinking budget: false renders
// enable_thinking false and closes a thinking the prompt opens.
func (c *ollamaCommon) think() (map[string]any, *int, *apiError) {
	vars := map[string]any{}
	raw := bytes.TrimSpace(c.Think)
	if len(raw) == 0 || string(raw) == "null" {
		return vars, nil, nil
	}
	var on bool
	var level string
	switch {
	case json.Unmarshal(raw, &on) == nil:
		vars["enable_thinking"] = on
		if !on {
			zero := 0
			return vars, &zero, nil
		}
	case json.Unmarshal(raw, &level) == nil && (level == "high" || level == "medium" || level == "low"):
		vars["enable_thinking"] = true
		vars["reasoning_effort"] = level
	default:
		return nil, nil, badRequest("think", "invalid_value", fmt.Sprintf(`think %s: want true, false, "high", "medium" or "low"`, raw))
	}
	return vars, nil, nil
}

// ollamaMessage is a chat message as ollama writes it.
type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking"`
	ToolCalls []ollamaToolCall `json:"tool_calls"`
	ToolName  string           `json:"tool_name"`
	Images    json.RawMessage  `json:"images"`
}

type ollamaToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaChatRequest is the body of POST /api/chat.
type ollamaChatRequest struct {
	ollamaCommon
	Messages   []ollamaMessage   `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
}

// ollamaGenerateRequest is the body of POST /api/generate.
type ollamaGenerateRequest struct {
	ollamaCommon
	Prompt  string `json:"prompt"`
	System  string `json:"system"`
	Raw     bool   `json:"raw"`
	Suffix  string `json:"suffix"`
	Context []int  `json:"context"`
}

// ollamaStart reads a request body, decodes it into req and finds its
// model; false after writing the error of a bad one.
func (s *Server) ollamaStart(w http.ResponseWriter, r *http.Request, req any, name func() string) (*pipeline.Model, string, bool) {
	body, aerr := s.readBody(w, r)
	if aerr == nil {
		aerr = decodeJSON(body, req)
	}
	if aerr != nil {
		ollamaError(w, aerr)
		return nil, "", false
	}
	if name() == "" {
		ollamaError(w, badRequest("model", "missing_model", "model is required"))
		return nil, "", false
	}
	m, id := s.ollamaName(name())
	if m == nil {
		ollamaError(w, ollamaNotFound(name()))
		return nil, "", false
	}
	return m, id, true
}

// ollamaLoad answers an empty chat or generate, ollama's way to load a
// model (or, with keep_alive 0, unload it): every model here stays
// loaded while the server runs.
func ollamaLoad(w http.ResponseWriter, id string, keepAlive json.RawMessage, chatShape bool) {
	reason := "load"
	if k := strings.Trim(string(bytes.TrimSpace(keepAlive)), `"`); k == "0" || k == "0s" {
		reason = "unload"
	}
	out := map[string]any{"model": id, "created_at": time.Now().UTC(), "done": true, "done_reason": reason}
	if chatShape {
		out["message"] = map[string]any{"role": "assistant", "content": ""}
	} else {
		out["response"] = ""
	}
	writeJSON(w, out)
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	var req ollamaChatRequest
	m, id, ok := s.ollamaStart(w, r, &req, func() string { return req.Model })
	if !ok {
		return
	}
	if len(req.Messages) == 0 {
		ollamaLoad(w, id, req.KeepAlive, true)
		return
	}
	smp, aerr := req.sampling(id)
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, om := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch om.Role {
		case chat.System, chat.User, chat.Assistant, chat.Tool:
		default:
			ollamaError(w, badRequest(param+".role", "invalid_value", fmt.Sprintf("%s.role %q: want system, user, assistant or tool", param, om.Role)))
			return
		}
		if len(om.Images) > 0 && string(om.Images) != "null" && string(om.Images) != "[]" {
			ollamaError(w, badRequest(param+".images", "unsupported_parameter", param+".images: this server runs text models only"))
			return
		}
		msg := chat.Message{Role: om.Role, Content: om.Content, Reasoning: om.Thinking}
		if om.Role == chat.Tool {
			msg.Name = om.ToolName
		}
		for j, c := range om.ToolCalls {
			var args bytes.Buffer
			raw := c.Function.Arguments
			if len(raw) == 0 || string(raw) == "null" {
				raw = json.RawMessage("{}")
			}
			if c.Function.Name == "" || om.Role != chat.Assistant || json.Compact(&args, raw) != nil {
				ollamaError(w, badRequest(fmt.Sprintf("%s.tool_calls[%d]", param, j), "invalid_value",
					fmt.Sprintf("%s.tool_calls[%d]: an assistant's call needs a function name and arguments as a JSON object", param, j)))
				return
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{Name: c.Function.Name, Arguments: args.String()})
		}
		msgs[i] = msg
	}
	if len(req.Tools) > 0 || len(req.ToolChoice) > 0 {
		if smp.tools, aerr = decodeTools(req.Tools, req.ToolChoice); aerr != nil {
			ollamaError(w, aerr)
			return
		}
	}
	vars, budget, aerr := req.think()
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	tpl, p, tools, aerr := s.renderChat(m, msgs, smp.tools, vars)
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	gen, aerr := s.ollamaOptions(smp, tools)
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	gen.StopTokens = p.StopTokens
	gen.StopStrings = append(gen.StopStrings, p.StopStrings...)
	th := s.thinkingFor(tpl, p.Text, ReasoningDeepSeek, budget)
	s.ollamaReply(w, r, m, id, true, pipeline.Prompt{IDs: p.IDs}, gen, smp, tpl.IsPlain(), tools, th)
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	var req ollamaGenerateRequest
	m, id, ok := s.ollamaStart(w, r, &req, func() string { return req.Model })
	if !ok {
		return
	}
	if req.Prompt == "" && len(req.Context) == 0 {
		ollamaLoad(w, id, req.KeepAlive, false)
		return
	}
	smp, aerr := req.sampling(id)
	if aerr == nil && req.Suffix != "" {
		aerr = badRequest("suffix", "unsupported_parameter", "suffix: fill-in-the-middle is not supported")
	}
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	vars, budget, aerr := req.think()
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	gen, aerr := s.ollamaOptions(smp, nil)
	if aerr != nil {
		ollamaError(w, aerr)
		return
	}
	// raw: the prompt as it is; else rendered as a user turn (after the
	// system prompt) with the chat template, as ollama renders it.
	prompt := pipeline.Prompt{Text: req.Prompt}
	th, trimLead := thinking{budget: -1}, false
	if !req.Raw {
		var msgs []chat.Message
		if req.System != "" {
			msgs = append(msgs, chat.Message{Role: chat.System, Content: req.System})
		}
		msgs = append(msgs, chat.Message{Role: chat.User, Content: req.Prompt})
		tpl, p, _, aerr := s.renderChat(m, msgs, nil, vars)
		if aerr != nil {
			ollamaError(w, aerr)
			return
		}
		prompt = pipeline.Prompt{IDs: p.IDs}
		gen.StopTokens = p.StopTokens
		gen.StopStrings = append(gen.StopStrings, p.StopStrings...)
		th, trimLead = s.thinkingFor(tpl, p.Text, ReasoningDeepSeek, budget), tpl.IsPlain()
	}
	if len(req.Context) > 0 {
		// context: the ids an earlier reply returned, continued.
		ids := prompt.IDs
		if ids == nil && req.Prompt != "" {
			var err error
			if ids, err = chat.EncodeText(m, req.Prompt); err != nil {
				ollamaError(w, generationError(err, kindText))
				return
			}
		}
		prompt = pipeline.Prompt{IDs: append(append([]int(nil), req.Context...), ids...)}
	}
	s.ollamaReply(w, r, m, id, false, prompt, gen, smp, trimLead, nil, th)
}

// ollamaOptions are the pipeline's options of a request: its sampling
// and the grammar of its format or of a forced tool call.
func (s *Server) ollamaOptions(smp sampling, tools *toolMode) (pipeline.GenerateOptions, *apiError) {
	gen := smp.options()
	g, aerr := s.grammars.get(smp.format)
	if aerr != nil {
		aerr.Message = strings.Replace(aerr.Message, "response_format.json_schema.schema", "format", 1)
		return gen, aerr
	}
	gen.Grammar = g
	if tools != nil && tools.forced != nil {
		gen.Grammar = tools.forced
	}
	gen.Speculation = s.cfg.Speculation
	return gen, nil
}

// ollamaReply generates a chat (chatShape) or generate reply and writes
// it: NDJSON lines as it comes (each piece of thinking or answer one
// line; with tools, the answer or the calls when it is done), then the
// line with done: true and the counts; or one object with stream false.
func (s *Server) ollamaReply(w http.ResponseWriter, r *http.Request, m *pipeline.Model, id string, chatShape bool, prompt pipeline.Prompt, gen pipeline.GenerateOptions, smp sampling, trimLead bool, tools *toolMode, th thinking) {
	if aerr := s.enter(); aerr != nil {
		ollamaError(w, aerr)
		return
	}
	defer s.leave()
	ctx := r.Context()
	start := time.Now()
	started := false
	line := func(thinking, content string, calls []map[string]any, done map[string]any) error {
		out := map[string]any{"model": id, "created_at": time.Now().UTC(), "done": done != nil}
		if chatShape {
			msg := map[string]any{"role": "assistant", "content": content}
			if thinking != "" {
				msg["thinking"] = thinking
			}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			out["message"] = msg
		} else {
			out["response"] = content
			if thinking != "" {
				out["thinking"] = thinking
			}
		}
		for k, v := range done {
			out[k] = v
		}
		if !smp.stream {
			writeJSON(w, out)
			return nil
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
		data, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(data, '\n')); err != nil {
			return err
		}
		return http.NewResponseController(w).Flush()
	}
	rep, err := s.run(ctx, m, prompt, gen, th, trimLead, func(reasoning, content string) error {
		if !smp.stream {
			return nil
		}
		if tools != nil {
			content = "" // held back to tell a call from text
		}
		if reasoning == "" && content == "" {
			return nil
		}
		return line(reasoning, content, nil, nil)
	})
	if err != nil {
		aerr := s.runFailure(ctx, "ollama "+id, err, kindChat)
		if aerr == nil {
			return
		}
		if started {
			data, _ := json.Marshal(map[string]string{"error": aerr.Message})
			w.Write(append(data, '\n'))
			return
		}
		ollamaError(w, aerr)
		return
	}
	content := rep.content
	var calls []map[string]any
	if tools != nil {
		var parsed []chat.ToolCall
		content, parsed = chat.ParseToolCalls(tools.format, rep.content)
		for i, c := range parsed {
			calls = append(calls, map[string]any{"function": map[string]any{"index": i, "name": c.Name, "arguments": argsObject(c)}})
		}
		if smp.stream && (content != "" || len(calls) > 0) && line("", content, calls, nil) != nil {
			return
		}
	}
	met := rep.metrics
	reason := "stop"
	if met.StopReason == pipeline.StopMaxTokens || met.StopReason == pipeline.StopCacheFull {
		reason = "length"
	}
	done := map[string]any{"done_reason": reason, "total_duration": time.Since(start).Nanoseconds(), "load_duration": 0,
		"prompt_eval_count": met.PromptTokens, "prompt_eval_duration": met.PrefillTime.Nanoseconds(),
		"eval_count": met.GeneratedTokens, "eval_duration": (met.TimeToFirstToken - met.PrefillTime + met.DecodeTime).Nanoseconds()}
	if !chatShape {
		ctxIDs := prompt.IDs
		if ctxIDs == nil {
			ctxIDs, _ = chat.EncodeText(m, prompt.Text)
		}
		done["context"] = append(append([]int(nil), ctxIDs...), rep.generated...)
	}
	if smp.stream {
		line("", "", nil, done)
		return
	}
	line(rep.reasoning, content, calls, done)
}

// ollamaDetails are a model's details as ollama lists them.
func ollamaDetails(m *pipeline.Model) map[string]any {
	c := m.Config()
	return map[string]any{"parent_model": "", "format": "gguf", "family": c.Arch, "families": []string{c.Arch},
		"parameter_size": "", "quantization_level": ""}
}

// ollamaModel is a model as /api/tags and /api/ps list it; its digest is
// the SHA-256 of its id (there is no ollama blob to hash).
func (s *Server) ollamaModel(id string, m *pipeline.Model, loaded bool) map[string]any {
	weights, _ := m.DecodeBytes()
	size := weights + m.KVCacheBytes()
	sum := sha256.Sum256([]byte(id))
	out := map[string]any{"name": id, "model": id, "size": size, "digest": hex.EncodeToString(sum[:]),
		"details": ollamaDetails(m), "modified_at": time.Unix(s.created, 0).UTC()}
	if loaded {
		vram := int64(0)
		if m.BackendInfo().Type != gpu.CPU {
			vram = size // on the device (a software driver's counts too)
		}
		// Loaded until the server stops: keep_alive does not unload here.
		out["expires_at"] = time.Unix(s.created, 0).UTC().AddDate(100, 0, 0)
		out["size_vram"] = vram
		out["context_length"] = m.MaxCache()
	}
	return out
}

// ollamaList lists the served models.
func (s *Server) ollamaList(loaded bool) []map[string]any {
	var list []map[string]any
	for _, id := range s.ids() {
		m, _ := s.ollamaName(id)
		list = append(list, s.ollamaModel(id, m, loaded))
	}
	return list
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"models": s.ollamaList(false)})
}

func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"models": s.ollamaList(true)})
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"version": OllamaVersion})
}

// ollamaShow describes a model: its chat template, details, the
// hyperparameters ollama's model_info names, and its capabilities.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // ollama's older field
	}
	m, id, ok := s.ollamaStart(w, r, &req, func() string {
		if req.Model == "" {
			return req.Name
		}
		return req.Model
	})
	if !ok {
		return
	}
	c := m.Config()
	a := c.Arch
	info := map[string]any{"general.architecture": a, a + ".context_length": c.MaxSeqLen, a + ".embedding_length": c.Dim,
		a + ".block_count": c.Layers, a + ".attention.head_count": c.Heads, a + ".attention.head_count_kv": c.KVHeads,
		a + ".feed_forward_length": c.HiddenDim, "tokenizer.ggml.bos_token_id": c.BOS, "tokenizer.ggml.eos_token_id": c.EOS}
	var caps []string
	if m.Pooling() != "" {
		caps = []string{"embedding"}
		info[a+".pooling_type"] = m.Pooling()
	} else {
		caps = []string{"completion"}
		if s.tpl.ToolFormat() != chat.NoTools {
			caps = append(caps, "tools")
		}
		if s.tpl.ThinkSyntax() != chat.NoThinking {
			caps = append(caps, "thinking")
		}
	}
	writeJSON(w, map[string]any{"license": "", "modelfile": "", "parameters": "", "template": s.tpl.Source(), "system": "",
		"details": ollamaDetails(m), "model_info": info, "capabilities": caps, "modified_at": time.Unix(s.created, 0).UTC(), "model": id})
}

// ollamaEmbedRequest is the body of POST /api/embed and, with prompt,
// of the older POST /api/embeddings.
type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Prompt     *string         `json:"prompt"`
	Truncate   *bool           `json:"truncate"`
	Dimensions int             `json:"dimensions"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
	Options    json.RawMessage `json:"options"`
}

// ollamaEmbedding embeds a request's input (L2-normalized when
// normalize) and returns the vectors, their tokens and the time taken;
// false after writing the error of a bad one.
func (s *Server) ollamaEmbedding(w http.ResponseWriter, r *http.Request, legacy bool) (string, [][]float32, int, time.Duration, bool) {
	var req ollamaEmbedRequest
	m, id, ok := s.ollamaStart(w, r, &req, func() string { return req.Model })
	if !ok {
		return "", nil, 0, 0, false
	}
	raw, param := req.Input, "input"
	if legacy {
		raw, param = nil, "prompt"
		if req.Prompt != nil {
			raw, _ = json.Marshal(*req.Prompt)
		}
	}
	in, aerr := decodeEmbedInput(raw, param, false)
	if aerr == nil && req.Dimensions < 0 {
		aerr = badRequest("dimensions", "invalid_value", fmt.Sprintf("dimensions %d: want at least 1", req.Dimensions))
	}
	if aerr != nil {
		ollamaError(w, aerr)
		return "", nil, 0, 0, false
	}
	if aerr := s.enter(); aerr != nil {
		ollamaError(w, aerr)
		return "", nil, 0, 0, false
	}
	defer s.leave()
	start := time.Now()
	// ollama's /api/embed normalizes and truncates by default; its older
	// /api/embeddings does neither.
	o := embedOptions{normalize: !legacy, dims: req.Dimensions, truncate: !legacy && (req.Truncate == nil || *req.Truncate)}
	vecs, tokens, err := embedAll(r.Context(), m, in, o)
	if err != nil {
		ollamaError(w, embedError(err))
		return "", nil, 0, 0, false
	}
	return id, vecs, tokens, time.Since(start), true
}

func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	id, vecs, tokens, took, ok := s.ollamaEmbedding(w, r, false)
	if ok {
		writeJSON(w, map[string]any{"model": id, "embeddings": vecs, "total_duration": took.Nanoseconds(), "load_duration": 0,
			"prompt_eval_count": tokens})
	}
}

func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	if _, vecs, _, _, ok := s.ollamaEmbedding(w, r, true); ok {
		writeJSON(w, map[string]any{"embedding": vecs[0]})
	}
}
