package pipeline

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// Prompt is either text (tokenized, with BOS prepended at the start of a
// session when the model's config says AddBOS) or token ids used exactly as
// given. IDs wins when both are set.
type Prompt struct {
	Text string
	IDs  []int
	// Images are image files (PNG, JPEG, GIF, WebP), one for each
	// MediaMarker of Text (or each MediaID of IDs, a rendered chat
	// template's tokens), in order: each becomes the model's image
	// markers around its embeddings from the vision projector
	// (Options.MMProj). A model without one refuses them (ErrNoVision).
	Images [][]byte
	// Audio are WAV files (16-bit PCM, mono or stereo, any rate: resampled
	// to 16 kHz as llama.cpp does), one for each MediaMarker
	// (or MediaID) in order, for a model whose projector (Options.MMProj)
	// is an audio one (qwen2a): each becomes its audio markers around the
	// embeddings of its 30 s chunks. A prompt carries images or audio, as
	// its model's projector takes (ErrNoVision, ErrNoAudio otherwise).
	Audio [][]byte
}

// GenerateOptions control one generation. The zero value is greedy decoding
// until a stop token or a full cache. (Package gpurun at the module root
// has the command line's defaults instead: temperature 0.8, top-k 40, 256
// tokens.) Generate rejects invalid values with ErrOptions.
type GenerateOptions struct {
	MaxTokens   int     // tokens to generate, >= 0; 0: until a stop or the cache is full
	Temperature float32 // >= 0; 0: greedy
	TopK        int     // >= 0; 0: no limit
	TopP        float32 // in [0, 1]; 0 or 1: no limit
	Seed        uint64
	// StopStrings end generation when the generated text contains one; the
	// text from the stop string on is not streamed.
	StopStrings []string
	// Template wraps a text prompt in the config's PromptPrefix and
	// PromptSuffix.
	//
	// Deprecated: package pipeline/chat renders the model's chat template
	// (or a plain fallback) over a whole conversation.
	Template bool
	// StopTokens end generation (not streamed) besides the config's EOS and
	// StopTokens, such as a chat template's end-of-turn token.
	StopTokens []int
	// IgnoreStopTokens keeps generating through EOS and the stop tokens
	// (benchmarks use it to generate exactly MaxTokens).
	IgnoreStopTokens bool
	// Grammar, when set, constrains the output to its JSON documents
	// (package constrain: a JSON schema or any JSON object): only tokens
	// that continue a valid document are drawn, an end token only where
	// the document may end, and generation stops when it is complete
	// (StopToken). The masks are computed on the host; where the backend
	// picks tokens in its program (a GPU), each step's mask is set on the
	// program (gpu.Program.SetTokenMask) and only the id comes back. It needs a
	// tokenizer.
	Grammar *constrain.Grammar
	// Speculation, when set, decodes speculatively (speculative.go): a
	// draft model or prompt lookup proposes tokens that the model checks
	// several in one step; greedy output is unchanged, sampled output
	// keeps the model's distribution. A constrained generation (Grammar)
	// decodes without it.
	Speculation *Speculation
}

// ErrOptions: GenerateOptions out of range (see Validate).
var ErrOptions = errors.New("pipeline: invalid options")

// Validate checks the options' ranges: MaxTokens, TopK and Temperature not
// negative, Temperature not NaN or infinite, TopP in [0, 1]. It is the one
// check of a generation's options: what Generate derives from valid
// options (the host sampler's rule, the device's fusion.Sampling) is valid
// by construction, and the kernels only guard that invariant.
func (o GenerateOptions) Validate() error {
	t, p := float64(o.Temperature), float64(o.TopP)
	switch {
	case o.MaxTokens < 0:
		return fmt.Errorf("%w: max tokens %d is negative", ErrOptions, o.MaxTokens)
	case math.IsNaN(t) || math.IsInf(t, 0) || t < 0:
		return fmt.Errorf("%w: temperature %v, want a finite number >= 0", ErrOptions, o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("%w: top-k %d is negative", ErrOptions, o.TopK)
	case math.IsNaN(p) || p < 0 || p > 1:
		return fmt.Errorf("%w: top-p %v, want a number in [0, 1]", ErrOptions, o.TopP)
	case o.Speculation != nil:
		return o.Speculation.validate()
	}
	return nil
}

// sampling is the rule of a device's sampling program for valid options,
// built once in the program's form (a top-k past the vocabulary keeps
// every token, as MaxInt32 does), and whether the options sample at all (a
// temperature above 0 and a top-k other than 1); otherwise decoding is
// greedy.
func (o *GenerateOptions) sampling() (fusion.Sampling, bool) {
	if !(o.Temperature > 0) || o.TopK == 1 {
		return fusion.Sampling{}, false
	}
	return fusion.Sampling{Temperature: o.Temperature, TopK: min(o.TopK, math.MaxInt32), TopP: o.TopP, Seed: o.Seed}, true
}

// Token is one streamed step. Every generated token (Metrics.GeneratedTokens
// counts them) is streamed once, in order, with its ID; stop tokens are not.
// Piece is the text released with it: the token's text, possibly empty
// while an incomplete UTF-8 sequence or a possible stop-string start is
// held back, plus earlier held-back text. The token that completes a stop
// string comes with only the text before the stop string (often none). A
// final Token with ID -1 carries held-back text when generation ends on a
// stop token or a full cache.
type Token struct {
	ID    int
	Piece string
}

// StopReason says why a generation ended (Metrics.StopReason). Its string
// form is what `gpurun run --json` reports as stop_reason.
type StopReason string

// Stop reasons reported in Metrics.
const (
	StopMaxTokens  StopReason = "max_tokens"  // GenerateOptions.MaxTokens tokens were generated
	StopToken      StopReason = "stop_token"  // the model produced EOS or another stop token
	StopString     StopReason = "stop_string" // the text reached one of GenerateOptions.StopStrings
	StopCacheFull  StopReason = "cache_full"  // the KV cache has no room for another token
	StopCancelled  StopReason = "cancelled"   // the context was cancelled or timed out
	StopError      StopReason = "error"       // a backend or input error (yielded as the last item)
	StopByConsumer StopReason = "consumer"    // the range loop over Generate stopped early
)

// Metrics describe the last generation of a session.
type Metrics struct {
	PromptTokens  int // tokens of the prompt (including BOS)
	PrefillTokens int // tokens actually run to prefill (context not reused from the cache)
	// CachedTokens are the tokens of the prompt (not of the conversation
	// before it) whose keys and values were reused from the slot's cache
	// or the prefix cache rather than run.
	CachedTokens        int
	GeneratedTokens     int           // tokens sampled and streamed (stop tokens excluded)
	TimeToFirstToken    time.Duration // from the Generate call to the first sampled token; 0 when none was sampled
	PrefillTime         time.Duration // running the prompt (after waiting for the model)
	DecodeTime          time.Duration // decode steps after the first token
	PrefillTokensPerSec float64
	DecodeTokensPerSec  float64 // decode steps per second; 0 when there was no decode step
	DecodeSteps         int     // tokens run through the decode program after the first one
	// DevicePicked counts the tokens (a stop token included) the
	// backend's argmax or sampling program picked (only the id read back;
	// under a grammar, with the token mask set on the program); the others
	// were picked on the host from a row of logits.
	DevicePicked int
	// Speculative decoding (GenerateOptions.Speculation): the tokens
	// drafted, the drafts the model kept, and the model's steps after the
	// first token (verifications and plain decode steps), so that
	// AcceptedTokens/DraftTokens is the acceptance rate and
	// DecodeSteps/TargetSteps the tokens per model step.
	DraftTokens, AcceptedTokens, TargetSteps int
	StopReason                               StopReason
}

// Session is one conversation: the tokens so far. Generate continues it.
// A session is not safe for concurrent use; sessions of one model generate
// at once up to its Slots, the others wait.
type Session struct {
	m       *Model
	history []int // every token of the conversation, from position 0
	prompt  []int // the ids the last Generate added for its prompt
	metrics Metrics
}

// NewSession starts an empty conversation.
func (m *Model) NewSession() *Session { return &Session{m: m} }

// Metrics returns the measurements of the last Generate.
func (s *Session) Metrics() Metrics { return s.metrics }

// Reset forgets the conversation; the next Generate starts a new one.
func (s *Session) Reset() { s.history, s.prompt, s.metrics = nil, nil, Metrics{} }

// History returns the conversation's token ids.
func (s *Session) History() []int { return append([]int(nil), s.history...) }

// LastPrompt returns the ids the last Generate added to the conversation
// for its prompt: the tokenized text (with BOS at the start of a
// conversation when the config says so) or the given IDs. They are known
// once the prompt is checked, so a Generate cancelled or failing before its
// first token still has them; nil when the prompt or options were invalid.
func (s *Session) LastPrompt() []int { return append([]int(nil), s.prompt...) }

// promptIDs turns a prompt into the ids to append to the conversation.
func (s *Session) promptIDs(ctx context.Context, p Prompt, opts *GenerateOptions) ([]int, error) {
	cfg := &s.m.cfg
	var ids []int
	if len(p.Images) > 0 || len(p.Audio) > 0 {
		text := p.Text
		if opts.Template {
			p.Text = cfg.PromptPrefix + text + cfg.PromptSuffix
		}
		var err error
		if ids, err = s.mediaPromptIDs(ctx, p, len(s.history) == 0 && cfg.AddBOS && cfg.BOS >= 0); err != nil {
			return nil, err
		}
	} else if p.IDs != nil {
		ids = append(ids, p.IDs...)
	} else {
		if s.m.tok == nil {
			return nil, fmt.Errorf("%w: a text prompt needs one (give token ids)", ErrNoTokenizer)
		}
		text := p.Text
		if opts.Template {
			text = cfg.PromptPrefix + text + cfg.PromptSuffix
		}
		if len(s.history) == 0 && cfg.AddBOS && cfg.BOS >= 0 {
			ids = append(ids, cfg.BOS)
		}
		ids = append(ids, s.m.tok.Encode(text)...)
	}
	if len(ids) == 0 && len(s.history) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrPrompt)
	}
	for i, id := range ids {
		if id < 0 && (len(p.Images) > 0 || len(p.Audio) > 0) {
			continue // an image's position (mediaID)
		}
		if id < 0 || id >= cfg.VocabSize {
			return nil, fmt.Errorf("%w: id %d at %d outside the vocabulary of %d", ErrPrompt, id, i, cfg.VocabSize)
		}
	}
	if opts.Grammar != nil && s.m.tok == nil {
		return nil, fmt.Errorf("%w: constrained output needs one", ErrNoTokenizer)
	}
	if len(opts.StopStrings) > 0 && s.m.tok == nil {
		return nil, fmt.Errorf("%w: stop strings need one", ErrNoTokenizer)
	}
	return ids, nil
}

// Generate appends the prompt to the conversation, prefills it and streams
// generated tokens until MaxTokens, a stop token (the config's EOS and
// StopTokens; not streamed), a stop string, a full cache, cancellation, or
// the consumer breaking the loop. Errors are yielded once, last.
func (s *Session) Generate(ctx context.Context, prompt Prompt, opts GenerateOptions) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		start := time.Now()
		s.metrics, s.prompt = Metrics{}, nil
		if err := opts.Validate(); err != nil {
			s.fail(yield, err)
			return
		}
		ids, err := s.promptIDs(ctx, prompt, &opts)
		if err != nil {
			s.fail(yield, err)
			return
		}
		s.prompt = ids
		m := s.m
		if len(s.history)+len(ids) > m.maxCache {
			s.fail(yield, fmt.Errorf("%w: %d tokens with the conversation so far, cache holds %d", ErrPromptTooLong, len(s.history)+len(ids), m.maxCache))
			return
		}
		s.metrics.PromptTokens = len(ids)
		context := append(append([]int(nil), s.history...), ids...)
		sl, err := m.acquire(ctx, context)
		if err != nil {
			s.fail(yield, err)
			return
		}
		defer m.release(sl)
		// The first token comes from the prefill's logits on the host; with
		// device picking the later ones come from the argmax or sampling
		// program, compiled at load.
		pick, err := m.devicePicker(sl, &opts)
		row := make([]float32, m.cfg.VocabSize)
		if err == nil {
			err = s.prefill(ctx, sl, context, row)
		}
		if err != nil {
			s.fail(yield, err)
			return
		}
		g := newGeneration(s, &opts)
		st, err := m.newStepper(ctx, sl, g, &opts, context, row, pick)
		if err != nil {
			s.fail(yield, err)
			return
		}
		defer st.close(&s.metrics)
		s.decode(ctx, start, g, st, yield)
	}
}

// prefill makes sl's cache hold context (reusing what it or the prefix
// cache holds), writes the logits after it into row, measures it in
// s.metrics and, when it ran, makes context the session's history.
func (s *Session) prefill(ctx context.Context, sl *slot, context []int, row []float32) error {
	start := time.Now()
	s.m.preparePrefix(sl, context)
	ran, err := s.m.feed(ctx, sl, context, row)
	s.metrics.PrefillTokens = ran
	s.metrics.CachedTokens = max(0, len(context)-ran-len(s.history))
	s.metrics.PrefillTime = time.Since(start)
	if s.metrics.PrefillTime > 0 {
		s.metrics.PrefillTokensPerSec = float64(ran) / s.metrics.PrefillTime.Seconds()
	}
	if err == nil {
		s.history = context
	}
	return err
}

// decode is the generation loop: it takes the tokens st obtains and stops,
// streams and counts; how a token is obtained is st's business.
func (s *Session) decode(ctx context.Context, start time.Time, g *generation, st stepper, yield func(Token, error) bool) {
	m, mt := s.m, &s.metrics
	decodeStart, decodeSteps := time.Now(), 0
	defer func() {
		mt.DecodeTime, mt.DecodeSteps = time.Since(decodeStart), decodeSteps
		if decodeSteps > 0 && mt.DecodeTime > 0 {
			mt.DecodeTokensPerSec = float64(decodeSteps) / mt.DecodeTime.Seconds()
		}
	}()
	for {
		id, err := st.next(ctx, s.history, g.left(mt.GeneratedTokens, m.maxCache))
		if err != nil {
			s.fail(yield, err)
			return
		}
		if mt.GeneratedTokens > 0 {
			decodeSteps++
		} else {
			mt.TimeToFirstToken = max(time.Since(start), time.Nanosecond)
			decodeStart = time.Now()
		}
		if g.isStop(id) {
			mt.StopReason = StopToken
			g.flush(yield)
			return
		}
		complete, err := g.filter.accept(id)
		if err != nil {
			s.fail(yield, err)
			return
		}
		s.history = append(s.history, id)
		mt.GeneratedTokens++
		last := g.maxTokens > 0 && mt.GeneratedTokens >= g.maxTokens
		piece, stopped := g.piece(id, last || complete)
		kept := yield(Token{ID: id, Piece: piece}, nil)
		switch {
		case stopped:
			mt.StopReason = StopString
		case !kept:
			mt.StopReason = StopByConsumer
		case complete:
			mt.StopReason = StopToken
		case last:
			mt.StopReason = StopMaxTokens
		case len(s.history) > m.maxCache:
			mt.StopReason = StopCacheFull
			g.flush(yield)
		case ctx.Err() != nil:
			s.fail(yield, fmt.Errorf("pipeline: generate: %w", ctx.Err()))
		default:
			continue
		}
		return
	}
}

// fail ends a generation with err, yielded last.
func (s *Session) fail(yield func(Token, error) bool, err error) {
	s.metrics.StopReason = StopError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		s.metrics.StopReason = StopCancelled
	}
	yield(Token{}, err)
}

// generation is the per-call state: sampler, detokenizer, stop rules.
type generation struct {
	filter    tokenFilter // anyToken without GenerateOptions.Grammar
	maxTokens int         // GenerateOptions.MaxTokens
	sampler   *sampler.Sampler
	stops     map[int]bool
	text      *stopText
	dec       pieceDecoder // nil without a tokenizer
}

func newGeneration(s *Session, opts *GenerateOptions) *generation {
	cfg := &s.m.cfg
	g := &generation{
		filter:    anyToken{},
		maxTokens: opts.MaxTokens,
		sampler:   sampler.New(sampler.Options{Temperature: opts.Temperature, TopK: opts.TopK, TopP: opts.TopP, Seed: opts.Seed}),
		stops:     map[int]bool{},
		text:      &stopText{stops: opts.StopStrings},
	}
	if !opts.IgnoreStopTokens {
		if cfg.EOS >= 0 {
			g.stops[cfg.EOS] = true
		}
		for _, id := range cfg.StopTokens {
			g.stops[id] = true
		}
		for _, id := range opts.StopTokens {
			g.stops[id] = true
		}
	}
	if opts.Grammar != nil {
		ends := make([]int, 0, len(g.stops))
		for id := range g.stops {
			ends = append(ends, id)
		}
		slices.Sort(ends)
		g.filter = &constraint{masker: s.m.masker(opts.Grammar, ends), match: opts.Grammar.Matcher(), vocab: s.m.tokenVocabulary()}
	}
	if s.m.tok != nil {
		// Prime the decoder with the conversation so far: the first
		// generated piece continues text, so its leading space is kept
		// (a fresh decoder drops it as the dummy prefix).
		g.dec = s.m.tok.newDecoder()
		for _, id := range s.history {
			g.dec.Add(id)
		}
	}
	return g
}

func (g *generation) isStop(id int) bool { return g.stops[id] }

// left is how many tokens may still be generated after generated of them
// with a cache of maxCache positions (MaxTokens, or the cache when 0).
func (g *generation) left(generated, maxCache int) int {
	if g.maxTokens > 0 {
		return g.maxTokens - generated
	}
	return maxCache
}

// piece detokenizes id and applies the stop strings. With last, everything
// held back is released too.
func (g *generation) piece(id int, last bool) (string, bool) {
	if g.dec == nil {
		return "", false
	}
	text := g.dec.Add(id)
	if last {
		text += g.dec.Flush()
	}
	return g.text.add(text, last)
}

// flush releases held-back text as a final Token with ID -1.
func (g *generation) flush(yield func(Token, error) bool) {
	if g.dec == nil {
		return
	}
	if rest, _ := g.text.add(g.dec.Flush(), true); rest != "" {
		yield(Token{ID: -1, Piece: rest}, nil)
	}
}
