package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// tojson is transformers' tojson filter: Python's
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), arguments by position or by name. Dicts keep their
// insertion order, as in Python (messages are dicts of role, then
// content).
func tojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	params := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args)-1 > len(params) {
		return jinja.Undefined(), fmt.Errorf("tojson: %d arguments, at most %d", len(args)-1, len(params))
	}
	opt := map[string]jinja.Value{}
	for i, a := range args[1:] {
		opt[params[i]] = a
	}
	for k, v := range kwargs {
		if !slices.Contains(params, k) {
			return jinja.Undefined(), fmt.Errorf("tojson: unexpected argument %q", k)
		}
		if _, ok := opt[k]; ok {
			return jinja.Undefined(), fmt.Errorf("tojson: %q given twice", k)
		}
		opt[k] = v
	}
	e := jsonEncoder{itemSep: ", ", keySep: ": "}
	if v, ok := opt["ensure_ascii"]; ok {
		e.ascii = v.IsTruthy()
	}
	if v, ok := opt["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := opt["indent"]; ok && !v.IsNone() {
		e.indented = true
		e.itemSep = ","
		switch {
		case v.IsString():
			e.indent = v.AsString()
		case v.IsInt():
			e.indent = strings.Repeat(" ", int(max(0, min(v.AsInt(), 1000))))
		case v.IsBool():
			if v.AsBool() {
				e.indent = " "
			}
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent %s is not an integer or a string", v.String())
		}
	}
	if v, ok := opt["separators"]; ok && !v.IsNone() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
		}
		e.itemSep, e.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if err := e.value(args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(e.b.String()), nil
}

type jsonEncoder struct {
	b               strings.Builder
	ascii, sortKeys bool
	indented        bool
	indent          string
	itemSep, keySep string
}

// maxJSONDepth bounds nesting, as Python's recursion limit does.
const maxJSONDepth = 500

func (e *jsonEncoder) newline(depth int) {
	if e.indented {
		e.b.WriteByte('\n')
		for range depth {
			e.b.WriteString(e.indent)
		}
	}
}

func (e *jsonEncoder) value(v jinja.Value, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: nested more than %d deep", maxJSONDepth)
	}
	switch {
	case v.IsNone():
		e.b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			e.b.WriteString("true")
		} else {
			e.b.WriteString("false")
		}
	case v.IsInt():
		e.b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		e.b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.string(v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			e.b.WriteString("[]")
			return nil
		}
		e.b.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				e.b.WriteString(e.itemSep)
			}
			e.newline(depth + 1)
			if err := e.value(item, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			e.b.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			slices.Sort(keys)
		}
		e.b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.b.WriteString(e.itemSep)
			}
			e.newline(depth + 1)
			e.string(k)
			e.b.WriteString(e.keySep)
			item, _ := d.Get(k)
			if err := e.value(item, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.b.WriteByte('}')
	case v.IsUndefined():
		return fmt.Errorf("tojson: Object of type Undefined is not JSON serializable")
	default:
		return fmt.Errorf("tojson: a callable is not JSON serializable")
	}
	return nil
}

// pyFloat writes f as Python's float repr (which json.dumps uses):
// the shortest digits that read back as f, in exponent form below 1e-4 and
// from 1e16 on, otherwise positional with at least one decimal.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// string writes s as Python's json does: '"', '\\' and control characters
// escaped, and with ensure_ascii every character past '~' as \uXXXX
// (UTF-16).
func (e *jsonEncoder) string(s string) {
	b := &e.b
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case e.ascii && r > '~':
				if r > 0xffff {
					r1, r2 := utf16.EncodeRune(r)
					fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// strftime formats t as Python's datetime.strftime does in the C locale,
// for a naive time (%Z and %z are empty).
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'F':
			fmt.Fprintf(&b, "%d-%02d-%02d", t.Year(), int(t.Month()), t.Day())
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'Z', 'z':
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// filters are ours for the names in filterOverrides.
var filters = map[string]func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error){
	"tojson":     tojson,
	"title":      strFilter(pyTitle),
	"capitalize": strFilter(pyCapitalize),
	"abs":        absFilter,
}

func strFilter(f func(string) string) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || len(kwargs) != 0 {
			return jinja.Undefined(), fmt.Errorf("the filter takes no arguments")
		}
		v := args[0]
		if v.IsString() {
			return jinja.NewString(f(v.AsString())), nil
		}
		return jinja.NewString(f(v.String())), nil
	}
}

// pyTitle is jinja2's title filter: each word, split before runs of
// whitespace, '-', '(', '{', '[' and '<', gets its first character upper
// case and the rest lower case.
func pyTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		sep := pyIsSpace(r) || strings.ContainsRune("-({[<", r)
		switch {
		case sep:
			b.WriteRune(r)
		case start:
			b.WriteString(strings.ToUpper(string(r)))
		default:
			b.WriteString(strings.ToLower(string(r)))
		}
		start = sep
	}
	return b.String()
}

// pyCapitalize is Python's str.capitalize: the first character title
// case, the rest lower case.
func pyCapitalize(s string) string {
	for i, r := range s {
		return string(unicode.ToTitle(r)) + strings.ToLower(s[i+utf8.RuneLen(r):])
	}
	return s
}

func absFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 || len(kwargs) != 0 {
		return jinja.Undefined(), fmt.Errorf("abs takes no arguments")
	}
	switch v := args[0]; {
	case v.IsInt():
		if v.AsInt() < 0 {
			return jinja.NewInt(-v.AsInt()), nil
		}
		return v, nil
	case v.IsFloat():
		return jinja.NewFloat(math.Abs(v.AsFloat())), nil
	case v.IsBool():
		if v.AsBool() {
			return jinja.NewInt(1), nil
		}
		return jinja.NewInt(0), nil
	}
	return jinja.Undefined(), fmt.Errorf("abs of %s", args[0].String())
}
