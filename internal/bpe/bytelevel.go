package bpe

import (
	"strings"
	"unicode/utf8"
)

// GPT-2's byte-level alphabet: every byte is shown as a printable
// character. Bytes that are printable Latin-1 ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the others, in byte order, become
// U+0100, U+0101, ...
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// byteLevelEncode writes every byte of s as its alphabet character.
func byteLevelEncode(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// byteLevelDecode maps alphabet characters back to bytes. A character
// outside the alphabet is kept as its UTF-8 bytes.
func byteLevelDecode(dst []byte, s string) []byte {
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			dst = append(dst, b)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

const replacement = "\uFFFD"

// lossyUTF8 decodes b as the WHATWG (and Rust's from_utf8_lossy) decoder
// does: each maximal subpart of an invalid sequence becomes one U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			out.Write(b[:size])
			b = b[size:]
			continue
		}
		out.WriteString(replacement)
		b = b[invalidPrefix(b):]
	}
	return out.String()
}

// invalidPrefix is the length of the maximal subpart of an ill-formed
// sequence at the start of b (at least 1).
func invalidPrefix(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for i := 1; i <= need && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// completeUTF8 is the length of the longest prefix of b that cannot change
// when more bytes are appended: everything but a trailing sequence that is
// still a valid beginning of a character.
func completeUTF8(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		i := len(b) - back
		c := b[i]
		if c < 0x80 {
			return len(b)
		}
		if c < 0xC0 {
			continue // continuation byte: look further back
		}
		if utf8.FullRune(b[i:]) {
			return len(b)
		}
		if invalidPrefix(b[i:]) < len(b)-i {
			return len(b) // already broken: cannot be completed
		}
		return i
	}
	return len(b)
}
