package serve

// Anthropic's Messages API: POST /v1/messages (whole, or server-sent
// events with stream: true) and POST /v1/messages/count_tokens, over the
// same models, templates, slots and queue as the OpenAI routes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// messagesRequest is the body of POST /v1/messages (and, without the
// generation fields, of /v1/messages/count_tokens).
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Stream        bool               `json:"stream"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block of a message: text, thinking,
// redacted_thinking, tool_use (an assistant's call) or tool_result (a
// user's answer to one).
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicError writes e in Anthropic's shape: {"type": "error",
// "error": {"type", "message"}}, the type told by the status.
func anthropicError(w http.ResponseWriter, e *apiError) {
	writeErrorBody(w, e, anthropicErrorBody(e))
}

func anthropicErrorBody(e *apiError) map[string]any {
	typ := "api_error"
	switch e.Status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusServiceUnavailable:
		typ = "overloaded_error"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": e.Message}}
}

// anthropicChat is a decoded Messages request.
type anthropicChat struct {
	msgs   []chat.Message
	smp    sampling
	vars   map[string]any
	budget *int
}

// decodeMessages decodes and validates a Messages request; generation
// says the generation fields (max_tokens) are required.
func decodeMessages(body []byte, modelID string, generation bool) (*anthropicChat, *apiError) {
	var req messagesRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if generation && req.MaxTokens == nil {
		return nil, badRequest("max_tokens", "invalid_value", "max_tokens: Field required")
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		return nil, badRequest("temperature", "invalid_value", fmt.Sprintf("temperature %v: want a number in [0, 1]", *t))
	}
	f := samplingFields{Model: req.Model, Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, MaxTokens: req.MaxTokens}
	smp, aerr := f.validate(modelID)
	if aerr != nil {
		return nil, aerr
	}
	for i, s := range req.StopSequences {
		if s == "" {
			return nil, badRequest("stop_sequences", "invalid_value", fmt.Sprintf("stop_sequences[%d]: an empty string", i))
		}
	}
	smp.stops = req.StopSequences
	out := &anthropicChat{smp: smp, vars: map[string]any{}}

	// Tools and tool_choice, as OpenAI's.
	var raw []json.RawMessage
	for i, t := range req.Tools {
		if t.Name == "" || t.Type != "" && t.Type != "custom" {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "invalid_value", fmt.Sprintf(`tools[%d]: want {"name": ..., "description": ..., "input_schema": ...} (client tools only)`, i))
		}
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		fn := map[string]any{"name": t.Name, "parameters": schema}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		data, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].input_schema", i), "invalid_value", err.Error())
		}
		raw = append(raw, data)
	}
	var choice json.RawMessage
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "none":
			choice, _ = json.Marshal(c.Type)
		case "any":
			choice = json.RawMessage(`"required"`)
		case "tool":
			choice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]any{"name": c.Name}})
		default:
			return nil, badRequest("tool_choice.type", "invalid_value", fmt.Sprintf("tool_choice.type %q: want auto, any, tool or none", c.Type))
		}
	}
	if len(raw) > 0 || choice != nil {
		if smp.tools, aerr = decodeTools(raw, choice); aerr != nil {
			return nil, aerr
		}
		out.smp.tools = smp.tools
	}

	// Thinking.
	if th := req.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			out.vars["enable_thinking"] = true
			if b := th.BudgetTokens; b != nil {
				if *b < 1 {
					return nil, badRequest("thinking.budget_tokens", "invalid_value", fmt.Sprintf("thinking.budget_tokens %d: want at least 1", *b))
				}
				out.budget = b
			}
		case "disabled":
			out.vars["enable_thinking"] = false
			zero := 0
			out.budget = &zero
		default:
			return nil, badRequest("thinking.type", "invalid_value", fmt.Sprintf("thinking.type %q: want enabled or disabled", th.Type))
		}
	}

	// The system prompt and the messages.
	if len(req.System) > 0 && string(req.System) != "null" {
		text, err := anthropicText(req.System)
		if err != nil {
			return nil, badRequest("system", "invalid_value", "system: "+err.Error())
		}
		out.msgs = append(out.msgs, chat.Message{Role: chat.System, Content: text})
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "invalid_value", "messages: want at least one message")
	}
	toolNames := map[string]string{} // tool_use id: the tool's name
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		if m.Role != chat.User && m.Role != chat.Assistant {
			return nil, badRequest(param+".role", "invalid_value", fmt.Sprintf("%s.role %q: want user or assistant", param, m.Role))
		}
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return nil, badRequest(param+".content", "invalid_value", param+".content: "+err.Error())
		}
		msg := chat.Message{Role: m.Role}
		var texts []string
		for j, b := range blocks {
			bparam := fmt.Sprintf("%s.content[%d]", param, j)
			switch {
			case b.Type == "text":
				texts = append(texts, b.Text)
			case b.Type == "thinking" && m.Role == chat.Assistant:
				msg.Reasoning += b.Thinking
			case b.Type == "redacted_thinking" && m.Role == chat.Assistant:
			case b.Type == "tool_use" && m.Role == chat.Assistant:
				if b.Name == "" || b.ID == "" {
					return nil, badRequest(bparam, "invalid_value", bparam+": a tool_use block needs an id and a name")
				}
				var args bytes.Buffer
				input := b.Input
				if len(input) == 0 || string(input) == "null" {
					input = json.RawMessage("{}")
				}
				if err := json.Compact(&args, input); err != nil {
					return nil, badRequest(bparam+".input", "invalid_value", bparam+".input: "+err.Error())
				}
				toolNames[b.ID] = b.Name
				msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args.String()})
			case b.Type == "tool_result" && m.Role == chat.User:
				if b.ToolUseID == "" {
					return nil, badRequest(bparam, "invalid_value", bparam+": a tool_result block needs a tool_use_id")
				}
				text := ""
				if len(b.Content) > 0 && string(b.Content) != "null" {
					if text, err = anthropicText(b.Content); err != nil {
						return nil, badRequest(bparam+".content", "invalid_value", bparam+".content: "+err.Error())
					}
				}
				if b.IsError {
					text = "error: " + text
				}
				// Results come first in a user turn, each a tool message.
				out.msgs = append(out.msgs, chat.Message{Role: chat.Tool, Content: text, ToolCallID: b.ToolUseID, Name: toolNames[b.ToolUseID]})
			default:
				return nil, badRequest(bparam+".type", "invalid_value", fmt.Sprintf("%s.type %q: a %s message takes %s blocks", bparam, b.Type, m.Role, blockKinds(m.Role)))
			}
		}
		msg.Content = strings.Join(texts, "\n")
		if m.Role == chat.User && len(texts) == 0 && len(blocks) > 0 {
			continue // tool results alone
		}
		out.msgs = append(out.msgs, msg)
	}
	return out, nil
}

func blockKinds(role string) string {
	if role == chat.User {
		return "text and tool_result"
	}
	return "text, thinking and tool_use"
}

// anthropicBlocks reads a message's content: a string (one text block)
// or a list of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errors.New("want a string or a list of content blocks")
	}
	return blocks, nil
}

// anthropicText reads a string or a list of text blocks, joined (a
// system prompt, a tool result's content).
func anthropicText(raw json.RawMessage) (string, error) {
	blocks, err := anthropicBlocks(raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return "", fmt.Errorf("block %d: type %q, only text blocks are supported here", i, b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// anthropicRequest reads and decodes a Messages request, routed to its
// model, and renders it: false after writing the error of a bad one.
func (s *Server) anthropicRequest(w http.ResponseWriter, r *http.Request, generation bool) (*http.Request, *pipeline.Model, *anthropicChat, *chat.Template, chat.Prompt, *toolMode, bool) {
	fail := func(e *apiError) (*http.Request, *pipeline.Model, *anthropicChat, *chat.Template, chat.Prompt, *toolMode, bool) {
		anthropicError(w, e)
		return r, nil, nil, nil, chat.Prompt{}, nil, false
	}
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		return fail(aerr)
	}
	r, m, id, name := s.route(r, body)
	if name != "" && name != id {
		return fail(s.notFound(name))
	}
	req, aerr := decodeMessages(body, id, generation)
	if aerr != nil {
		return fail(aerr)
	}
	tpl, p, tools, aerr := s.renderChat(m, req.msgs, req.smp.tools, req.vars)
	if aerr != nil {
		return fail(aerr)
	}
	return r, m, req, tpl, p, tools, true
}

func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	_, _, _, _, p, _, ok := s.anthropicRequest(w, r, false)
	if !ok {
		return
	}
	writeJSON(w, map[string]any{"input_tokens": len(p.IDs)})
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	r, m, req, tpl, p, tools, ok := s.anthropicRequest(w, r, true)
	if !ok {
		return
	}
	smp := req.smp
	gen := smp.options()
	if tools != nil && tools.forced != nil {
		gen.Grammar = tools.forced
	}
	gen.StopTokens = p.StopTokens
	gen.StopStrings = append(gen.StopStrings, p.StopStrings...)
	th := s.thinkingFor(tpl, p.Text, ReasoningDeepSeek, req.budget)
	if aerr := s.enter(); aerr != nil {
		anthropicError(w, aerr)
		return
	}
	defer s.leave()
	ctx := r.Context()
	_, modelID := routed(r, s)
	gen.Speculation = s.cfg.Speculation
	id := newID("msg_")
	var st *anthropicStream
	if smp.stream {
		st = &anthropicStream{w: w, message: map[string]any{"id": id, "type": "message", "role": "assistant", "model": modelID,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": len(p.IDs), "output_tokens": 0}}}
	}
	rep, err := s.run(ctx, m, pipeline.Prompt{IDs: p.IDs}, gen, th, tpl.IsPlain(), func(reasoning, content string) error {
		if st == nil {
			return nil
		}
		if reasoning != "" {
			if err := st.text("thinking", reasoning); err != nil {
				return err
			}
		}
		if content != "" && tools == nil {
			return st.text("text", content)
		}
		return nil
	})
	if err != nil {
		aerr := s.runFailure(ctx, id, err, kindChat)
		if aerr == nil {
			return
		}
		if st != nil && st.started {
			st.event("error", anthropicErrorBody(aerr))
			return
		}
		anthropicError(w, aerr)
		return
	}
	met := rep.metrics
	stopReason, stopSeq := "end_turn", any(nil)
	switch met.StopReason {
	case pipeline.StopMaxTokens, pipeline.StopCacheFull:
		stopReason = "max_tokens"
	case pipeline.StopString:
		if seq := matchedStop(m, rep.generated, smp.stops); seq != "" {
			stopReason, stopSeq = "stop_sequence", seq
		}
	}
	content := rep.content
	var calls []map[string]any
	if tools != nil {
		var parsed []chat.ToolCall
		content, parsed = chat.ParseToolCalls(tools.format, rep.content)
		for _, c := range parsed {
			calls = append(calls, map[string]any{"type": "tool_use", "id": newID("toolu_"), "name": c.Name, "input": argsObject(c)})
		}
		if len(calls) > 0 {
			stopReason, stopSeq = "tool_use", nil
		}
	}
	usage := map[string]any{"input_tokens": met.PromptTokens, "output_tokens": met.GeneratedTokens,
		"cache_read_input_tokens": met.CachedTokens, "cache_creation_input_tokens": 0}
	if st != nil {
		if tools != nil && content != "" && st.text("text", content) != nil {
			return
		}
		for _, c := range calls {
			args, _ := json.Marshal(c["input"])
			if st.block(map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}) != nil ||
				st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": st.index,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}}) != nil {
				return
			}
		}
		if st.start() != nil || st.close() != nil {
			return
		}
		if st.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stopReason, "stop_sequence": stopSeq},
			"usage": map[string]any{"output_tokens": met.GeneratedTokens}}) != nil {
			return
		}
		st.event("message_stop", map[string]any{"type": "message_stop"})
		return
	}
	blocks := []any{}
	if rep.reasoning != "" {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": rep.reasoning, "signature": ""})
	}
	if content != "" || len(calls) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": content})
	}
	for _, c := range calls {
		blocks = append(blocks, c)
	}
	writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": modelID, "content": blocks,
		"stop_reason": stopReason, "stop_sequence": stopSeq, "usage": usage})
}

// argsObject is a parsed call's arguments as a JSON value ({} when the
// model wrote invalid JSON), for the APIs that send them as an object.
func argsObject(c chat.ToolCall) json.RawMessage {
	if !json.Valid([]byte(c.Arguments)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c.Arguments)
}

// matchedStop is the stop sequence that ended a reply of generated ids
// (its text includes the stop sequence): the one that starts first.
func matchedStop(m *pipeline.Model, generated []int, stops []string) string {
	text, err := m.Decode(generated)
	if err != nil {
		return ""
	}
	best, at := "", len(text)+1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && i < at {
			best, at = s, i
		}
	}
	return best
}

// anthropicStream writes Anthropic's streamed events: message_start,
// then each content block (content_block_start, its deltas,
// content_block_stop), message_delta with the stop reason and usage, and
// message_stop.
type anthropicStream struct {
	w       http.ResponseWriter
	message map[string]any
	started bool
	index   int    // the current block's
	open    string // the current block's type; "" when none is open
}

func (a *anthropicStream) start() error {
	if a.started {
		return nil
	}
	a.started = true
	a.index = -1
	startEvents(a.w)
	return a.event("message_start", map[string]any{"type": "message_start", "message": a.message})
}

func (a *anthropicStream) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeEvent(a.w, name, data)
}

// close ends the open block.
func (a *anthropicStream) close() error {
	if a.open == "" {
		return nil
	}
	if a.open == "thinking" {
		// No signature: the thinking is not signed here.
		if err := a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.index,
			"delta": map[string]any{"type": "signature_delta", "signature": ""}}); err != nil {
			return err
		}
	}
	a.open = ""
	return a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": a.index})
}

// block closes the open block and starts the next.
func (a *anthropicStream) block(b map[string]any) error {
	if err := a.start(); err != nil {
		return err
	}
	if err := a.close(); err != nil {
		return err
	}
	a.index++
	a.open = b["type"].(string)
	return a.event("content_block_start", map[string]any{"type": "content_block_start", "index": a.index, "content_block": b})
}

// text streams text of a thinking or text block, starting the block when
// another is open.
func (a *anthropicStream) text(kind, text string) error {
	if !a.started || a.open != kind {
		b := map[string]any{"type": kind, kind: ""}
		if kind == "thinking" {
			b["signature"] = ""
		}
		if err := a.block(b); err != nil {
			return err
		}
	}
	return a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.index,
		"delta": map[string]any{"type": kind + "_delta", kind: text}})
}
