package bpe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// gpt2Pattern is the regex of the ByteLevel pre-tokenizer (use_regex).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// regex is a compiled split pattern.
type regex struct{ re *regexp2.Regexp }

// matchTimeout bounds one regex match: a pattern from a file could
// backtrack catastrophically. Text a match gives up on stays in the gap
// between matches, so nothing is lost.
const matchTimeout = 2 * time.Second

// compileRegex compiles a pattern written for the Rust engines (see
// translateRegex).
func compileRegex(expr string) (*regex, error) {
	tr, err := translateRegex(expr)
	if err != nil {
		return nil, err
	}
	return compileRegexp2(tr, expr)
}

// compileRegexp2 compiles a pattern in regexp2's own syntax; expr is what
// an error quotes.
func compileRegexp2(pattern, expr string) (*regex, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("%w: regex %q: %w", ErrInvalid, truncate(expr), err)
	}
	re.MatchTimeout = matchTimeout
	return &regex{re}, nil
}

// compilePattern compiles a {"String": s} or {"Regex": r} pattern.
func compilePattern(p *patternJSON) (*regex, error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: missing pattern", ErrInvalid)
	case p.Regex != nil:
		return compileRegex(*p.Regex)
	case p.String != nil:
		if *p.String == "" {
			return nil, fmt.Errorf("%w: empty string pattern", ErrInvalid)
		}
		return compileRegexp2(regexp2.Escape(*p.String), *p.String)
	}
	return nil, fmt.Errorf("%w: pattern is neither String nor Regex", ErrInvalid)
}

// matches returns the [start, end) rune ranges of the non-empty matches.
func (r *regex) matches(runes []rune) [][2]int {
	var out [][2]int
	m, err := r.re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if m.Length > 0 {
			out = append(out, [2]int{m.Index, m.Index + m.Length})
		}
		m, err = r.re.FindNextMatch(m)
	}
	return out
}

// A pre-tokenizer splits every piece into smaller pieces (and may rewrite
// them, as ByteLevel does). first is whether the piece is the start of the
// first section of the input (Metaspace's "first" prepend scheme).
type preTokenizer func(pieces []string, first bool) []string

// splitBehavior says what happens to the delimiters of a split.
type splitBehavior int

const (
	removed splitBehavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string, def splitBehavior) (splitBehavior, error) {
	switch s {
	case "":
		return def, nil
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("%w: split behavior %q", ErrUnsupported, s)
}

// segment is a run of runes that a pattern matched (delim) or not.
// Segments cover the text in order; two matches may be adjacent.
type segment struct {
	start, end int
	delim      bool
}

// segments turns the match ranges within n runes into segments covering
// them all: each match is its own segment and so is each gap between
// matches. With invert, matches are the pieces and gaps the delimiters
// (the tokenizers library flips the flag the same way, so adjacent matches
// stay separate pieces).
func segments(matches [][2]int, n int, invert bool) []segment {
	var segs []segment
	prev := 0
	for _, m := range matches {
		if m[0] > prev {
			segs = append(segs, segment{prev, m[0], invert})
		}
		segs = append(segs, segment{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev < n {
		segs = append(segs, segment{prev, n, invert})
	}
	return segs
}

// splitRunes applies a behavior to the segments of runes, as the
// tokenizers library's NormalizedString::split does: Removed drops the
// delimiters, Isolated keeps every segment, MergedWithPrevious joins a
// delimiter to the segment before it and MergedWithNext to the one after
// it (unless that one is a delimiter too), Contiguous joins consecutive
// segments of the same kind.
func splitRunes(runes []rune, segs []segment, b splitBehavior, out []string) []string {
	type span struct{ start, end int }
	var spans []span
	prevDelim := false
	switch b {
	case removed:
		for _, s := range segs {
			if !s.delim {
				spans = append(spans, span{s.start, s.end})
			}
		}
	case isolated:
		for _, s := range segs {
			spans = append(spans, span{s.start, s.end})
		}
	case contiguous:
		for _, s := range segs {
			if s.delim == prevDelim && len(spans) > 0 {
				spans[len(spans)-1].end = s.end
			} else {
				spans = append(spans, span{s.start, s.end})
			}
			prevDelim = s.delim
		}
	case mergedWithPrevious:
		for _, s := range segs {
			if s.delim && !prevDelim && len(spans) > 0 {
				spans[len(spans)-1].end = s.end
			} else {
				spans = append(spans, span{s.start, s.end})
			}
			prevDelim = s.delim
		}
	case mergedWithNext:
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.delim && !prevDelim && len(spans) > 0 {
				spans[len(spans)-1].start = s.start
			} else {
				spans = append(spans, span{s.start, s.end})
			}
			prevDelim = s.delim
		}
		slices.Reverse(spans)
	}
	for _, s := range spans {
		if s.end > s.start {
			out = append(out, string(runes[s.start:s.end]))
		}
	}
	return out
}

// charDelims returns the segments of runes with one delimiter per rune for
// which is reports true.
func charDelims(runes []rune, is func(rune) bool) []segment {
	var d [][2]int
	for i, r := range runes {
		if is(r) {
			d = append(d, [2]int{i, i + 1})
		}
	}
	return segments(d, len(runes), false)
}

// eachPiece lifts a one-piece splitter to a pre-tokenizer.
func eachPiece(f func(runes []rune, out []string) []string) preTokenizer {
	return func(pieces []string, _ bool) []string {
		var out []string
		for _, p := range pieces {
			out = f([]rune(p), out)
		}
		return out
	}
}

// isPunct is Rust's is_ascii_punctuation || is_punctuation: every ASCII
// punctuation or symbol character and every Unicode punctuation character.
func isPunct(r rune) bool {
	return unicode.IsPunct(r) || r < utf8.RuneSelf && unicode.IsSymbol(r)
}

func buildPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	c, ok, err := parseComponent(raw, "pre_tokenizer")
	if err != nil || !ok {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var seq []preTokenizer
		for i, r := range c.PreTokenizers {
			p, err := buildPreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("pre_tokenizer sequence [%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return func(pieces []string, first bool) []string {
			for _, p := range seq {
				pieces = p(pieces, first)
			}
			return pieces
		}, nil
	case "ByteLevel":
		addPrefix := c.AddPrefixSpace != nil && *c.AddPrefixSpace
		var re *regex
		if c.UseRegex == nil || *c.UseRegex {
			re, _ = compileRegex(gpt2Pattern)
		}
		return func(pieces []string, _ bool) []string {
			var out []string
			for _, p := range pieces {
				if addPrefix && !strings.HasPrefix(p, " ") {
					p = " " + p
				}
				if re == nil {
					out = append(out, byteLevelEncode(p))
					continue
				}
				runes := []rune(p)
				for _, m := range re.matches(runes) {
					out = append(out, byteLevelEncode(string(runes[m[0]:m[1]])))
				}
			}
			return out
		}, nil
	case "Split":
		re, err := compilePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		b, err := parseBehavior(c.Behavior, isolated)
		if err != nil {
			return nil, err
		}
		invert := c.Invert
		return eachPiece(func(runes []rune, out []string) []string {
			return splitRunes(runes, segments(re.matches(runes), len(runes), invert), b, out)
		}), nil
	case "Digits":
		b := contiguous
		if c.IndividualDigits {
			b = isolated
		}
		return eachPiece(func(runes []rune, out []string) []string {
			return splitRunes(runes, charDelims(runes, unicode.IsNumber), b, out)
		}), nil
	case "Punctuation":
		b, err := parseBehavior(c.Behavior, isolated)
		if err != nil {
			return nil, err
		}
		return eachPiece(func(runes []rune, out []string) []string {
			return splitRunes(runes, charDelims(runes, isPunct), b, out)
		}), nil
	case "WhitespaceSplit":
		return eachPiece(func(runes []rune, out []string) []string {
			return splitRunes(runes, charDelims(runes, unicode.IsSpace), removed, out)
		}), nil
	case "Whitespace":
		re, _ := compileRegex(`\w+|[^\w\s]+`)
		return eachPiece(func(runes []rune, out []string) []string {
			for _, m := range re.matches(runes) {
				out = append(out, string(runes[m[0]:m[1]]))
			}
			return out
		}), nil
	case "Metaspace":
		return buildMetaspace(c)
	}
	return nil, fmt.Errorf("%w: pre_tokenizer type %q", ErrUnsupported, c.Type)
}

// metaspaceScheme tells when Metaspace prepends its replacement.
type metaspaceScheme int

const (
	prependAlways metaspaceScheme = iota
	prependFirst
	prependNever
)

func parseScheme(c component) (metaspaceScheme, error) {
	switch c.PrependScheme {
	case "always":
		return prependAlways, nil
	case "first":
		return prependFirst, nil
	case "never":
		return prependNever, nil
	case "":
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			return prependNever, nil
		}
		return prependAlways, nil
	}
	return 0, fmt.Errorf("%w: Metaspace prepend_scheme %q", ErrUnsupported, c.PrependScheme)
}

func buildMetaspace(c component) (preTokenizer, error) {
	rep, err := metaspaceReplacement(c)
	if err != nil {
		return nil, err
	}
	scheme, err := parseScheme(c)
	if err != nil {
		return nil, err
	}
	split := c.Split == nil || *c.Split
	repRune, _ := utf8.DecodeRuneInString(rep)
	return func(pieces []string, first bool) []string {
		var out []string
		for i, p := range pieces {
			p = strings.ReplaceAll(p, " ", rep)
			if (scheme == prependAlways || scheme == prependFirst && first && i == 0) && !strings.HasPrefix(p, rep) {
				p = rep + p
			}
			if !split {
				out = append(out, p)
				continue
			}
			runes := []rune(p)
			out = splitRunes(runes, charDelims(runes, func(r rune) bool { return r == repRune }), mergedWithNext, out)
		}
		return out
	}, nil
}

func metaspaceReplacement(c component) (string, error) {
	rep := c.Replacement
	if rep == "" {
		rep = "\u2581"
	}
	if utf8.RuneCountInString(rep) != 1 {
		return "", fmt.Errorf("%w: Metaspace replacement %q is not one character", ErrInvalid, rep)
	}
	return rep, nil
}
