package tokenizer

import (
	"strings"
	"unicode/utf8"
)

const (
	spaceSymbol = "\u2581" // what escape_whitespaces turns ' ' into
	replacement = "\ufffd" // what an invalid UTF-8 byte normalizes to
)

// normalizer reproduces SentencePiece's Normalizer::Normalize.
type normalizer struct {
	charsmap          *charsmap // nil: identity
	userDefined       *byteTrie // user-defined symbols pass through unnormalized; nil if none
	addDummyPrefix    bool
	removeExtraSpaces bool
	escapeWhitespaces bool
	spaceAsSuffix     bool // trainer_spec.treat_whitespace_as_suffix
}

// prefix normalizes the first unit of s and returns the replacement and the
// number of input bytes it consumes (always at least 1).
func (n *normalizer) prefix(s string) (string, int) {
	if n.userDefined != nil {
		if l := n.userDefined.longestPrefix(s); l > 0 {
			return s[:l], l
		}
	}
	if n.charsmap != nil {
		if l, rep := n.charsmap.longestMatch(s); l > 0 {
			return rep, l
		}
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return replacement, 1
	}
	return s[:size], size
}

func (n *normalizer) space() string {
	if n.escapeWhitespaces {
		return spaceSymbol
	}
	return " "
}

func (n *normalizer) normalize(s string) string {
	if n.removeExtraSpaces {
		for len(s) > 0 {
			rep, l := n.prefix(s)
			if rep != " " {
				break
			}
			s = s[l:]
		}
	}
	if s == "" {
		return ""
	}
	var out strings.Builder
	out.Grow(len(s) + len(s)/2 + 3)
	if !n.spaceAsSuffix && n.addDummyPrefix {
		out.WriteString(n.space())
	}
	prevSpace := n.removeExtraSpaces
	for len(s) > 0 {
		rep, l := n.prefix(s)
		s = s[l:]
		if prevSpace {
			rep = strings.TrimLeft(rep, " ")
		}
		if rep != "" {
			if n.escapeWhitespaces {
				out.WriteString(strings.ReplaceAll(rep, " ", spaceSymbol))
			} else {
				out.WriteString(rep)
			}
			prevSpace = strings.HasSuffix(rep, " ")
		}
		if !n.removeExtraSpaces {
			prevSpace = false
		}
	}
	res := out.String()
	if n.removeExtraSpaces {
		for sp := n.space(); strings.HasSuffix(res, sp); {
			res = res[:len(res)-len(sp)]
		}
	}
	if n.spaceAsSuffix && n.addDummyPrefix {
		res += n.space()
	}
	return res
}
