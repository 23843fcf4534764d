package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Decode turns ids back into text as spm_decode --input_format=id does:
// byte pieces are reassembled into UTF-8 (each byte of an invalid sequence
// becomes U+FFFD), control pieces produce nothing, the unknown piece
// produces the model's unk_surface (" ⁇ " by default), U+2581 becomes a
// space, and the dummy-prefix space of the first piece is dropped (with remove_extra_whitespaces,
// leading space pieces are dropped until text appears). Ids out
// of range produce nothing (spm_decode rejects them).
func (t *Tokenizer) Decode(ids []int) string {
	d := t.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// Decoder decodes a stream of ids incrementally. Add returns only complete
// UTF-8: a byte-fallback sequence that may still be completed by the next
// ids is held back. The concatenation of all Add results and Flush equals
// Decode of the whole sequence.
type Decoder struct {
	t       *Tokenizer
	pending []byte // byte-fallback bytes not yet turned into text
	started bool   // whether any text has been produced
	// prefixTaken: the dummy-prefix space was already removed. Without
	// remove_extra_whitespaces the reference strips only one; with it, every
	// leading space piece is stripped while the text is still empty.
	prefixTaken bool
}

// NewDecoder returns an incremental decoder.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add decodes one more id and returns the text it completes.
func (d *Decoder) Add(id int) string {
	t := d.t
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	p := &t.pieces[id]
	if p.pieceType() == typeByte {
		b, _ := pieceByte(p.piece) // validated by Load
		d.pending = append(d.pending, b)
		return d.drain(false)
	}
	var out strings.Builder
	out.WriteString(d.drain(true))
	switch p.pieceType() {
	case typeControl:
	case typeUnknown:
		out.WriteString(t.unkSurface)
	default:
		piece := p.piece
		if !d.started && !d.prefixTaken && out.Len() == 0 && (t.norm.addDummyPrefix || t.norm.removeExtraSpaces) {
			if trimmed, ok := strings.CutPrefix(piece, spaceSymbol); ok {
				piece = trimmed
				d.prefixTaken = !t.norm.removeExtraSpaces
			}
		}
		out.WriteString(strings.ReplaceAll(piece, spaceSymbol, " "))
	}
	s := out.String()
	if s != "" {
		d.started = true
	}
	return s
}

// Flush returns the text of any held-back bytes, each invalid byte as
// U+FFFD, and resets the decoder's pending state.
func (d *Decoder) Flush() string {
	s := d.drain(true)
	if s != "" {
		d.started = true
	}
	return s
}

// drain converts pending bytes to text. Unless final, a trailing sequence
// that could still become a valid character is kept.
func (d *Decoder) drain(final bool) string {
	if len(d.pending) == 0 {
		return ""
	}
	var out strings.Builder
	b := d.pending
	for len(b) > 0 {
		if !final && !utf8.FullRune(b) {
			break
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			out.WriteString(replacement)
			b = b[1:]
			continue
		}
		out.Write(b[:size])
		b = b[size:]
	}
	d.pending = append(d.pending[:0], b...)
	if out.Len() > 0 {
		d.started = true
	}
	return out.String()
}
