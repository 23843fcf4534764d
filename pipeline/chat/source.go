package chat

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The engine (github.com/ardanlabs/jinja) parses the templates that models
// ship, but applies whitespace control on its own terms: its trim_blocks
// and "-" markers reach past a neighbouring {{ }} to the next text, it
// keeps the template's final newline, and its string literals know fewer
// escapes than Python's. So before the engine sees a template, lex does
// what jinja2's lexer does (jinja2/lexer.py with trim_blocks,
// lstrip_blocks and keep_trailing_newline=False) and hands on a template
// without any whitespace left to control: every piece of text, already
// trimmed, becomes a string literal printed by {{ }}, comments are
// dropped, and every string literal is rewritten with only the escapes
// the engine decodes like Python. The engine then sees tags and nothing
// between them.
//
// Two more rewrites keep transformers' behaviour: the filters in
// filterOverrides call ours (the engine's own filter would win over a
// variable of that name): transformers' tojson and jinja2's title,
// capitalize and abs, which the engine gets wrong; and the
// {% generation %} block of transformers' AssistantTracker renders just
// its body.

// filterOverrides maps a filter name to the variable that holds ours.
var filterOverrides = map[string]string{
	"tojson":     "__chat_tojson",
	"title":      "__chat_title",
	"capitalize": "__chat_capitalize",
	"abs":        "__chat_abs",
}

// lex rewrites a jinja2 template source for the engine (see above).
func lex(src string) (string, error) {
	// jinja2 turns every \r\n and \r into \n and drops one final newline.
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")

	var out strings.Builder
	lineStarting := true // the previous tag's match ended with a newline
	pos := 0
	for pos < len(src) {
		start, kind := nextTag(src, pos)
		data := src[pos:start]
		if start == len(src) {
			writeText(&out, data)
			break
		}
		sign := byte(0)
		if at := start + 2; at < len(src) && (src[at] == '-' || src[at] == '+') {
			sign = src[at]
		}
		data = stripBefore(data, sign, kind != '{', lineStarting)
		body := start + 2
		if sign != 0 {
			body++
		}
		if kind == '%' {
			if end, ok := rawBegin(src, body); ok {
				writeText(&out, data)
				text, next, err := rawBody(src, end, strings.HasSuffix(src[:end], "\n"))
				if err != nil {
					return "", err
				}
				writeText(&out, text)
				pos, lineStarting = next, strings.HasSuffix(src[:next], "\n")
				continue
			}
		}
		writeText(&out, data)
		var next int
		var err error
		switch kind {
		case '#':
			next, err = comment(src, body)
		default:
			next, err = tag(&out, src, body, kind)
		}
		if err != nil {
			return "", err
		}
		pos, lineStarting = next, strings.HasSuffix(src[:next], "\n")
	}
	return out.String(), nil
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos: its offset
// and its second character (len(src) and 0 when there is none).
func nextTag(src string, pos int) (int, byte) {
	for i := pos; i+1 < len(src); i++ {
		if src[i] == '{' {
			switch c := src[i+1]; c {
			case '{', '%', '#':
				return i, c
			}
		}
	}
	return len(src), 0
}

// stripBefore applies what the tag that follows does to the text before
// it: "-" strips all trailing whitespace; lstrip_blocks (a block or
// comment tag without "+") strips the spaces between the start of its line
// and the tag when only whitespace stands there.
func stripBefore(data string, sign byte, block, lineStarting bool) string {
	switch {
	case sign == '-':
		return strings.TrimRightFunc(data, pyIsSpace)
	case sign != '+' && block:
		l := strings.LastIndexByte(data, '\n') + 1
		if (l > 0 || lineStarting) && l < len(data) && strings.TrimLeftFunc(data[l:], pyIsSpace) == "" {
			return data[:l]
		}
	}
	return data
}

// blockEnd matches a block tag's end at src[i:]: "+%}", "-%}" and the
// whitespace after it, or "%}" and one newline after it (trim_blocks).
// It returns the offset after the match.
func blockEnd(src string, i int, closer byte) (int, bool) {
	switch {
	case strings.HasPrefix(src[i:], "+"+string(closer)+"}"):
		return i + 3, true
	case strings.HasPrefix(src[i:], "-"+string(closer)+"}"):
		return skipSpace(src, i+3), true
	case strings.HasPrefix(src[i:], string(closer)+"}"):
		if strings.HasPrefix(src[i+2:], "\n") {
			return i + 3, true
		}
		return i + 2, true
	}
	return 0, false
}

func skipSpace(src string, i int) int {
	for i < len(src) {
		r, n := utf8.DecodeRuneInString(src[i:])
		if !pyIsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// comment skips a comment whose text starts at body.
func comment(src string, body int) (int, error) {
	for i := body; i < len(src); i++ {
		if end, ok := blockEnd(src, i, '#'); ok {
			return end, nil
		}
	}
	return 0, fmt.Errorf("missing end of comment tag")
}

// rawBegin matches the rest of "{% raw %}" from body: spaces, "raw",
// spaces, then "-%}" and whitespace or "%}" (no trim_blocks here, as in
// jinja2).
func rawBegin(src string, body int) (int, bool) {
	i := skipSpace(src, body)
	if !strings.HasPrefix(src[i:], "raw") {
		return 0, false
	}
	i = skipSpace(src, i+3)
	switch {
	case strings.HasPrefix(src[i:], "-%}"):
		return skipSpace(src, i+3), true
	case strings.HasPrefix(src[i:], "%}"):
		return i + 2, true
	}
	return 0, false
}

// rawBody returns the text of a raw block that starts at pos, trimmed as
// its "{% endraw %}" asks, and the offset after that tag.
func rawBody(src string, pos int, lineStarting bool) (string, int, error) {
	for i := pos; i+1 < len(src); i++ {
		if src[i] != '{' || src[i+1] != '%' {
			continue
		}
		j, sign := i+2, byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		j = skipSpace(src, j)
		if !strings.HasPrefix(src[j:], "endraw") {
			continue
		}
		j = skipSpace(src, j+len("endraw"))
		if end, ok := blockEnd(src, j, '%'); ok {
			return stripBefore(src[pos:i], sign, true, lineStarting), end, nil
		}
	}
	return "", 0, fmt.Errorf("missing end of raw directive")
}

// tag copies a {{ }} or {% %} tag whose inside starts at body to out,
// without its whitespace control and with its string literals rewritten,
// and returns the offset after its end (and the whitespace the end trims).
// As in jinja2, the end only counts where brackets are balanced.
func tag(out *strings.Builder, src string, body int, kind byte) (int, error) {
	closer := byte('%')
	if kind == '{' {
		closer = '}'
	}
	var inner strings.Builder
	var stack []byte
	var prev byte // the last character written that is not a space
	for i := body; i < len(src); {
		if len(stack) == 0 {
			end, ok := 0, false
			if closer == '%' {
				end, ok = blockEnd(src, i, '%')
			} else if strings.HasPrefix(src[i:], "-}}") {
				end, ok = skipSpace(src, i+3), true
			} else if strings.HasPrefix(src[i:], "}}") {
				end, ok = i+2, true
			}
			if ok {
				writeTag(out, kind, inner.String())
				return end, nil
			}
		}
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			s, n, err := pyStringLiteral(src[i:])
			if err != nil {
				return 0, err
			}
			writeLiteral(&inner, s)
			i += n
			prev = '"'
			continue
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			name := src[i:j]
			if to, ok := filterOverrides[name]; ok && prev == '|' {
				name = to
			}
			inner.WriteString(name)
			i, prev = j, 'a'
			continue
		case c >= '0' && c <= '9' && (i == 0 || src[i-1] != '.'):
			num, n, err := pyNumber(src[i:])
			if err != nil {
				return 0, err
			}
			inner.WriteString(num)
			i, prev = i+n, '0'
			continue
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, map[byte]byte{'(': ')', '[': ']', '{': '}'}[c])
		case c == ')' || c == ']' || c == '}':
			if len(stack) == 0 {
				return 0, fmt.Errorf("unexpected '%c'", c)
			}
			if want := stack[len(stack)-1]; want != c {
				return 0, fmt.Errorf("unexpected '%c', expected '%c'", c, want)
			}
			stack = stack[:len(stack)-1]
			if prev == '}' || prev == '%' {
				// Keep the engine from reading "}}" or "%}" in an
				// expression as the tag's end.
				inner.WriteByte(' ')
			}
		}
		inner.WriteByte(c)
		if !pyIsSpace(rune(c)) {
			prev = c
		}
		i++
	}
	if kind == '{' {
		return 0, fmt.Errorf("unexpected end of template, expected end of print statement")
	}
	return 0, fmt.Errorf("unexpected end of template, expected end of block")
}

// writeTag writes a tag for the engine, dropping transformers'
// {% generation %} and {% endgeneration %}.
func writeTag(out *strings.Builder, kind byte, inner string) {
	if kind == '%' {
		switch strings.TrimSpace(inner) {
		case "generation", "endgeneration":
			return
		}
		out.WriteString("{% " + inner + " %}")
		return
	}
	out.WriteString("{{ " + inner + " }}")
}

// writeText writes template text as a printed string literal.
func writeText(out *strings.Builder, text string) {
	if text == "" {
		return
	}
	out.WriteString("{{ ")
	writeLiteral(out, text)
	out.WriteString(" }}")
}

// writeLiteral writes s as a string literal that the engine reads back as
// s: only the escapes it knows.
func writeLiteral(out *strings.Builder, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			out.WriteString(`\\`)
		case '"':
			out.WriteString(`\"`)
		case '\n':
			out.WriteString(`\n`)
		case '\t':
			out.WriteString(`\t`)
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}

// pyNumber reads the number literal at the start of s as jinja2 does
// (underscores between digits, 0b/0o/0x integers, floats with a fraction
// or an exponent) and returns it in the plain form the engine reads
// (decimal integers, floats with a point and no exponent) and its length
// in s.
func pyNumber(s string) (string, int, error) {
	digits := func(i int, ok func(byte) bool) int {
		for i < len(s) && (ok(s[i]) || s[i] == '_' && i+1 < len(s) && ok(s[i+1])) {
			i++
		}
		return i
	}
	dec := func(c byte) bool { return c >= '0' && c <= '9' }
	if len(s) > 2 && s[0] == '0' {
		base, ok := 0, func(byte) bool { return false }
		switch s[1] | 0x20 {
		case 'b':
			base, ok = 2, func(c byte) bool { return c == '0' || c == '1' }
		case 'o':
			base, ok = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'x':
			base, ok = 16, func(c byte) bool { return dec(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
		}
		if base != 0 {
			j := digits(2, ok)
			if s[2] == '_' && j == 2 && len(s) > 3 && ok(s[3]) {
				j = digits(3, ok)
			}
			n, err := strconv.ParseInt(strings.ReplaceAll(s[2:j], "_", ""), base, 64)
			if err != nil {
				return "", 0, fmt.Errorf("number %s: %w", s[:j], err)
			}
			return strconv.FormatInt(n, 10), j, nil
		}
	}
	i := digits(0, dec)
	float := false
	if i+1 < len(s) && s[i] == '.' && dec(s[i+1]) {
		i, float = digits(i+1, dec), true
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && dec(s[j]) {
			i, float = digits(j, dec), true
		}
	}
	text := strings.ReplaceAll(s[:i], "_", "")
	if !float {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return strconv.FormatInt(n, 10), i, nil
		}
		return "", 0, fmt.Errorf("number %s does not fit 64 bits", s[:i])
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "", 0, fmt.Errorf("number %s: %w", s[:i], err)
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if math.IsInf(f, 0) {
		return "", 0, fmt.Errorf("number %s is out of range", s[:i])
	}
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return out, i, nil
}

// pyStringLiteral reads the string literal at the start of s the way
// jinja2 does (its string_re, then Python's unicode-escape decoding of the
// text, non-ASCII characters backslash-escaped first) and returns its
// value and its length in s.
func pyStringLiteral(s string) (string, int, error) {
	quote := s[0]
	i := 1
	for i < len(s) && s[i] != quote {
		if s[i] == '\\' {
			i++
		}
		i++
	}
	if i >= len(s) {
		return "", 0, fmt.Errorf("unexpected end of template in a string literal")
	}
	v, err := unicodeEscape(s[1:i])
	if err != nil {
		return "", 0, fmt.Errorf("string literal %s: %w", s[:i+1], err)
	}
	return v, i + 1, nil
}

// unicodeEscape decodes s as Python's
// s.encode("ascii", "backslashreplace").decode("unicode-escape") does.
func unicodeEscape(s string) (string, error) {
	// backslashreplace: every non-ASCII character becomes an escape.
	var ascii strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			ascii.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&ascii, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&ascii, `\u%04x`, r)
		default:
			fmt.Fprintf(&ascii, `\U%08x`, r)
		}
	}
	a := ascii.String()
	var b strings.Builder
	for i := 0; i < len(a); i++ {
		if a[i] != '\\' {
			b.WriteByte(a[i])
			continue
		}
		if i+1 == len(a) {
			return "", fmt.Errorf(`\ at end of string`)
		}
		i++
		switch c := a[i]; c {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(a) && j < i+3 && a[j] >= '0' && a[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(a[i:j], 8, 32)
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+digits > len(a) {
				return "", fmt.Errorf(`truncated \%c escape`, c)
			}
			n, err := strconv.ParseUint(a[i+1:i+1+digits], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", fmt.Errorf(`bad \%c escape`, c)
			}
			b.WriteRune(rune(n))
			i += digits
		case 'N':
			return "", fmt.Errorf(`\N{...} escapes are not supported`)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// pyIsSpace is Python's str.isspace for one character (what jinja2's \s
// and str.rstrip strip): Go's unicode.IsSpace and the separators
// U+001C..U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}
