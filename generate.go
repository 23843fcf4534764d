package gpurun

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/gpurun/gpurun/pipeline"
)

// The command line's sampling defaults (`gpurun run` and `chat` without
// --max-tokens, --temperature, --top-k or --top-p; the browser page's
// too). The Go API has none: its zero GenerateOptions is greedy.
const (
	DefaultMaxTokens   = 256
	DefaultTemperature = 0.8
	DefaultTopK        = 40
	DefaultTopP        = 1.0
)

// GenerateOptions control one generation. It is one type for every entry
// point (this package, package pipeline, a server's requests and a model's
// Variants), with one zero value: greedy decoding (the lowest id wins a
// tie) until a stop token or a full KV cache. Set Temperature (and TopK,
// TopP, Seed) to sample; a zero TopK or TopP means no limit and the same
// Seed gives the same text. Generate rejects values out of range with
// ErrOptions (see pipeline.GenerateOptions.Validate), never clamping them.
type GenerateOptions = pipeline.GenerateOptions

// Speculation configures speculative decoding (GenerateOptions.Speculation).
type Speculation = pipeline.Speculation

// Prompt is the input of one Generate: text (tokenized; BOS is prepended at
// the start of a conversation when the model asks for it) or token ids used
// exactly as given.
type Prompt = pipeline.Prompt

// Text is a text prompt.
func Text(s string) Prompt { return Prompt{Text: s} }

// IDs is a prompt of token ids, used as given (no BOS is added).
func IDs(ids ...int) Prompt { return Prompt{IDs: ids} }

// Token is one streamed step: the sampled id and the text it releases (see
// pipeline.Token).
type Token = pipeline.Token

// Metrics measure a session's last generation.
type Metrics = pipeline.Metrics

// StopReason says why a generation ended.
type StopReason = pipeline.StopReason

// Why a generation ended (Metrics.StopReason).
const (
	StopMaxTokens  = pipeline.StopMaxTokens
	StopToken      = pipeline.StopToken
	StopString     = pipeline.StopString
	StopCacheFull  = pipeline.StopCacheFull
	StopCancelled  = pipeline.StopCancelled
	StopError      = pipeline.StopError
	StopByConsumer = pipeline.StopByConsumer
)

// Session is one conversation with a model: every Generate continues it,
// and only tokens not yet in the KV cache are run. Not safe for concurrent
// use.
type Session struct {
	s *pipeline.Session
}

// NewSession starts an empty conversation.
func (m *Model) NewSession() *Session { return &Session{s: m.pm.NewSession()} }

// Generate appends prompt to the conversation and streams the generated
// tokens until MaxTokens, a stop token, a stop string, a full KV cache, ctx
// being cancelled, or the loop being left. An error (invalid options, a
// prompt too long, cancellation) is yielded once, last; Metrics then says
// what happened, with StopCancelled for a cancelled ctx.
func (s *Session) Generate(ctx context.Context, prompt Prompt, opts GenerateOptions) iter.Seq2[Token, error] {
	return s.s.Generate(ctx, prompt, opts)
}

// Metrics measure the last Generate.
func (s *Session) Metrics() Metrics { return s.s.Metrics() }

// History is the conversation so far as token ids.
func (s *Session) History() []int { return s.s.History() }

// LastPrompt is the ids the last Generate added for its prompt (see
// pipeline.Session.LastPrompt).
func (s *Session) LastPrompt() []int { return s.s.LastPrompt() }

// Reset forgets the conversation.
func (s *Session) Reset() { s.s.Reset() }

// chatTemplateJSON extracts chat_template from a tokenizer_config.json: a
// string, or a list of {"name", "template"} of which "default" (else the
// first) is taken.
func chatTemplateJSON(data []byte) string {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if json.Unmarshal(data, &cfg) != nil || len(cfg.ChatTemplate) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(cfg.ChatTemplate, &s) == nil {
		return s
	}
	var list []struct{ Name, Template string }
	if json.Unmarshal(cfg.ChatTemplate, &list) != nil || len(list) == 0 {
		return ""
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template
		}
	}
	return list[0].Template
}
