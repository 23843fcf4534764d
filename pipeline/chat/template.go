// Package chat turns a conversation into model input and back: it renders
// a model's chat template (the Jinja template Hugging Face models ship in
// tokenizer_config.json and GGUF files carry as tokenizer.chat_template) or
// a plain fallback, finds the template's end-of-turn tokens, and keeps a
// multi-turn conversation on one pipeline.Session so that each turn
// prefills only its new tokens.
//
// Templates are rendered the way Hugging Face transformers renders them
// with Python's jinja2: blocks trimmed (trim_blocks, lstrip_blocks), the
// variables messages, bos_token, eos_token and add_generation_prompt, and a
// raise_exception function. The engine is github.com/nikolalohinski/gonja/v2;
// testdata/gen.py renders the test templates with jinja2 itself, and the
// tests compare.
//
// A chat with a model loaded by package gpurun:
//
//	m, _ := gpurun.Open(ctx, "model.gguf")
//	tpl := chat.Plain()
//	if src := m.ChatTemplate(); src != "" {
//		tpl, err = chat.Parse(src, "<s>", "</s>") // the model's BOS and EOS texts
//	}
//	conv, _ := chat.New(m.Model, tpl, chat.Options{System: "You are brief."})
//	for tok, err := range conv.Send(ctx, "Hello!", pipeline.GenerateOptions{MaxTokens: 128}) {
//		...
//	}
package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one turn of a conversation. Role is "system", "user" or
// "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Roles.
const (
	System    = "system"
	User      = "user"
	Assistant = "assistant"
)

// ErrTemplate: a chat template that does not parse, or that refuses a
// conversation (raise_exception, such as Gemma's for a system message).
var ErrTemplate = errors.New("chat: template")

// Template renders conversations into prompt text.
type Template struct {
	tpl      *exec.Template // nil for the plain fallback
	source   string
	bos, eos string
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

func init() {
	gonja.SetLoggerOutput(nullWriter{})
}

type nullWriter struct{}

func (nullWriter) Write(p []byte) (int, error) { return len(p), nil }

// Parse compiles a Jinja chat template. bos and eos are the texts of the
// model's BOS and EOS tokens, which templates use as bos_token and
// eos_token.
func Parse(source, bos, eos string) (*Template, error) {
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	env := &exec.Environment{
		Context: exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables).Update(exec.NewContext(map[string]any{
			"raise_exception": func(msg string) (string, error) { return "", fmt.Errorf("%w: %s", errRaised, msg) },
		})),
		Filters:           filters(),
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat_template": source})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	tpl, err := safeNewTemplate(cfg, loader, env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return &Template{tpl: tpl, source: source, bos: bos, eos: eos}, nil
}

var errRaised = errors.New("raise_exception")

// safeNewTemplate parses, turning a panic of the engine into an error.
func safeNewTemplate(cfg *config.Config, loader loaders.Loader, env *exec.Environment) (tpl *exec.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parse: %v", r)
		}
	}()
	return exec.NewTemplate("/chat_template", cfg, loader, env)
}

// Source is the Jinja source ("" for the plain fallback).
func (t *Template) Source() string { return t.source }

// IsPlain reports whether t is the plain fallback.
func (t *Template) IsPlain() bool { return t.tpl == nil }

// Render renders msgs; with addGenerationPrompt the text ends where the
// assistant's reply begins.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (out string, err error) {
	if t.tpl == nil {
		return renderPlain(msgs, addGenerationPrompt), nil
	}
	list := make([]*exec.Dict, len(msgs))
	for i, m := range msgs {
		list[i] = &exec.Dict{Pairs: []*exec.Pair{
			{Key: exec.AsValue("role"), Value: exec.AsValue(m.Role)},
			{Key: exec.AsValue("content"), Value: exec.AsValue(m.Content)},
		}}
	}
	ctx := exec.NewContext(map[string]any{
		"messages":              list,
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"add_generation_prompt": addGenerationPrompt,
	})
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: render: %v", ErrTemplate, r)
		}
	}()
	out, err = t.tpl.ExecuteToString(ctx)
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
// the EOS token: Gemma, ChatML (Qwen, many fine-tunes), Llama 3, Phi-3.
var endOfTurnMarkers = []string{"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>"}

// EndOfTurn lists the end-of-turn markers the template uses (the EOS token
// aside, which ends generation anyway).
func (t *Template) EndOfTurn() []string {
	var out []string
	for _, m := range endOfTurnMarkers {
		if strings.Contains(t.source, m) {
			out = append(out, m)
		}
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
