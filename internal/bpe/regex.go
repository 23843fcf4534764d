package bpe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
)

// The regexes of a tokenizer.json are written for the engines of the
// tokenizers library (Oniguruma, or Rust's regex / fancy-regex: Unicode
// aware, leftmost-first, with look-around), tiktoken's for fancy-regex.
// regexp2 has the same backtracking model, look-around and syntax for
// what these patterns use, but follows .NET where the meaning differs.
// translateRegex rewrites a pattern so that regexp2 runs it with the Rust
// meaning:
//   - case-insensitive parts ((?i), (?i:...)) match by Unicode simple case
//     folding (Rust's rule): each letter becomes the class of its case
//     orbit, so (?i:'s) also matches 'ſ (U+017F) and (?i)σ matches ς,
//     while (?i)i does not match İ (regexp2 lowercases the input instead,
//     which also breaks (?i)\p{Lu});
//   - \w is Unicode's word class (Alphabetic, marks, decimal numbers,
//     connector punctuation, joiners; .NET leaves out spacing and
//     enclosing marks, letter numbers and other alphabetic symbols), and
//     \b, \B are built on it;
//   - $ outside multi-line mode is the end of the text only (.NET also
//     matches before a final newline);
//   - \pL, \p{Letter}, \p{Greek}, \p{sc=Greek}, \p{gc=Lu}, \p{Alphabetic}
//     and the other Unicode names Rust accepts, loosely matched;
//   - \x{...}, \u{...}, \UXXXXXXXX escapes.
//
// \d (decimal numbers), \s (White_Space), ., ^, look-around, atomic
// groups, back-references and the quantifiers mean the same in both and
// pass through. Syntax whose meaning would differ and that no tokenizer
// is known to use is rejected with ErrUnsupported: the x, U and R flags,
// (?-u), POSIX and nested classes, class set operations (&&, --, ~~), a
// negated class escape (\W, \S, \D, \P) inside a class next to other
// classes (regexp2 tests such sets wrongly), and a negated Unicode
// property under (?i).
func translateRegex(expr string) (string, error) {
	t := &translator{src: []rune(expr)}
	if err := t.run(); err != nil {
		return "", fmt.Errorf("%w: regex %q: %w", ErrUnsupported, truncate(expr), err)
	}
	return t.out.String(), nil
}

// flags are the inline flags that matter to translation.
type flags struct{ icase, multiline bool }

type translator struct {
	src   []rune
	i     int
	out   strings.Builder
	cur   flags
	stack []flags
}

// wordClass is the body of Rust's \w class (UTS #18's word characters).
const wordClass = `\p{L}\p{Nl}\p{Other_Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}`

func (t *translator) peek(k int) rune {
	if t.i+k < len(t.src) {
		return t.src[t.i+k]
	}
	return -1
}

func (t *translator) has(s string) bool {
	r := []rune(s)
	return t.i+len(r) <= len(t.src) && slices.Equal(t.src[t.i:t.i+len(r)], r)
}

func (t *translator) run() error {
	for t.i < len(t.src) {
		c := t.src[t.i]
		switch c {
		case '\\':
			if err := t.escape(); err != nil {
				return err
			}
		case '[':
			if err := t.class(); err != nil {
				return err
			}
		case '(':
			if err := t.group(); err != nil {
				return err
			}
		case ')':
			if len(t.stack) == 0 {
				return fmt.Errorf("unbalanced ) at %d", t.i)
			}
			t.cur = t.stack[len(t.stack)-1]
			t.stack = t.stack[:len(t.stack)-1]
			t.out.WriteByte(')')
			t.i++
		case '$':
			if t.cur.multiline {
				t.out.WriteByte('$')
			} else {
				t.out.WriteString(`\z`)
			}
			t.i++
		case '.', '^', '|', '*', '+', '?', '{', '}':
			// Quantifier braces pass through: both engines read {m,n}.
			t.out.WriteRune(c)
			t.i++
		default:
			t.literal(c)
			t.i++
		}
	}
	return nil
}

// literal writes one character, as the class of its case orbit under
// (?i).
func (t *translator) literal(r rune) {
	if t.cur.icase {
		if orbit := caseOrbit(r); len(orbit) > 1 {
			t.out.WriteByte('[')
			for _, o := range orbit {
				writeClassRune(&t.out, o)
			}
			t.out.WriteByte(']')
			return
		}
	}
	t.out.WriteString(regexp2.Escape(string(r)))
}

// caseOrbit is r with every character simple case folding equates with it,
// in ascending order.
func caseOrbit(r rune) []rune {
	orbit := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		orbit = append(orbit, f)
	}
	slices.Sort(orbit)
	return orbit
}

// writeClassRune writes r so that it stands for itself inside a class.
func writeClassRune(b *strings.Builder, r rune) {
	switch {
	case r == '\\' || r == ']' || r == '[' || r == '^' || r == '-':
		b.WriteByte('\\')
		b.WriteRune(r)
	case r < 0x20 || r == 0x7f:
		fmt.Fprintf(b, `\x%02X`, r)
	default:
		b.WriteRune(r)
	}
}

// escapeLiteral decodes a character escape at t.i (just past the
// backslash); ok is false when the escape is not a character.
func (t *translator) escapeLiteral() (r rune, ok bool, err error) {
	c := t.peek(0)
	switch c {
	case 'n':
		r = '\n'
	case 't':
		r = '\t'
	case 'r':
		r = '\r'
	case 'f':
		r = '\f'
	case 'v':
		r = '\v'
	case 'a':
		r = '\a'
	case 'e':
		r = 0x1b
	case 'x', 'u', 'U':
		t.i++
		if t.peek(0) == '{' {
			end := slices.Index(t.src[t.i:], '}')
			if end < 0 {
				return 0, false, fmt.Errorf(`unterminated \%c{`, c)
			}
			v, perr := strconv.ParseUint(string(t.src[t.i+1:t.i+end]), 16, 32)
			if perr != nil || v > unicode.MaxRune {
				return 0, false, fmt.Errorf(`bad \%c{%s}`, c, string(t.src[t.i+1:t.i+end]))
			}
			t.i += end + 1
			return rune(v), true, nil
		}
		n := map[rune]int{'x': 2, 'u': 4, 'U': 8}[c]
		if t.i+n > len(t.src) {
			return 0, false, fmt.Errorf(`short \%c escape`, c)
		}
		v, perr := strconv.ParseUint(string(t.src[t.i:t.i+n]), 16, 32)
		if perr != nil || v > unicode.MaxRune {
			return 0, false, fmt.Errorf(`bad \%c%s`, c, string(t.src[t.i:t.i+n]))
		}
		t.i += n
		return rune(v), true, nil
	default:
		if c < 0 || unicode.IsLetter(c) || unicode.IsDigit(c) {
			return 0, false, nil
		}
		r = c // an escaped punctuation or other character
	}
	t.i++
	return r, true, nil
}

// escape translates a backslash sequence outside a class.
func (t *translator) escape() error {
	t.i++
	c := t.peek(0)
	switch c {
	case -1:
		return fmt.Errorf("trailing backslash")
	case 'w':
		t.out.WriteString("[" + wordClass + "]")
	case 'W':
		t.out.WriteString("[^" + wordClass + "]")
	case 'b':
		t.out.WriteString(`(?:(?<=[` + wordClass + `])(?![` + wordClass + `])|(?<![` + wordClass + `])(?=[` + wordClass + `]))`)
	case 'B':
		t.out.WriteString(`(?:(?<=[` + wordClass + `])(?=[` + wordClass + `])|(?<![` + wordClass + `])(?![` + wordClass + `]))`)
	case 'd', 'D', 's', 'S', 'A', 'z':
		t.out.WriteByte('\\')
		t.out.WriteRune(c)
	case 'p', 'P':
		t.i++
		body, neg, err := t.property(c == 'P')
		if err != nil {
			return err
		}
		if neg {
			t.out.WriteString("[^" + body + "]")
		} else {
			t.out.WriteString("[" + body + "]")
		}
		return nil
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		// A back-reference (fancy-regex, Oniguruma).
		t.out.WriteByte('\\')
		for ; t.i < len(t.src) && unicode.IsDigit(t.src[t.i]); t.i++ {
			t.out.WriteRune(t.src[t.i])
		}
		return nil
	default:
		r, ok, err := t.escapeLiteral()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf(`escape \%c`, c)
		}
		t.literal(r)
		return nil
	}
	t.i++
	return nil
}

// property parses a Unicode class name at t.i (after \p or \P) and
// returns the class body regexp2 reads and whether the class is negated.
func (t *translator) property(neg bool) (string, bool, error) {
	var name string
	if t.peek(0) == '{' {
		end := slices.Index(t.src[t.i:], '}')
		if end < 0 {
			return "", false, fmt.Errorf(`unterminated \p{`)
		}
		name = string(t.src[t.i+1 : t.i+end])
		t.i += end + 1
	} else if c := t.peek(0); c >= 0 {
		name = string(c)
		t.i++
	} else {
		return "", false, fmt.Errorf(`\p without a name`)
	}
	if k, v, ok := strings.Cut(name, "!="); ok {
		name, neg = k+"="+v, !neg
	}
	if strings.HasPrefix(name, "^") {
		name, neg = name[1:], !neg
	}
	tables, err := unicodeClass(name)
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, n := range tables {
		b.WriteString(`\p{` + n + `}`)
	}
	if t.cur.icase {
		if neg {
			return "", false, fmt.Errorf(`negated \p{%s} under (?i)`, name)
		}
		for _, r := range foldExtras(tables) {
			writeClassRune(&b, r)
		}
	}
	return b.String(), neg, nil
}

// foldExtras are the characters outside the named tables that simple case
// folding equates with one inside them: what (?i) adds to the class.
func foldExtras(names []string) []rune {
	in := func(r rune) bool {
		for _, n := range names {
			if unicode.Is(unicodeTables[n], r) {
				return true
			}
		}
		return false
	}
	seen := map[rune]bool{}
	var extra []rune
	for _, n := range names {
		for _, rg := range unicodeTables[n].R16 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if !seen[f] && !in(f) {
						seen[f] = true
						extra = append(extra, f)
					}
				}
			}
		}
		for _, rg := range unicodeTables[n].R32 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if !seen[f] && !in(f) {
						seen[f] = true
						extra = append(extra, f)
					}
				}
			}
		}
	}
	slices.Sort(extra)
	return extra
}

// unicodeTables are the Go tables regexp2's \p{} reads, by their names.
var unicodeTables = func() map[string]*unicode.RangeTable {
	m := map[string]*unicode.RangeTable{}
	for _, set := range []map[string]*unicode.RangeTable{unicode.Scripts, unicode.Categories, unicode.Properties} {
		for k, v := range set {
			m[k] = v
		}
	}
	return m
}()

// looseNames maps a loosely written Unicode name (case, spaces, hyphens
// and underscores ignored, as UAX #44 allows and Rust does) to the tables
// that make it up.
var looseNames = func() map[string][]string {
	m := map[string][]string{}
	for k := range unicodeTables {
		m[loose(k)] = []string{k}
	}
	long := map[string]string{
		"Letter": "L", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll", "Titlecase_Letter": "Lt",
		"Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M", "Combining_Mark": "M",
		"Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Number": "N",
		"Decimal_Number": "Nd", "Digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
		"Punctuation": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
		"Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
		"Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
		"Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
		"Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C",
		"Control": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
		"Space": "White_Space", "WSpace": "White_Space",
	}
	for k, v := range long {
		m[loose(k)] = []string{v}
	}
	m[loose("LC")] = []string{"Lu", "Ll", "Lt"}
	m[loose("Cased_Letter")] = m[loose("LC")]
	m[loose("Alphabetic")] = []string{"L", "Nl", "Other_Alphabetic"}
	m[loose("Alpha")] = m[loose("Alphabetic")]
	return m
}()

func loose(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != ' ' && r != '_' && r != '-' {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// unicodeClass resolves a \p{} name (optionally prefixed sc=, gc=,
// Script=, General_Category=).
func unicodeClass(name string) ([]string, error) {
	if k, v, ok := strings.Cut(name, "="); ok {
		switch loose(k) {
		case "sc", "script", "gc", "generalcategory", "scx", "scriptextensions":
			name = v
		default:
			return nil, fmt.Errorf(`Unicode property \p{%s}`, name)
		}
	}
	if tables, ok := looseNames[loose(name)]; ok {
		return tables, nil
	}
	return nil, fmt.Errorf(`unknown Unicode class \p{%s}`, name)
}

// group translates the opening of a group and its inline flags.
func (t *translator) group() error {
	t.i++ // (
	if t.peek(0) != '?' {
		t.stack = append(t.stack, t.cur)
		t.out.WriteByte('(')
		return nil
	}
	for _, p := range []string{"?:", "?=", "?!", "?<=", "?<!", "?>"} {
		if t.has(p) {
			t.stack = append(t.stack, t.cur)
			t.out.WriteString("(" + p)
			t.i += len(p)
			return nil
		}
	}
	if t.has("?#") {
		end := slices.Index(t.src[t.i:], ')')
		if end < 0 {
			return fmt.Errorf("unterminated comment")
		}
		t.i += end + 1
		return nil
	}
	if t.has("?P<") || t.has("?<") {
		if t.has("?P<") {
			t.i += 3
		} else {
			t.i += 2
		}
		end := slices.Index(t.src[t.i:], '>')
		if end < 0 {
			return fmt.Errorf("unterminated group name")
		}
		t.stack = append(t.stack, t.cur)
		t.out.WriteString("(?<" + string(t.src[t.i:t.i+end]) + ">")
		t.i += end + 1
		return nil
	}
	// Inline flags: (?flags) or (?flags:...).
	t.i++ // ?
	next := t.cur
	var keepOn, keepOff string // the m and s flags, which regexp2 reads alike
	keep := func(f string, on bool) {
		if on {
			keepOn += f
		} else {
			keepOff += f
		}
	}
	on := true
	for ; ; t.i++ {
		c := t.peek(0)
		switch c {
		case ':', ')':
			t.i++
			fl := keepOn
			if keepOff != "" {
				fl += "-" + keepOff
			}
			if c == ':' {
				t.stack = append(t.stack, t.cur)
				t.cur = next
				t.out.WriteString("(?" + fl + ":")
				return nil
			}
			t.cur = next
			if fl != "" {
				t.out.WriteString("(?" + fl + ")")
			}
			return nil
		case '-':
			on = false
		case 'i':
			next.icase = on
		case 'm':
			next.multiline = on
			keep("m", on)
		case 's':
			keep("s", on)
		case 'u':
			if !on {
				return fmt.Errorf("(?-u)")
			}
		case -1:
			return fmt.Errorf("unterminated group flags")
		default:
			return fmt.Errorf("flag %q", c)
		}
	}
}

// class translates a bracketed class.
func (t *translator) class() error {
	t.i++ // [
	var body strings.Builder
	neg := false
	if t.peek(0) == '^' {
		neg = true
		t.i++
	}
	var (
		folds      []rune // what (?i) adds
		categories int    // class escapes and properties
		negated    int    // negated ones among them
	)
	first := true
	for {
		c := t.peek(0)
		switch {
		case c == -1:
			return fmt.Errorf("unterminated class")
		case c == ']' && !first:
			t.i++
			if negated > 0 && categories > 1 {
				// regexp2 stops at the first class that decides a
				// character, so a negated one next to others misreads.
				return fmt.Errorf(`a negated class escape inside a class with other classes`)
			}
			for _, r := range folds {
				writeClassRune(&body, r)
			}
			t.out.WriteByte('[')
			if neg {
				t.out.WriteByte('^')
			}
			t.out.WriteString(body.String())
			t.out.WriteByte(']')
			return nil
		case c == '[':
			return fmt.Errorf("nested or POSIX class")
		case t.has("&&") || t.has("--") && !first || t.has("~~"):
			return fmt.Errorf("class set operation %q", string(t.src[t.i:t.i+2]))
		}
		first = false
		var lo rune
		if c == '\\' {
			t.i++
			e := t.peek(0)
			switch e {
			case 'w', 'd', 's':
				categories++
				if e == 'w' {
					body.WriteString(wordClass)
				} else {
					body.WriteString(`\` + string(e))
				}
				t.i++
				continue
			case 'D', 'S':
				categories++
				negated++
				body.WriteString(`\` + string(e))
				t.i++
				continue
			case 'W':
				// Only a lone \W: the class becomes the complement of \w.
				if body.Len() > 0 || t.peek(1) != ']' {
					return fmt.Errorf(`\W inside a class with other members`)
				}
				t.i += 2
				if neg {
					t.out.WriteString("[" + wordClass + "]")
				} else {
					t.out.WriteString("[^" + wordClass + "]")
				}
				return nil
			case 'p', 'P':
				t.i++
				b, pneg, err := t.property(e == 'P')
				if err != nil {
					return err
				}
				categories++
				if pneg {
					negated++
					if strings.Count(b, `\p{`) > 1 {
						return fmt.Errorf(`negated multi-table class \P inside a class`)
					}
					b = strings.Replace(b, `\p{`, `\P{`, 1)
				}
				body.WriteString(b)
				continue
			}
			r, ok, err := t.escapeLiteral()
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf(`escape \%c in a class`, e)
			}
			lo = r
		} else {
			lo = c
			t.i++
		}
		hi := lo
		if t.peek(0) == '-' && t.peek(1) != ']' && t.peek(1) != -1 {
			t.i++
			c2 := t.peek(0)
			if c2 == '\\' {
				t.i++
				r, ok, err := t.escapeLiteral()
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("class range ends in a class escape")
				}
				hi = r
			} else if c2 == '[' {
				return fmt.Errorf("nested class")
			} else {
				hi = c2
				t.i++
			}
			if hi < lo {
				return fmt.Errorf("class range %q-%q out of order", lo, hi)
			}
		}
		writeClassRune(&body, lo)
		if hi != lo {
			body.WriteByte('-')
			writeClassRune(&body, hi)
		}
		if t.cur.icase {
			for r := lo; r <= hi; r++ {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if f < lo || f > hi {
						folds = append(folds, f)
					}
				}
			}
		}
	}
}
