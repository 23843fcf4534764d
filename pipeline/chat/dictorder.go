package chat

import (
	"regexp"
	"strings"
)

// The engine (ardanlabs/jinja v1.8.0) hands a call's keyword arguments to
// the function as a Go map, so dict(a=1, b=2) came out in either order
// (about one rendering in nine as {'b': 2, 'a': 1}), where Python keeps
// the order they were written in. orderedDicts rewrites such calls, before
// the engine parses the template, into the dict literal of the same
// entries in order, ({'a': 1, 'b': 2}), which the engine keeps in order
// (in parentheses: the engine's scanner would end a tag at the "}}" of
// nested literals).

// orderedDicts returns src with every call dict(k=v, ...) of keyword
// arguments only, inside an expression or statement tag, written as a
// dict literal; text, comments, raw blocks and string literals are left
// alone, and so is any call it cannot read (a positional argument, an
// unbalanced bracket: the engine reports those as it would have).
func orderedDicts(src string) string {
	if !strings.Contains(src, "dict") {
		return src
	}
	var out strings.Builder
	for i := 0; i < len(src); {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			out.WriteString(src[i:])
			break
		}
		j += i
		switch src[j+1] {
		case '#': // a comment, to its end
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				out.WriteString(src[i:])
				return out.String()
			}
			end += j + 4
			out.WriteString(src[i:end])
			i = end
			continue
		case '{', '%':
		default:
			out.WriteString(src[i : j+1])
			i = j + 1
			continue
		}
		if src[j+1] == '%' {
			if m := rawTag.FindStringIndex(src[j:]); m != nil && m[0] == 0 {
				end := endrawTag.FindStringIndex(src[j+m[1]:])
				if end == nil {
					out.WriteString(src[i:])
					return out.String()
				}
				stop := j + m[1] + end[1]
				out.WriteString(src[i:stop])
				i = stop
				continue
			}
		}
		closer := "}}"
		if src[j+1] == '%' {
			closer = "%}"
		}
		end := codeEnd(src, j+2, closer)
		if end < 0 {
			out.WriteString(src[i:])
			break
		}
		out.WriteString(src[i : j+2])
		out.WriteString(rewriteDicts(src[j+2 : end]))
		i = end
	}
	return out.String()
}

var (
	rawTag    = regexp.MustCompile(`^\{%-?\s*raw\s*-?%\}`)
	endrawTag = regexp.MustCompile(`\{%-?\s*endraw\s*-?%\}`)
	keyword   = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=([^=][\s\S]*)$`)
)

// codeEnd returns the index of closer ending the tag whose code starts at
// i (outside string literals), or -1.
func codeEnd(src string, i int, closer string) int {
	for i < len(src) {
		switch c := src[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(src, i)
			if i < 0 {
				return -1
			}
		case strings.HasPrefix(src[i:], closer):
			return i
		default:
			i++
		}
	}
	return -1
}

// stringEnd returns the index just past the string literal opening at i,
// or -1 when it does not end.
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return -1
}

// rewriteDicts rewrites the dict calls of one tag's code (see
// orderedDicts), the arguments' own code included.
func rewriteDicts(code string) string {
	var out strings.Builder
	for i := 0; i < len(code); {
		c := code[i]
		if c == '\'' || c == '"' {
			end := stringEnd(code, i)
			if end < 0 {
				out.WriteString(code[i:])
				break
			}
			out.WriteString(code[i:end])
			i = end
			continue
		}
		if isIdent(c) {
			j := i
			for j < len(code) && isIdent(code[j]) {
				j++
			}
			word := code[i:j]
			k := j
			for k < len(code) && (code[k] == ' ' || code[k] == '\t' || code[k] == '\n' || code[k] == '\r') {
				k++
			}
			if word == "dict" && k < len(code) && code[k] == '(' && !attribute(code, i) {
				if lit, end, ok := dictLiteral(code, k); ok {
					out.WriteString(lit)
					i = end
					continue
				}
			}
			out.WriteString(word)
			i = j
			continue
		}
		out.WriteByte(c)
		i++
	}
	return out.String()
}

// attribute reports whether the name at i follows a dot (x.dict(...) is
// a method, not the global).
func attribute(code string, i int) bool {
	for i > 0 && (code[i-1] == ' ' || code[i-1] == '\t') {
		i--
	}
	return i > 0 && code[i-1] == '.'
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// dictLiteral reads the call's arguments from the parenthesis at open and,
// when all are keyword arguments, returns the dict literal and the index
// past the closing parenthesis.
func dictLiteral(code string, open int) (lit string, end int, ok bool) {
	var args []string
	depth, start := 0, open+1
	for i := open; i < len(code); i++ {
		switch c := code[i]; c {
		case '\'', '"':
			e := stringEnd(code, i)
			if e < 0 {
				return "", 0, false
			}
			i = e - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				if c != ')' {
					return "", 0, false
				}
				args = append(args, code[start:i])
				end = i + 1
				var b strings.Builder
				b.WriteString("({")
				for n, a := range args {
					if strings.TrimSpace(a) == "" {
						if len(args) == 1 {
							break // dict()
						}
						return "", 0, false
					}
					m := keyword.FindStringSubmatch(a)
					if m == nil {
						return "", 0, false
					}
					if n > 0 {
						b.WriteString(", ")
					}
					b.WriteString("'" + m[1] + "': ")
					b.WriteString(strings.TrimSpace(rewriteDicts(m[2])))
				}
				b.WriteString("})")
				return b.String(), end, true
			}
			if depth < 0 {
				return "", 0, false
			}
		case ',':
			if depth == 1 {
				args = append(args, code[start:i])
				start = i + 1
			}
		}
	}
	return "", 0, false
}
