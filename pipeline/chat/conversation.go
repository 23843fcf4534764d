package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strings"

	"github.com/gpurun/gpurun/pipeline"
)

// ErrTooLong: the system message and the new user message alone do not
// fit the KV cache with room for a reply.
var ErrTooLong = errors.New("chat: message too long for the KV cache")

// Options configure a Conversation.
type Options struct {
	// System is the system message, kept when old turns are dropped ("" for
	// none).
	System string
	// Reserve is how many cache positions a reply needs at least: before a
	// turn, the oldest turns are dropped until the conversation leaves this
	// much room. 0 means a quarter of the cache, at most 256.
	Reserve int
}

// Conversation is a multi-turn chat on one pipeline.Session. Each Send
// renders the whole conversation with the template but prefills only what
// the KV cache does not hold yet: the new user turn (and the end of the
// previous reply). When the cache cannot hold the conversation and a
// reply, the oldest turns are dropped (the system message is kept) and the
// rest is prefilled again. Not safe for concurrent use.
type Conversation struct {
	m        *pipeline.Model
	s        *pipeline.Session
	tpl      *Template
	opts     Options
	msgs     []Message // without the system message
	covered  string    // rendered text whose tokens the session history holds
	control  []string  // control token texts, longest first
	controls map[string]int
	stops    []int
	dropped  int
}

// New starts a conversation with m using tpl (Plain() for none).
func New(m *pipeline.Model, tpl *Template, opts Options) (*Conversation, error) {
	if !m.HasTokenizer() {
		return nil, fmt.Errorf("chat: %w", pipeline.ErrNoTokenizer)
	}
	c := &Conversation{m: m, s: m.NewSession(), tpl: tpl, opts: opts}
	c.control, c.controls = controlTokens(m)
	c.stops = endOfTurnIDs(m, tpl, c.controls)
	if c.opts.Reserve <= 0 {
		c.opts.Reserve = min(256, m.MaxCache()/4)
	}
	return c, nil
}

// controlTokens returns m's control token texts, longest first, and their
// ids.
func controlTokens(m *pipeline.Model) ([]string, map[string]int) {
	controls := m.ControlTokens()
	var list []string
	for s := range controls {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool {
		return len(list[i]) > len(list[j]) || len(list[i]) == len(list[j]) && list[i] < list[j]
	})
	return list, controls
}

// endOfTurnIDs are the ids of tpl's end-of-turn markers in m's vocabulary.
func endOfTurnIDs(m *pipeline.Model, tpl *Template, controls map[string]int) []int {
	var stops []int
	for _, marker := range tpl.EndOfTurn() {
		if id, ok := controls[marker]; ok {
			stops = append(stops, id)
		} else if ids, err := m.Encode(marker); err == nil && len(ids) == 1 {
			stops = append(stops, ids[0])
		}
	}
	return stops
}

// Prompt is a whole conversation rendered for one stateless generation
// (what a server gets with every request): the prompt ids and what ends
// the reply.
type Prompt struct {
	Text        string // the rendered text
	IDs         []int  // pipeline.MediaID where each of Images goes
	Images      [][]byte
	StopTokens  []int    // the template's end-of-turn tokens
	StopStrings []string // the plain fallback's next "User:" line
}

// Render renders msgs with tpl, the generation prompt appended, and
// tokenizes the result the way Conversation does: control tokens written
// out by the template become their ids, BOS is prepended when the model
// asks for it and the template did not write it.
func Render(m *pipeline.Model, tpl *Template, msgs []Message) (Prompt, error) {
	return RenderTools(m, tpl, msgs, nil)
}

// RenderTools is Render offering the model tools (RenderOptions.Tools).
func RenderTools(m *pipeline.Model, tpl *Template, msgs []Message, tools []json.RawMessage) (Prompt, error) {
	if !m.HasTokenizer() {
		return Prompt{}, fmt.Errorf("chat: %w", pipeline.ErrNoTokenizer)
	}
	text, err := tpl.RenderWith(msgs, RenderOptions{AddGenerationPrompt: true, Tools: tools})
	if err != nil {
		return Prompt{}, err
	}
	control, controls := controlTokens(m)
	var images [][]byte
	for _, msg := range msgs {
		images = append(images, msg.Images...)
	}
	// With images, the markers the messages carried split the text:
	// each part tokenized as a prompt is, pipeline.MediaID between.
	parts := []string{text}
	if len(images) > 0 {
		parts = strings.Split(text, pipeline.MediaMarker)
		if len(parts)-1 != len(images) {
			return Prompt{}, fmt.Errorf("%w: the rendered conversation has %d %s markers for %d images", pipeline.ErrPrompt, len(parts)-1, pipeline.MediaMarker, len(images))
		}
	}
	var ids []int
	for i, part := range parts {
		if i > 0 {
			ids = append(ids, pipeline.MediaID)
		}
		pids, err := encodeControls(m, control, controls, part)
		if err != nil {
			return Prompt{}, err
		}
		ids = append(ids, pids...)
	}
	if cfg := m.Config(); cfg.AddBOS && cfg.BOS >= 0 && (len(ids) == 0 || ids[0] != cfg.BOS) {
		ids = append([]int{cfg.BOS}, ids...)
	}
	return Prompt{Text: text, IDs: ids, Images: images, StopTokens: endOfTurnIDs(m, tpl, controls), StopStrings: tpl.StopStrings()}, nil
}

// StopTokens are the template's end-of-turn tokens, which end a reply.
func (c *Conversation) StopTokens() []int { return c.stops }

// Messages returns the conversation so far (the system message first).
func (c *Conversation) Messages() []Message { return c.all(nil) }

// Dropped is how many old messages were dropped to make room.
func (c *Conversation) Dropped() int { return c.dropped }

// Metrics measure the last reply.
func (c *Conversation) Metrics() pipeline.Metrics { return c.s.Metrics() }

// Reset forgets the conversation (the system message stays).
func (c *Conversation) Reset() {
	c.msgs, c.covered, c.dropped = nil, "", 0
	c.s.Reset()
}

func (c *Conversation) all(extra *Message) []Message {
	var out []Message
	if c.opts.System != "" {
		out = append(out, Message{Role: System, Content: c.opts.System})
	}
	out = append(out, c.msgs...)
	if extra != nil {
		out = append(out, *extra)
	}
	return out
}

// encode tokenizes rendered template text: control tokens (written out by
// the template, such as "<s>" or "<|im_end|>") become their ids, the text
// between them is encoded as text.
func (c *Conversation) encode(text string) ([]int, error) {
	return encodeControls(c.m, c.control, c.controls, text)
}

// images are the images of the conversation with user appended, in order.
func (c *Conversation) images(user *Message) [][]byte {
	var out [][]byte
	for _, m := range c.all(user) {
		out = append(out, m.Images...)
	}
	return out
}

// encodeMedia is encode with, when the conversation has images (media),
// each pipeline.MediaMarker a pipeline.MediaID; n counts them.
func (c *Conversation) encodeMedia(text string, media bool) (ids []int, n int, err error) {
	if !media {
		ids, err = c.encode(text)
		return ids, 0, err
	}
	for i, part := range strings.Split(text, pipeline.MediaMarker) {
		if i > 0 {
			ids = append(ids, pipeline.MediaID)
			n++
		}
		pids, err := c.encode(part)
		if err != nil {
			return nil, 0, err
		}
		ids = append(ids, pids...)
	}
	return ids, n, nil
}

func encodeControls(m *pipeline.Model, control []string, controls map[string]int, text string) ([]int, error) {
	var ids []int
	for len(text) > 0 {
		at, tok := len(text), ""
		for _, s := range control {
			if i := strings.Index(text, s); i >= 0 && i < at {
				at, tok = i, s
			}
		}
		if at > 0 {
			part, err := m.Encode(text[:at])
			if err != nil {
				return nil, err
			}
			ids = append(ids, part...)
		}
		if tok == "" {
			break
		}
		ids = append(ids, controls[tok])
		text = text[at+len(tok):]
	}
	return ids, nil
}

// Send adds a user message and streams the reply; the reply joins the
// conversation when the stream ends (also when it is cancelled or the
// loop is left: what was generated is kept). gen's stop tokens and stop
// strings are extended with the template's.
func (c *Conversation) Send(ctx context.Context, text string, gen pipeline.GenerateOptions) iter.Seq2[pipeline.Token, error] {
	return c.SendImages(ctx, text, nil, gen)
}

// SendImages is Send with images: one for each pipeline.MediaMarker of
// text, in order (a model with a vision projector, pipeline.Options.MMProj).
// The images stay in the conversation with their message.
func (c *Conversation) SendImages(ctx context.Context, text string, images [][]byte, gen pipeline.GenerateOptions) iter.Seq2[pipeline.Token, error] {
	return func(yield func(pipeline.Token, error) bool) {
		user := Message{Role: User, Content: text, Images: images}
		prompt, full, err := c.fit(&user)
		if err != nil {
			yield(pipeline.Token{}, err)
			return
		}
		gen.StopTokens = append(append([]int(nil), gen.StopTokens...), c.stops...)
		gen.StopStrings = append(append([]string(nil), gen.StopStrings...), c.tpl.StopStrings()...)
		var reply strings.Builder
		var genErr error
		for tok, err := range c.s.Generate(ctx, prompt, gen) {
			if err != nil {
				genErr = err
				break
			}
			reply.WriteString(tok.Piece)
			if !yield(tok, nil) {
				break
			}
		}
		if c.s.Metrics().PromptTokens == 0 && genErr != nil {
			// Nothing ran: the conversation is as it was.
			c.covered = ""
			c.s.Reset()
			yield(pipeline.Token{}, genErr)
			return
		}
		out := reply.String()
		content := out
		if c.tpl.IsPlain() {
			content = strings.TrimPrefix(content, " ")
		}
		c.msgs = append(c.msgs, user, Message{Role: Assistant, Content: content})
		c.covered = ""
		// A token was sampled only after the prompt ran and joined the
		// history (an interrupt during the prefill leaves it out).
		met := c.s.Metrics()
		if r := met.StopReason; met.TimeToFirstToken > 0 && (r == pipeline.StopToken || r == pipeline.StopMaxTokens || r == pipeline.StopCancelled || r == pipeline.StopByConsumer) {
			// The history holds exactly the prompt and the streamed reply.
			c.covered = full + out
		}
		if genErr != nil {
			yield(pipeline.Token{}, genErr)
		}
	}
}

// fit renders the conversation with user appended and returns the prompt
// to give the session: only the new tokens when the session's history is a
// prefix of the rendering, otherwise (first turn, dropped turns, a reply
// that ended on a stop string) the whole conversation after a session
// reset, whose common prefix with the cache the pipeline still reuses.
func (c *Conversation) fit(user *Message) (pipeline.Prompt, string, error) {
	maxCache := c.m.MaxCache()
	for {
		full, err := c.tpl.Render(c.all(user), true)
		if err != nil {
			return pipeline.Prompt{}, "", err
		}
		hist := len(c.s.History())
		images := c.images(user)
		if c.covered != "" && hist > 0 && strings.HasPrefix(full, c.covered) {
			ids, n, err := c.encodeMedia(full[len(c.covered):], len(images) > 0)
			if err != nil {
				return pipeline.Prompt{}, "", err
			}
			if hist+len(ids)+c.opts.Reserve <= maxCache {
				return mediaPrompt(c.m, ids, images[max(0, len(images)-n):]), full, nil
			}
		} else {
			ids, _, err := c.encodeMedia(full, len(images) > 0)
			if err != nil {
				return pipeline.Prompt{}, "", err
			}
			if cfg := c.m.Config(); cfg.AddBOS && cfg.BOS >= 0 && (len(ids) == 0 || ids[0] != cfg.BOS) {
				ids = append([]int{cfg.BOS}, ids...)
			}
			if len(ids)+c.opts.Reserve <= maxCache {
				c.s.Reset()
				return mediaPrompt(c.m, ids, images), full, nil
			}
		}
		// Too long: drop the oldest exchange and render again.
		if len(c.msgs) == 0 {
			return pipeline.Prompt{}, "", fmt.Errorf("%w: with the system message it needs more than the %d positions the cache has beside %d for the reply", ErrTooLong, maxCache-c.opts.Reserve, c.opts.Reserve)
		}
		n := min(2, len(c.msgs))
		c.msgs = c.msgs[n:]
		c.dropped += n
		c.covered = ""
	}
}

// mediaPrompt is the prompt of ids with the conversation's media files:
// images, or WAV files for a model with an audio projector.
func mediaPrompt(m *pipeline.Model, ids []int, media [][]byte) pipeline.Prompt {
	if m.HasAudio() {
		return pipeline.Prompt{IDs: ids, Audio: media}
	}
	return pipeline.Prompt{IDs: ids, Images: media}
}
