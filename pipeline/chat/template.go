// Package chat turns a conversation into model input and back: it renders
// a model's chat template (the Jinja template Hugging Face models ship in
// tokenizer_config.json and GGUF files carry as tokenizer.chat_template) or
// a plain fallback, finds the template's end-of-turn tokens, and keeps a
// multi-turn conversation on one pipeline.Session so that each turn
// prefills only its new tokens.
//
// Templates are rendered the way Hugging Face transformers renders them
// with Python's jinja2: blocks trimmed (trim_blocks, lstrip_blocks), the
// variables messages, bos_token, eos_token, add_generation_prompt, tools
// and documents (none), any others the caller passes (enable_thinking,
// date_string, ...), raise_exception (an error), strftime_now (on a clock
// the caller may fix) and transformers' tojson. The engine is
// github.com/ardanlabs/jinja; source.go first does jinja2's lexing of
// whitespace and literals itself, where the engine's differs. The tests
// render the chat templates of Llama 3.x, Qwen 2.5 and 3, Phi-3.5,
// SmolLM3, Gemma 2 and 3, Mistral Small 3.2 and gpt-oss with
// testdata/render.py (jinja2 itself) and with this package, and compare
// byte for byte.
//
// Known differences from jinja2, all in the engine and none used by those
// templates: Python's str.title, str.capitalize and str.startswith with a
// tuple, str.split with a maximum, upper case that changes length ("ß"),
// printing floats without a fraction ("1.0" prints "1"), none (prints ""
// rather than "None") and tuples, true division of integers, floor
// division of negatives, round (jinja2 rounds half to even, to a float),
// "%" formatting, list repetition, a unary minus before a filter, an
// attribute of an undefined value (empty rather than an error), select
// without a test (an error here), and the fromjson filter (the engine has
// one, jinja2 does not).
//
// A chat with a model loaded by package gpurun:
//
//	m, _ := gpurun.Open(ctx, "model.gguf")
//	tpl := chat.Plain()
//	if src := m.ChatTemplate(); src != "" {
//		tpl, err = chat.Parse(src, "<s>", "</s>") // the model's BOS and EOS texts
//	}
//	conv, _ := chat.New(m.Pipeline(), tpl, chat.Options{System: "You are brief."})
//	for tok, err := range conv.Send(ctx, "Hello!", pipeline.GenerateOptions{MaxTokens: 128}) {
//		...
//	}
//
// Import it to talk to chat models: render their chat templates, keep
// multi-turn conversations and parse tool calls.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation. Role is "system", "user" or
// "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Images are image files for the pipeline.MediaMarker markers of
	// Content, in order (a model with a vision projector); the template
	// renders the markers as text and Render puts the images there.
	Images [][]byte `json:"-"`
	// ToolCalls are an assistant message's calls (rendered as the
	// template writes them; Content may then be empty).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is a tool message's tool name (OpenAI's name field), which
	// some templates write with the result.
	Name string `json:"name,omitempty"`
	// Reasoning is an assistant message's thinking, apart from Content.
	// Templates get it under both names clients use: reasoning_content
	// (Qwen 3, DeepSeek R1, OpenAI-compatible servers) and thinking
	// (gpt-oss's harmony format, Anthropic's thinking blocks).
	Reasoning string `json:"reasoning_content,omitempty"`
}

// ToolCall is a function call of an assistant message, as OpenAI's API
// gives it: Arguments is the JSON text of the arguments object (passed to
// the template as that object, as transformers users pass a dict).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Roles.
const (
	System    = "system"
	User      = "user"
	Assistant = "assistant"
	Tool      = "tool"
)

// ErrTemplate: a chat template that does not parse, or that refuses a
// conversation (raise_exception, such as Gemma 2's for a system message).
var ErrTemplate = errors.New("chat: template")

// Template renders conversations into prompt text.
type Template struct {
	tpl      *jinja.Template // nil for the plain fallback
	source   string
	bos, eos string
	vars     map[string]any // see WithVars
}

// Plain is the fallback for models without a chat template: a system
// message as its own paragraph, then "User: ..." and "Assistant: ..."
// lines, ending with "Assistant:" for the reply; generation stops at
// the next "\nUser:" (see StopStrings).
//
//	You are a helpful assistant.
//
//	User: Hello
//	Assistant: Hi there.
//	User: Tell me a story.
//	Assistant:
func Plain() *Template { return &Template{} }

// Parse compiles a Jinja chat template. bos and eos are the texts of the
// model's BOS and EOS tokens, which templates use as bos_token and
// eos_token.
func Parse(source, bos, eos string) (*Template, error) {
	lexed, err := lex(source)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	tpl, err := safeCompile(lexed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return &Template{tpl: tpl, source: source, bos: bos, eos: eos}, nil
}

// safeCompile compiles, turning a panic of the engine into an error.
func safeCompile(src string) (tpl *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parse: %v", r)
		}
	}()
	return jinja.Compile(orderedDicts(src))
}

var errRaised = errors.New("raise_exception")

// Source is the Jinja source ("" for the plain fallback).
func (t *Template) Source() string { return t.source }

// IsPlain reports whether t is the plain fallback.
func (t *Template) IsPlain() bool { return t.tpl == nil }

// WithVars returns a copy of t that renders with vars as further template
// variables (such as enable_thinking: false for Qwen 3), under those of
// RenderOptions.Vars. Conversations and Render use it.
func (t *Template) WithVars(vars map[string]any) *Template {
	c := *t
	c.vars = make(map[string]any, len(t.vars)+len(vars))
	maps.Copy(c.vars, t.vars)
	maps.Copy(c.vars, vars)
	return &c
}

// RenderOptions are the inputs of a rendering besides the messages.
type RenderOptions struct {
	// AddGenerationPrompt ends the text where the assistant's reply
	// begins.
	AddGenerationPrompt bool
	// Vars are further template variables, such as enable_thinking
	// (Qwen 3, SmolLM3) or date_string (Llama 3.x). Values are nil, bool,
	// int, int64, float64, string, []any and map[string]any.
	Vars map[string]any
	// Now is the time strftime_now formats (the zero time: time.Now()).
	Now time.Time
	// Tools are the tools the template offers the model: each the JSON
	// text of an OpenAI tool ({"type": "function", "function": {"name",
	// "description", "parameters"}}), passed as the template's tools
	// variable with its keys in order (none: tools is None).
	Tools []json.RawMessage
}

// Render renders msgs; with addGenerationPrompt the text ends where the
// assistant's reply begins.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderWith(msgs, RenderOptions{AddGenerationPrompt: addGenerationPrompt})
}

// RenderWith renders msgs the way transformers' apply_chat_template does:
// the variables messages, bos_token, eos_token, add_generation_prompt,
// tools (opts.Tools, or None) and documents (None), opts.Vars, and the
// functions raise_exception and strftime_now.
func (t *Template) RenderWith(msgs []Message, opts RenderOptions) (out string, err error) {
	if t.tpl == nil {
		return renderPlain(msgs, opts.AddGenerationPrompt), nil
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	data := make(map[string]jinja.Value, len(t.vars)+len(opts.Vars)+10)
	for k, v := range t.vars {
		data[k] = jinja.FromGoValue(v)
	}
	for k, v := range opts.Vars {
		data[k] = jinja.FromGoValue(v)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		// An assistant message of tool calls alone gets "" (OpenAI's null
		// content breaks Qwen 3's template, which tests "in" on it).
		d.AsDict().Set("content", jinja.NewString(m.Content))
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args, err := JSONValue([]byte(c.Arguments))
				if err != nil {
					args = jinja.NewString(c.Arguments)
				}
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(c.Name))
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				call.AsDict().Set("id", jinja.NewString(c.ID))
				call.AsDict().Set("type", jinja.NewString("function"))
				call.AsDict().Set("function", fn)
				calls[j] = call
			}
			d.AsDict().Set("tool_calls", jinja.NewList(calls))
		}
		if m.ToolCallID != "" {
			d.AsDict().Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		if m.Name != "" {
			d.AsDict().Set("name", jinja.NewString(m.Name))
		}
		if m.Reasoning != "" {
			d.AsDict().Set("reasoning_content", jinja.NewString(m.Reasoning))
			d.AsDict().Set("thinking", jinja.NewString(m.Reasoning))
		}
		list[i] = d
	}
	data["messages"] = jinja.NewList(list)
	data["bos_token"] = jinja.NewString(t.bos)
	data["eos_token"] = jinja.NewString(t.eos)
	data["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	data["tools"] = jinja.None()
	if len(opts.Tools) > 0 {
		tools := make([]jinja.Value, len(opts.Tools))
		for i, raw := range opts.Tools {
			v, err := JSONValue(raw)
			if err != nil {
				return "", fmt.Errorf("%w: tool %d: %w", ErrTemplate, i, err)
			}
			tools[i] = v
		}
		data["tools"] = jinja.NewList(tools)
	}
	data["documents"] = jinja.None()
	data["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := ""
		if len(args) > 0 && args[0].IsString() {
			msg = args[0].AsString()
		} else if len(args) > 0 {
			msg = args[0].String()
		}
		return jinja.Undefined(), fmt.Errorf("%w: %s", errRaised, msg)
	})
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now takes one format string")
		}
		return jinja.NewString(strftime(now, args[0].AsString())), nil
	})
	for name, fn := range filters {
		data[filterOverrides[name]] = jinja.NewCallable(name, fn)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: render: %v", ErrTemplate, r)
		}
	}()
	out, err = t.tpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return out, nil
}

func renderPlain(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case System:
			b.WriteString(m.Content + "\n\n")
		case User:
			b.WriteString("User: " + m.Content + "\n")
		default:
			b.WriteString("Assistant: " + m.Content + "\n")
		}
	}
	if addGenerationPrompt {
		b.WriteString("Assistant:")
	}
	return b.String()
}

// endOfTurnMarkers are the texts chat templates end a turn with, besides
// the EOS token: Gemma's, ChatML's (Qwen, SmolLM3, many fine-tunes),
// Llama 3's (<|eom_id|> ends a turn that calls a tool), Phi-3's, the
// harmony format's (gpt-oss: <|return|> ends the final answer, <|call|> a
// tool call), Gemma 4's (<turn|> ends a turn, <|tool_response> is written
// by a model that awaits a tool's result; llama.cpp ends generation at
// both) and the SentencePiece EOS text that Llama 2 and Mistral templates
// write.
var endOfTurnMarkers = []string{"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|endoftext|>", "<|return|>", "<|call|>",
	"<turn|>", "<|tool_response>", "</s>"}

// EndOfTurn lists the end-of-turn markers the template writes, and its
// eos_token when it writes that (Mistral, Phi-3.5). In the harmony format
// (a template that writes <|return|> or <|call|>), <|end|> closes each
// message of a reply (the analysis before the final answer) rather than
// the turn, so it is left out there, as llama.cpp does.
func (t *Template) EndOfTurn() []string {
	var out []string
	harmony := strings.Contains(t.source, "<|return|>") || strings.Contains(t.source, "<|call|>")
	for _, m := range endOfTurnMarkers {
		if strings.Contains(t.source, m) && !(harmony && m == "<|end|>") {
			out = append(out, m)
		}
	}
	if t.eos != "" && strings.Contains(t.source, "eos_token") && !slices.Contains(out, t.eos) {
		out = append(out, t.eos)
	}
	return out
}

// StopStrings are texts that end a reply when the model writes them rather
// than a stop token: the plain fallback's next "User:" line.
func (t *Template) StopStrings() []string {
	if t.tpl == nil {
		return []string{"\nUser:"}
	}
	return nil
}
