package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// MaxStops is how many stop strings a request may give (as OpenAI's API).
const MaxStops = 4

// samplingFields are the fields chat and text completions share.
type samplingFields struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	N                   *int            `json:"n"`
	ResponseFormat      *responseFormat `json:"response_format"`
	// OpenAI's fields this server does not implement: a request that
	// sets them gets a 400 naming the field rather than silently other
	// output (unsupported).
	Logprobs         json.RawMessage `json:"logprobs"`     // chat: a boolean; text completions: a count
	TopLogprobs      json.RawMessage `json:"top_logprobs"` // chat
	FrequencyPenalty json.RawMessage `json:"frequency_penalty"`
	PresencePenalty  json.RawMessage `json:"presence_penalty"`
	LogitBias        json.RawMessage `json:"logit_bias"`
}

// unsupported refuses the fields this server accepts only at their
// neutral values (null, false, 0, {}): logprobs, top_logprobs, the
// frequency and presence penalties and logit_bias.
func (f *samplingFields) unsupported() *apiError {
	for _, u := range []struct {
		name string
		raw  json.RawMessage
	}{{"logprobs", f.Logprobs}, {"top_logprobs", f.TopLogprobs}, {"frequency_penalty", f.FrequencyPenalty},
		{"presence_penalty", f.PresencePenalty}, {"logit_bias", f.LogitBias}} {
		switch v := strings.TrimSpace(string(u.raw)); v {
		case "", "null", "false", "0", "0.0", "{}":
			continue
		default:
			return badRequest(u.name, "unsupported_parameter", fmt.Sprintf("%s %s: not supported by this server (omit it, or give null, false, 0 or {})", u.name, v))
		}
	}
	return nil
}

// responseFormat is OpenAI's response_format: {"type": "text"},
// {"type": "json_object"} or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingFields
	Messages   []chatMessage     `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	thinkingFields
	// remote are the image_url parts with remote URLs, fetched only
	// where Config.RemoteImages.
	remote []remoteImage
	// audioParts and imageParts count the input_audio and image_url
	// parts of all messages (a model's projector takes one kind).
	audioParts, imageParts int
}

// remoteImage is an image_url part with an http(s) URL: image k of
// message m.
type remoteImage struct {
	m, k int
	url  string
}

// thinkingFields are a chat request's settings of the model's thinking:
// reasoning_format and reasoning_budget (as llama-server's options, per
// request), and the template variables chat_template_kwargs,
// enable_thinking and reasoning_effort.
type thinkingFields struct {
	ReasoningFormat    string         `json:"reasoning_format"`
	ReasoningBudget    *int           `json:"reasoning_budget"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	EnableThinking     *bool          `json:"enable_thinking"`
	ReasoningEffort    string         `json:"reasoning_effort"`
}

// decode checks the fields: the reasoning format, the budget (-1 for
// none, 0 for no thinking) and the template variables they give.
func (f *thinkingFields) decode() (ReasoningFormat, *int, map[string]any, *apiError) {
	var format ReasoningFormat
	if f.ReasoningFormat != "" {
		var err error
		if format, err = ParseReasoningFormat(f.ReasoningFormat); err != nil {
			return "", nil, nil, badRequest("reasoning_format", "invalid_value", "reasoning_format: "+err.Error())
		}
	}
	if b := f.ReasoningBudget; b != nil && *b < -1 {
		return "", nil, nil, badRequest("reasoning_budget", "invalid_value", fmt.Sprintf("reasoning_budget %d: want -1 (no limit), 0 (no thinking) or a number of tokens", *b))
	}
	vars := map[string]any{}
	for k, v := range f.ChatTemplateKwargs {
		if x, ok := v.(float64); ok && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			v = int64(x) // a JSON integer stays one in the template
		}
		vars[k] = v
	}
	if f.EnableThinking != nil {
		vars["enable_thinking"] = *f.EnableThinking
	}
	switch f.ReasoningEffort {
	case "":
	case "minimal", "low", "medium", "high":
		vars["reasoning_effort"] = f.ReasoningEffort
	default:
		return "", nil, nil, badRequest("reasoning_effort", "invalid_value", fmt.Sprintf("reasoning_effort %q: want minimal, low, medium or high", f.ReasoningEffort))
	}
	if b := f.ReasoningBudget; b != nil && *b == 0 {
		if _, set := vars["enable_thinking"]; !set {
			vars["enable_thinking"] = false
		}
	}
	return format, f.ReasoningBudget, vars, nil
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	// The thinking of an assistant message, under either name clients
	// send it back with.
	ReasoningContent string `json:"reasoning_content"`
	Thinking         string `json:"thinking"`
}

// wireToolCall is a tool call as OpenAI's API writes it.
type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolSpec is a request's tools, checked: the raw objects for the
// template, their names and parameters for the grammar, and tool_choice
// ("none", "auto", "required", or the name of the one to call).
type toolSpec struct {
	raw    []json.RawMessage
	tools  []constrain.Tool
	choice string // "none", "auto", "required" or "function"
	name   string // choice "function": the tool to call
}

// decodeTools checks tools and tool_choice.
func decodeTools(rawTools []json.RawMessage, rawChoice json.RawMessage) (*toolSpec, *apiError) {
	spec := &toolSpec{raw: rawTools, choice: "auto"}
	seen := map[string]bool{}
	for i, raw := range rawTools {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		param := fmt.Sprintf("tools[%d]", i)
		if err := json.Unmarshal(raw, &t); err != nil || t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return nil, badRequest(param, "invalid_value", param+`: want {"type": "function", "function": {"name": ..., "parameters": ...}}`)
		}
		if seen[t.Function.Name] {
			return nil, badRequest(param, "invalid_value", fmt.Sprintf("%s: the name %q is given twice", param, t.Function.Name))
		}
		seen[t.Function.Name] = true
		spec.tools = append(spec.tools, constrain.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	if len(rawChoice) == 0 || string(rawChoice) == "null" {
		if len(rawTools) == 0 {
			spec.choice = "none"
		}
		return spec, nil
	}
	var word string
	if json.Unmarshal(rawChoice, &word) == nil {
		switch word {
		case "none", "auto", "required":
			spec.choice = word
		default:
			return nil, badRequest("tool_choice", "invalid_value", fmt.Sprintf("tool_choice %q: want none, auto, required or a function", word))
		}
	} else {
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(rawChoice, &named) != nil || named.Type != "function" || !seen[named.Function.Name] {
			return nil, badRequest("tool_choice", "invalid_value", `tool_choice: want none, auto, required or {"type": "function", "function": {"name": NAME}} naming one of tools`)
		}
		spec.choice, spec.name = "function", named.Function.Name
	}
	if spec.choice != "none" && len(rawTools) == 0 {
		return nil, badRequest("tool_choice", "invalid_value", "tool_choice "+spec.choice+" without tools")
	}
	return spec, nil
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingFields
	Prompt json.RawMessage `json:"prompt"`
}

// sampling is a request's generation settings, validated.
type sampling struct {
	maxTokens   int // 0: until a stop or a full cache
	temperature float32
	topK        int
	topP        float32
	greedy      bool
	seed        *uint64
	stops       []string
	stream      bool
	usage       bool // stream_options.include_usage
	format      *responseFormat
	tools       *toolSpec // chat requests
}

// decodeJSON decodes one JSON value from body into v, rejecting trailing
// data.
func decodeJSON(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return badRequest(typeErr.Field, "invalid_type", fmt.Sprintf("%s: want a JSON %s, got %s", typeErr.Field, typeErr.Type.Kind(), typeErr.Value))
		}
		return badRequest("", "invalid_json", "the body is not valid JSON: "+err.Error())
	}
	if dec.More() {
		return badRequest("", "invalid_json", "the body holds more than one JSON value")
	}
	return nil
}

// validate checks the sampling fields and the model name.
func (f *samplingFields) validate(modelID string) (sampling, *apiError) {
	var s sampling
	if f.Model == "" {
		return s, badRequest("model", "missing_model", "model is required")
	}
	if f.Model != modelID {
		return s, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist; this server serves %q", f.Model, modelID)}
	}
	if err := f.unsupported(); err != nil {
		return s, err
	}
	if f.N != nil && *f.N != 1 {
		return s, badRequest("n", "invalid_value", fmt.Sprintf("n %d: only 1 choice per request is supported", *f.N))
	}
	temp := 1.0
	if f.Temperature != nil {
		temp = *f.Temperature
		if math.IsNaN(temp) || temp < 0 || temp > 2 {
			return s, badRequest("temperature", "invalid_value", fmt.Sprintf("temperature %v: want a number in [0, 2]", temp))
		}
	}
	topP := 1.0
	if f.TopP != nil {
		topP = *f.TopP
		// OpenAI's API accepts 0; here, as in the CLI, top_p keeps a
		// nucleus only in (0, 1] (greedy is temperature 0 or top_k 1).
		if math.IsNaN(topP) || topP <= 0 || topP > 1 {
			return s, badRequest("top_p", "invalid_value", fmt.Sprintf("top_p %v: want a number in (0, 1]", topP))
		}
	}
	if f.TopK != nil {
		if *f.TopK < 0 {
			return s, badRequest("top_k", "invalid_value", fmt.Sprintf("top_k %d: want an integer >= 0 (0 for no limit)", *f.TopK))
		}
		s.topK = *f.TopK
	}
	for _, mt := range []struct {
		name string
		v    *int
	}{{"max_tokens", f.MaxTokens}, {"max_completion_tokens", f.MaxCompletionTokens}} {
		if mt.v == nil {
			continue
		}
		if *mt.v < 1 {
			return s, badRequest(mt.name, "invalid_value", fmt.Sprintf("%s %d: want an integer >= 1", mt.name, *mt.v))
		}
		s.maxTokens = *mt.v // max_completion_tokens, checked last, wins
	}
	if f.Seed != nil {
		seed := uint64(*f.Seed)
		s.seed = &seed
	}
	stops, err := decodeStops(f.Stop)
	if err != nil {
		return s, err
	}
	s.stops = stops
	s.stream = f.Stream
	s.format = f.ResponseFormat
	s.usage = f.StreamOptions != nil && f.StreamOptions.IncludeUsage
	// temperature 0 or top_k 1 leave one candidate: greedy.
	s.greedy = temp == 0 || s.topK == 1
	s.temperature, s.topP = float32(temp), float32(topP)
	return s, nil
}

// decodeStops reads stop: null, a string, or a list of strings.
func decodeStops(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop: want a string or a list of strings")
	}
	if len(list) > MaxStops {
		return nil, badRequest("stop", "invalid_value", fmt.Sprintf("stop: %d strings, at most %d", len(list), MaxStops))
	}
	for _, s := range list {
		if s == "" {
			return nil, badRequest("stop", "invalid_value", "stop: an empty string")
		}
	}
	return list, nil
}

// decodeChat decodes and validates a chat completion request.
func decodeChat(body []byte, modelID string) (*chatRequest, []chat.Message, sampling, *apiError) {
	req, msgs, s, err := decodeChatMessages(body, modelID)
	if err != nil {
		return nil, nil, s, err
	}
	if s.tools, err = decodeTools(req.Tools, req.ToolChoice); err != nil {
		return nil, nil, s, err
	}
	return req, msgs, s, nil
}

func decodeChatMessages(body []byte, modelID string) (*chatRequest, []chat.Message, sampling, *apiError) {
	var req chatRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, nil, sampling{}, err
	}
	s, err := req.validate(modelID)
	if err != nil {
		return nil, nil, s, err
	}
	if len(req.Messages) == 0 {
		return nil, nil, s, badRequest("messages", "invalid_value", "messages: want at least one message")
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case chat.System, chat.User, chat.Assistant, chat.Tool:
			msgs[i].Role = m.Role
		case "developer":
			msgs[i].Role = chat.System
		default:
			return nil, nil, s, badRequest(param+".role", "invalid_value", fmt.Sprintf("%s.role %q: want system, developer, user, assistant or tool", param, m.Role))
		}
		if len(m.ToolCalls) > 0 && m.Role != chat.Assistant {
			return nil, nil, s, badRequest(param+".tool_calls", "invalid_value", param+".tool_calls: only assistant messages make tool calls")
		}
		for j, c := range m.ToolCalls {
			if c.Function.Name == "" {
				return nil, nil, s, badRequest(fmt.Sprintf("%s.tool_calls[%d]", param, j), "invalid_value", fmt.Sprintf("%s.tool_calls[%d]: a function name is required", param, j))
			}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		msgs[i].ToolCallID = m.ToolCallID
		if m.Role == chat.Tool {
			msgs[i].Name = m.Name
		}
		msgs[i].Reasoning = m.ReasoningContent
		if msgs[i].Reasoning == "" {
			msgs[i].Reasoning = m.Thinking
		}
		if len(m.ToolCalls) > 0 && (len(m.Content) == 0 || string(m.Content) == "null") {
			continue // tool calls alone
		}
		text, images, urls, nAudio, err := messageText(m.Content)
		if err != nil {
			return nil, nil, s, badRequest(param+".content", "invalid_value", param+".content: "+err.Error())
		}
		req.audioParts += nAudio
		req.imageParts += len(images) - nAudio
		msgs[i].Content, msgs[i].Images = text, images
		for k, u := range urls {
			if u != "" {
				req.remote = append(req.remote, remoteImage{m: i, k: k, url: u})
			}
		}
	}
	return &req, msgs, s, nil
}

// messageText reads a message's content: a string, or a list of text
// parts ({"type": "text", "text": ...}), which are joined, and image
// parts ({"type": "image_url", "image_url": {"url": "data:image/...;base64,..."}}),
// each a pipeline.MediaMarker in the text and its file's bytes in images.
// An http(s) URL is left to fetch: its image is nil and urls[k] its URL
// (urls is nil without one). Audio parts ({"type": "input_audio",
// "input_audio": {"data": BASE64, "format": "wav"}}) are media files of
// images too, each with its marker; nAudio counts them.
func messageText(raw json.RawMessage) (text string, images [][]byte, urls []string, nAudio int, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil, 0, errors.New("missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil, 0, nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
		InputAudio *struct {
			Data   string `json:"data"`
			Format string `json:"format"`
		} `json:"input_audio"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, nil, 0, errors.New("want a string or a list of text, image_url and input_audio parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch {
		case p.Type == "text" && p.Text != nil:
			b.WriteString(*p.Text)
		case p.Type == "image_url" && p.ImageURL != nil:
			u := p.ImageURL.URL
			if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
				for len(urls) < len(images) {
					urls = append(urls, "")
				}
				images, urls = append(images, nil), append(urls, u)
				b.WriteString(pipeline.MediaMarker)
				continue
			}
			img, err := dataURL(u)
			if err != nil {
				return "", nil, nil, 0, fmt.Errorf("part %d: image_url: %w", i, err)
			}
			images = append(images, img)
			b.WriteString(pipeline.MediaMarker)
		case p.Type == "input_audio" && p.InputAudio != nil:
			if p.InputAudio.Format != "wav" {
				return "", nil, nil, 0, fmt.Errorf("part %d: input_audio: format %q (wav only)", i, p.InputAudio.Format)
			}
			wav, err := base64.StdEncoding.DecodeString(p.InputAudio.Data)
			if err != nil {
				return "", nil, nil, 0, fmt.Errorf("part %d: input_audio: %w", i, err)
			}
			images = append(images, wav)
			nAudio++
			b.WriteString(pipeline.MediaMarker)
		default:
			return "", nil, nil, 0, fmt.Errorf("part %d: type %q, only text, image_url and input_audio parts are supported", i, p.Type)
		}
	}
	for len(urls) > 0 && len(urls) < len(images) {
		urls = append(urls, "")
	}
	return b.String(), images, urls, nAudio, nil
}

// dataURL decodes a base64 data: URL of an image.
func dataURL(u string) ([]byte, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return nil, errors.New("want a data: or http(s) URL")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") || !strings.HasPrefix(meta, "image/") {
		return nil, errors.New("want data:image/TYPE;base64,DATA")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	return b, nil
}

// completionPrompt is a text completion's prompt: text, or token ids.
type completionPrompt struct {
	text string
	ids  []int
}

// decodeCompletion decodes and validates a text completion request. The
// prompt is a string, a list of one string, or a list of token ids.
func decodeCompletion(body []byte, modelID string) (*completionRequest, completionPrompt, sampling, *apiError) {
	var req completionRequest
	var p completionPrompt
	if err := decodeJSON(body, &req); err != nil {
		return nil, p, sampling{}, err
	}
	s, err := req.validate(modelID)
	if err != nil {
		return nil, p, s, err
	}
	raw := req.Prompt
	var list []string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, p, s, badRequest("prompt", "missing_prompt", "prompt is required")
	case json.Unmarshal(raw, &p.text) == nil:
	case json.Unmarshal(raw, &list) == nil && len(list) == 1:
		p.text = list[0]
	case json.Unmarshal(raw, &p.ids) == nil && len(p.ids) > 0:
	default:
		return nil, p, s, badRequest("prompt", "invalid_value", "prompt: want a string, a list of one string, or a non-empty list of token ids (one prompt per request)")
	}
	return &req, p, s, nil
}

// fetchImages fills in the remote images of msgs where the server fetches
// them (Config.RemoteImages); otherwise a remote URL is a 400.
func (s *Server) fetchImages(ctx context.Context, msgs []chat.Message, remote []remoteImage) *apiError {
	for _, ri := range remote {
		param := fmt.Sprintf("messages[%d].content", ri.m)
		if !s.cfg.RemoteImages {
			return badRequest(param, "invalid_value", param+": image_url: remote image URLs are off (gpurun serve --allow-remote-images); send a data: URL")
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, "GET", ri.url, nil)
		if err != nil {
			cancel()
			return badRequest(param, "invalid_value", param+": image_url: "+err.Error())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return badRequest(param, "invalid_value", param+": image_url: "+err.Error())
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBody+1))
		resp.Body.Close()
		cancel()
		switch {
		case err != nil:
			return badRequest(param, "invalid_value", param+": image_url: "+err.Error())
		case resp.StatusCode != http.StatusOK:
			return badRequest(param, "invalid_value", fmt.Sprintf("%s: image_url: %s answered %s", param, ri.url, resp.Status))
		case int64(len(data)) > s.cfg.MaxBody:
			return badRequest(param, "invalid_value", fmt.Sprintf("%s: image_url: %s is over %d bytes", param, ri.url, s.cfg.MaxBody))
		}
		msgs[ri.m].Images[ri.k] = data
	}
	return nil
}
