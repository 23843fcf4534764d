package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text of one section before pre-tokenization.
type normalizer func(string) string

func buildNormalizer(raw json.RawMessage) (normalizer, error) {
	c, ok, err := parseComponent(raw, "normalizer")
	if err != nil || !ok {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		r, err := buildReplacer(c)
		if err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
		return r, nil
	case "Strip":
		left, right := c.StripLeft == nil || *c.StripLeft, c.StripRight == nil || *c.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Sequence":
		var seq []normalizer
		for i, r := range c.Normalizers {
			n, err := buildNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("normalizer sequence [%d]: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return func(s string) string {
			for _, n := range seq {
				s = n(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("%w: normalizer type %q", ErrUnsupported, c.Type)
}

// buildReplacer is the Replace normalizer and decoder: every match of the
// pattern (a literal string or a regex) becomes content.
func buildReplacer(c component) (func(string) string, error) {
	if c.Pattern == nil || c.Content == nil {
		return nil, fmt.Errorf("%w: Replace needs a pattern and a content", ErrInvalid)
	}
	content := *c.Content
	if s := c.Pattern.String; s != nil {
		if *s == "" {
			return nil, fmt.Errorf("%w: Replace with an empty pattern", ErrInvalid)
		}
		old := *s
		return func(t string) string { return strings.ReplaceAll(t, old, content) }, nil
	}
	re, err := compilePattern(c.Pattern)
	if err != nil {
		return nil, err
	}
	return func(t string) string {
		var b strings.Builder
		runes := []rune(t)
		prev := 0
		for _, m := range re.matches(runes) {
			b.WriteString(string(runes[prev:m[0]]))
			b.WriteString(content)
			prev = m[1]
		}
		b.WriteString(string(runes[prev:]))
		return b.String()
	}, nil
}
