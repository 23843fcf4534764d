package bpe

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder turns a list of token strings into a list of strings (the
// tokenizers library's decode_chain); Decode concatenates the result.
type decoder func(tokens []string) []string

func buildDecoder(raw json.RawMessage, added map[string]*addedToken) (decoder, error) {
	c, ok, err := parseComponent(raw, "decoder")
	if err != nil || !ok {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return func(tokens []string) []string {
			var out []string
			var buf []byte
			flush := func() {
				if len(buf) > 0 {
					out = append(out, lossyUTF8(buf))
					buf = buf[:0]
				}
			}
			for _, tok := range tokens {
				if added[tok] != nil {
					flush()
					out = append(out, tok)
					continue
				}
				buf = byteLevelDecode(buf, tok)
			}
			flush()
			return out
		}, nil
	case "Metaspace":
		rep, err := metaspaceReplacement(c)
		if err != nil {
			return nil, err
		}
		scheme, err := parseScheme(c)
		if err != nil {
			return nil, err
		}
		return func(tokens []string) []string {
			out := make([]string, len(tokens))
			for i, tok := range tokens {
				s := strings.ReplaceAll(tok, rep, " ")
				if i == 0 && scheme != prependNever {
					s = strings.TrimPrefix(s, " ")
				}
				out[i] = s
			}
			return out
		}, nil
	case "Replace":
		r, err := buildReplacer(c)
		if err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
		return func(tokens []string) []string {
			out := make([]string, len(tokens))
			for i, tok := range tokens {
				out[i] = r(tok)
			}
			return out
		}, nil
	case "ByteFallback":
		return func(tokens []string) []string {
			var out []string
			var buf []byte
			for _, tok := range tokens {
				if b, ok := parseBytePiece(tok); ok {
					buf = append(buf, b)
					continue
				}
				if len(buf) > 0 {
					out = append(out, byteFallbackText(buf)...)
					buf = buf[:0]
				}
				out = append(out, tok)
			}
			if len(buf) > 0 {
				out = append(out, byteFallbackText(buf)...)
			}
			return out
		}, nil
	case "Fuse":
		return func(tokens []string) []string { return []string{strings.Join(tokens, "")} }, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, fmt.Errorf("%w: Strip decoder content must be one character", ErrInvalid)
		}
		content, start, stop := *c.Content, c.Start, c.Stop
		return func(tokens []string) []string {
			out := make([]string, len(tokens))
			for i, tok := range tokens {
				for n := 0; n < start && strings.HasPrefix(tok, content); n++ {
					tok = tok[len(content):]
				}
				for n := 0; n < stop && strings.HasSuffix(tok, content); n++ {
					tok = tok[:len(tok)-len(content)]
				}
				out[i] = tok
			}
			return out
		}, nil
	case "Sequence":
		var seq []decoder
		for i, r := range c.Decoders {
			d, err := buildDecoder(r, added)
			if err != nil {
				return nil, fmt.Errorf("decoder sequence [%d]: %w", i, err)
			}
			if d != nil {
				seq = append(seq, d)
			}
		}
		return func(tokens []string) []string {
			for _, d := range seq {
				tokens = d(tokens)
			}
			return tokens
		}, nil
	}
	return nil, fmt.Errorf("%w: decoder type %q", ErrUnsupported, c.Type)
}

// byteFallbackText is the ByteFallback decoder's output for a run of byte
// tokens: their text, each maximal invalid subpart as U+FFFD (as
// transformers.js decodes it; the Rust library turns every byte of an
// invalid run into U+FFFD, valid ones included).
func byteFallbackText(b []byte) []string { return []string{lossyUTF8(b)} }

// parseBytePiece parses "<0xNN>".
func parseBytePiece(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	return byte(v), err == nil
}

func buildPostProcessor(raw json.RawMessage, vocab map[string]int) (prefix, suffix []int, err error) {
	c, ok, err := parseComponent(raw, "post_processor")
	if err != nil || !ok {
		return nil, nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "TemplateProcessing":
		seen := false
		for _, it := range c.Single {
			switch {
			case it.Sequence != nil:
				if seen {
					return nil, nil, fmt.Errorf("%w: TemplateProcessing single has two sequences", ErrInvalid)
				}
				seen = true
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("%w: TemplateProcessing special token %q is not declared", ErrInvalid, it.SpecialToken.ID)
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			default:
				return nil, nil, fmt.Errorf("%w: TemplateProcessing item is neither a sequence nor a special token", ErrInvalid)
			}
		}
		return prefix, suffix, nil
	case "BertProcessing", "RobertaProcessing":
		cls, err := pairID(c.Cls, vocab, "cls")
		if err != nil {
			return nil, nil, err
		}
		sep, err := pairID(c.Sep, vocab, "sep")
		if err != nil {
			return nil, nil, err
		}
		return []int{cls}, []int{sep}, nil
	case "Sequence":
		for i, r := range c.Processors {
			p, s, err := buildPostProcessor(r, vocab)
			if err != nil {
				return nil, nil, fmt.Errorf("post_processor sequence [%d]: %w", i, err)
			}
			prefix = append(p, prefix...)
			suffix = append(suffix, s...)
		}
		return prefix, suffix, nil
	}
	return nil, nil, fmt.Errorf("%w: post_processor type %q", ErrUnsupported, c.Type)
}

// pairID reads a Bert/Roberta ["token", id] pair.
func pairID(p []json.RawMessage, vocab map[string]int, what string) (int, error) {
	var id int
	if len(p) != 2 || json.Unmarshal(p[1], &id) != nil || id < 0 {
		return 0, fmt.Errorf("%w: post_processor %s is not [token, id]", ErrInvalid, what)
	}
	return id, nil
}

// Decode turns ids into text through the decoder chain. Added tokens are
// written as their content (special ones included); ids out of range are
// skipped.
func (t *Tokenizer) Decode(ids []int) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < len(t.tokens) && t.tokens[id] != "" {
			tokens = append(tokens, t.tokens[id])
		}
	}
	if t.decode == nil {
		return strings.Join(tokens, " ")
	}
	return strings.Join(t.decode(tokens), "")
}

// Decoder decodes a stream of ids incrementally: Add returns only text that
// later ids cannot change (an incomplete UTF-8 sequence is held back).
// The concatenation of all Add results and Flush equals Decode of the
// whole sequence.
type Decoder struct {
	t *Tokenizer
	// With a plain ByteLevel decoder, the bytes not yet returned.
	pending []byte
	// Otherwise every id so far, decoded again on each Add, and how many
	// bytes of that text were already returned.
	ids     []int
	emitted int
}

// NewDecoder returns an incremental decoder.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add decodes one more id and returns the text it completes.
func (d *Decoder) Add(id int) string {
	t := d.t
	if t.byteLevelDecoder {
		if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
			return ""
		}
		tok := t.tokens[id]
		if t.added[tok] != nil {
			s := lossyUTF8(d.pending) + tok
			d.pending = d.pending[:0]
			return s
		}
		d.pending = byteLevelDecode(d.pending, tok)
		n := completeUTF8(d.pending)
		s := lossyUTF8(d.pending[:n])
		d.pending = append(d.pending[:0], d.pending[n:]...)
		return s
	}
	d.ids = append(d.ids, id)
	text := t.Decode(d.ids)
	// A trailing U+FFFD may be a character still being spelled out.
	stable := len(strings.TrimRight(text, replacement))
	if stable <= d.emitted {
		return ""
	}
	out := text[d.emitted:stable]
	d.emitted = stable
	return out
}

// Flush returns the text held back, and resets the decoder.
func (d *Decoder) Flush() string {
	if d.t.byteLevelDecoder {
		s := lossyUTF8(d.pending)
		d.pending = d.pending[:0]
		return s
	}
	text := d.t.Decode(d.ids)
	out := ""
	if d.emitted < len(text) {
		out = text[d.emitted:]
	}
	d.ids, d.emitted = d.ids[:0], 0
	return out
}
