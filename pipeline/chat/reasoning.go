package chat

import (
	"strings"

	"github.com/gpurun/gpurun/pipeline"
)

// ThinkSyntax is how a model marks its thinking apart from its answer,
// told by its template.
type ThinkSyntax int

const (
	// NoThinking: the template marks no thinking.
	NoThinking ThinkSyntax = iota
	// ThinkTags: the reply starts with <think>...</think>, then the
	// answer (Qwen 3, SmolLM3, DeepSeek R1; a template may write the
	// opening <think> itself at the end of its generation prompt).
	ThinkTags
	// ThinkHarmony: gpt-oss's harmony format: the thinking is the analysis
	// channel's message (<|channel|>analysis<|message|>...<|end|>), the
	// answer the final channel's.
	ThinkHarmony
)

// Markers of the two syntaxes.
const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	harmonyChan   = "<|channel|>"
	harmonyMsg    = "<|message|>"
	harmonyFinal  = "<|end|><|start|>assistant<|channel|>final<|message|>"
	harmonyOpened = "<|channel|>analysis<|message|>"
)

// harmonyEnds end a message of the harmony format (or start the next).
var harmonyEnds = []string{"<|end|>", "<|return|>", "<|call|>", "<|start|>", harmonyChan}

// ThinkSyntax tells how the template's model marks its thinking.
func (t *Template) ThinkSyntax() ThinkSyntax {
	switch {
	case strings.Contains(t.source, harmonyChan) && strings.Contains(t.source, "analysis"):
		return ThinkHarmony
	case strings.Contains(t.source, thinkOpen) || strings.Contains(t.source, thinkClose):
		return ThinkTags
	}
	return NoThinking
}

// End is the text that closes the thinking and opens the answer: what a
// spent thinking budget makes the model read before it goes on ("" for
// NoThinking).
func (s ThinkSyntax) End() string {
	switch s {
	case ThinkTags:
		return "\n" + thinkClose + "\n\n"
	case ThinkHarmony:
		return harmonyFinal
	}
	return ""
}

// Opens reports whether a rendered prompt leaves a thinking block open,
// so that the reply starts inside the thinking: a generation prompt that
// ends with <think> (DeepSeek R1's) or with the analysis channel's
// header.
func (s ThinkSyntax) Opens(prompt string) bool {
	switch s {
	case ThinkTags:
		i := strings.LastIndex(prompt, thinkOpen)
		return i >= 0 && i > strings.LastIndex(prompt, thinkClose)
	case ThinkHarmony:
		return strings.HasSuffix(prompt, harmonyOpened)
	}
	return false
}

// Splitter separates a streamed reply's thinking from its answer. Text
// that may be the start of a marker is held back until the text after it
// tells; the thinking and the answer it returns only grow. The thinking is
// trimmed of surrounding white space, as is the start of the answer after
// a </think>. Not safe for concurrent use.
type Splitter struct {
	syntax             ThinkSyntax
	open               bool
	raw                strings.Builder
	reasoning, content int // bytes returned so far
	thinking           bool
}

// NewSplitter starts splitting a reply in syntax s; open says the prompt
// left a thinking block open (ThinkSyntax.Opens).
func NewSplitter(s ThinkSyntax, open bool) *Splitter {
	return &Splitter{syntax: s, open: open, thinking: open && s != NoThinking}
}

// Thinking reports whether the reply so far ends inside its thinking.
func (p *Splitter) Thinking() bool { return p.thinking }

// Add takes more of the reply and returns the thinking and answer text it
// completes.
func (p *Splitter) Add(text string) (reasoning, content string) {
	p.raw.WriteString(text)
	return p.next(false)
}

// Flush returns what was held back: the reply has ended.
func (p *Splitter) Flush() (reasoning, content string) { return p.next(true) }

func (p *Splitter) next(final bool) (string, string) {
	var r, c string
	switch p.syntax {
	case ThinkTags:
		r, c, p.thinking = splitTags(p.raw.String(), p.open, final)
	case ThinkHarmony:
		r, c, p.thinking = splitHarmony(p.raw.String(), p.open, final)
	default:
		c = p.raw.String()
	}
	var dr, dc string
	if len(r) > p.reasoning {
		dr, p.reasoning = r[p.reasoning:], len(r)
	}
	if len(c) > p.content {
		dc, p.content = c[p.content:], len(c)
	}
	return dr, dc
}

const space = " \t\r\n"

// Split separates a whole reply's thinking from its answer.
func Split(s ThinkSyntax, open bool, reply string) (reasoning, content string) {
	p := NewSplitter(s, open)
	r1, c1 := p.Add(reply)
	r2, c2 := p.Flush()
	return r1 + r2, c1 + c2
}

// splitTags splits a reply of ThinkTags: a leading <think>...</think>
// (the opening tag already in the prompt when open) is the thinking, the
// rest the answer; a reply that does not start with <think> is all
// answer. Unless final, a tail that may begin a marker is held back.
func splitTags(raw string, open, final bool) (reasoning, content string, thinking bool) {
	rest := raw
	if !open {
		t := strings.TrimLeft(raw, space)
		switch {
		case strings.HasPrefix(t, thinkOpen):
			rest = t[len(thinkOpen):]
		case !final && strings.HasPrefix(thinkOpen, t):
			return "", "", false // not told yet
		default:
			return "", raw, false
		}
	}
	end := strings.Index(rest, thinkClose)
	if end < 0 {
		if !final {
			rest = holdBack(rest, thinkClose)
		}
		return strings.Trim(rest, space), "", true
	}
	return strings.Trim(rest[:end], space), strings.TrimLeft(rest[end+len(thinkClose):], space), false
}

// splitHarmony splits a reply of the harmony format, which starts after
// the prompt's <|start|>assistant: messages <|channel|>NAME...<|message|>
// BODY, each ended by <|end|> (or <|return|>, <|call|>, or the next
// <|start|>): the analysis channel's bodies are the thinking, the others'
// the answer; text between messages (<|start|>assistant) is neither. A
// reply that does not start with a marker is all answer.
func splitHarmony(raw string, open, final bool) (reasoning, content string, thinking bool) {
	if !open && !strings.HasPrefix(raw, "<|") && !(!final && strings.HasPrefix("<|", raw)) {
		return "", raw, false
	}
	var r, c strings.Builder
	pos, channel, inBody := 0, "", false
	if open {
		channel, inBody = "analysis", true
	}
	for {
		if inBody {
			at, marker := -1, ""
			for _, m := range harmonyEnds {
				if i := strings.Index(raw[pos:], m); i >= 0 && (at < 0 || i < at) {
					at, marker = i, m
				}
			}
			body := raw[pos:]
			if at >= 0 {
				body = body[:at]
			} else if !final {
				body = holdBack(body, harmonyEnds...)
			}
			if channel == "analysis" {
				r.WriteString(body)
			} else {
				c.WriteString(body)
			}
			if at < 0 {
				return r.String(), c.String(), channel == "analysis"
			}
			pos += at
			if marker != harmonyChan {
				pos += len(marker)
			}
			inBody = false
			continue
		}
		i := strings.Index(raw[pos:], harmonyChan)
		if i < 0 {
			return r.String(), c.String(), false
		}
		head := raw[pos+i+len(harmonyChan):]
		j := strings.Index(head, harmonyMsg)
		if j < 0 {
			return r.String(), c.String(), false
		}
		channel = strings.TrimSpace(head[:j])
		if k := strings.IndexAny(channel, " <"); k >= 0 {
			channel = channel[:k]
		}
		pos += i + len(harmonyChan) + j + len(harmonyMsg)
		inBody = true
	}
}

// holdBack cuts the longest tail of s that is a proper start of one of
// markers.
func holdBack(s string, markers ...string) string {
	cut := 0
	for _, m := range markers {
		for n := min(len(m)-1, len(s)); n > cut; n-- {
			if strings.HasSuffix(s, m[:n]) {
				cut = n
				break
			}
		}
	}
	return s[:len(s)-cut]
}

// EncodeText tokenizes template text as Render does: the control tokens
// it writes out become their ids, the text between them is encoded. A
// thinking budget uses it for ThinkSyntax.End.
func EncodeText(m *pipeline.Model, text string) ([]int, error) {
	control, controls := controlTokens(m)
	return encodeControls(m, control, controls, text)
}
