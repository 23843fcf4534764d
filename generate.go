package gpurun

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// Defaults of GenerateOptions' zero fields; the command line uses the same.
const (
	DefaultMaxTokens   = 256
	DefaultTemperature = 0.8
	DefaultTopK        = 40
	DefaultTopP        = 1.0
)

// NoLimit as GenerateOptions.MaxTokens generates until a stop token, a stop
// string or a full KV cache.
const NoLimit = -1

// GenerateOptions control one generation. A zero field means its default
// (the Default* constants; the seed is then random and reported by
// Resolve), so the zero value samples like `gpurun run` does.
type GenerateOptions struct {
	// MaxTokens is how many tokens to generate at most: 1 or more, or
	// NoLimit; 0 means DefaultMaxTokens.
	MaxTokens int
	// Greedy picks the most likely token at every step (the lowest id wins
	// a tie); the sampling fields below are then ignored.
	Greedy bool
	// Temperature divides the logits before sampling: a finite number above
	// 0 (use Greedy for greedy decoding); 0 means DefaultTemperature.
	Temperature float32
	// TopK samples among the TopK most likely tokens: 1 or more (a value
	// at least the vocabulary size means no limit); 0 means DefaultTopK.
	TopK int
	// TopP samples from the smallest set of tokens whose probabilities add
	// up to TopP: in (0, 1], 1 meaning no limit; 0 means DefaultTopP.
	TopP float32
	// Seed seeds the sampler (the same seed gives the same text); 0 picks
	// a random one.
	Seed uint64
	// StopStrings end generation when the text contains one; the text from
	// the stop string on is not streamed.
	StopStrings []string
	// StopTokens end generation (not streamed) besides the model's EOS and
	// end-of-turn tokens.
	StopTokens []int
	// IgnoreStopTokens keeps generating through EOS and the model's stop
	// tokens (benchmarks use it to generate exactly MaxTokens).
	IgnoreStopTokens bool
	// Grammar constrains the output to JSON: constrain.Compile(schema) for
	// a JSON schema (a subset; compile it once and reuse it, so its token
	// masks are computed once), constrain.JSONObject() for any object.
	// Generation ends when the document is complete.
	Grammar *constrain.Grammar
	// Speculation, when set, decodes speculatively: a draft model or
	// prompt lookup proposes tokens the model verifies several per step
	// (see pipeline.Speculation).
	Speculation *pipeline.Speculation
}

// Resolve validates o and fills in the defaults, returning the explicit
// options package pipeline takes. A zero Seed becomes a random one, which
// the result carries.
func (o GenerateOptions) Resolve() (pipeline.GenerateOptions, error) {
	var p pipeline.GenerateOptions
	switch {
	case o.MaxTokens == 0:
		p.MaxTokens = DefaultMaxTokens
	case o.MaxTokens == NoLimit:
		p.MaxTokens = 0
	case o.MaxTokens < 0:
		return p, fmt.Errorf("%w: MaxTokens %d, want 1 or more, NoLimit (-1), or 0 for the default %d", ErrOptions, o.MaxTokens, DefaultMaxTokens)
	default:
		p.MaxTokens = o.MaxTokens
	}
	t := float64(o.Temperature)
	if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return p, fmt.Errorf("%w: Temperature %v, want a finite number > 0 (Greedy for greedy decoding), or 0 for the default %v", ErrOptions, o.Temperature, DefaultTemperature)
	}
	if o.TopK < 0 {
		return p, fmt.Errorf("%w: TopK %d, want 1 or more, or 0 for the default %d", ErrOptions, o.TopK, DefaultTopK)
	}
	if tp := float64(o.TopP); math.IsNaN(tp) || tp < 0 || tp > 1 {
		return p, fmt.Errorf("%w: TopP %v, want a number in (0, 1], or 0 for the default %v", ErrOptions, o.TopP, DefaultTopP)
	}
	p.Temperature, p.TopK, p.TopP = o.Temperature, o.TopK, o.TopP
	if p.Temperature == 0 {
		p.Temperature = DefaultTemperature
	}
	if p.TopK == 0 {
		p.TopK = DefaultTopK
	}
	if p.TopP == 0 {
		p.TopP = DefaultTopP
	}
	if o.Greedy {
		p.Temperature, p.TopK, p.TopP = 0, 0, 0
	}
	p.Seed = o.Seed
	for p.Seed == 0 {
		p.Seed = rand.Uint64()
	}
	p.StopStrings = o.StopStrings
	p.StopTokens = o.StopTokens
	p.IgnoreStopTokens = o.IgnoreStopTokens
	p.Grammar = o.Grammar
	p.Speculation = o.Speculation
	return p, nil
}

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
	s    *pipeline.Session
	seed uint64
}

// NewSession starts an empty conversation.
func (m *Model) NewSession() *Session { return &Session{s: m.Model.NewSession()} }

// Generate appends prompt to the conversation and streams the generated
// tokens until MaxTokens, a stop token, a stop string, a full KV cache, ctx
// being cancelled, or the loop being left. An error (invalid options, a
// prompt too long, cancellation) is yielded once, last; Metrics then says
// what happened, with StopCancelled for a cancelled ctx.
func (s *Session) Generate(ctx context.Context, prompt Prompt, opts GenerateOptions) iter.Seq2[Token, error] {
	p, err := opts.Resolve()
	if err != nil {
		return func(yield func(Token, error) bool) { yield(Token{}, err) }
	}
	s.seed = p.Seed
	return s.s.Generate(ctx, prompt, p)
}

// Metrics measure the last Generate.
func (s *Session) Metrics() Metrics { return s.s.Metrics() }

// Seed is the seed the last Generate sampled with (the random one when
// GenerateOptions.Seed was 0).
func (s *Session) Seed() uint64 { return s.seed }

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
