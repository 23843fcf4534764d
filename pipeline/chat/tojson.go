package chat

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// filters are gonja's filters with tojson replaced by transformers' version
// of it: Python's json.dumps with ensure_ascii=False and its default
// separators (", " and ": "), not HTML-escaped. Dicts keep their insertion
// order, as in Python (messages are dicts of role, then content).
func filters() *exec.FilterSet {
	fs := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	_ = fs.Replace("tojson", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		indent := -1
		if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
			if !v.IsInteger() {
				return exec.AsValue(fmt.Errorf("tojson: indent %s is not an integer", v.String()))
			}
			indent = v.Integer()
		}
		var b strings.Builder
		if err := pyJSON(&b, reflect.ValueOf(in.Interface()), indent, 0); err != nil {
			return exec.AsValue(err)
		}
		return exec.AsSafeValue(b.String())
	})
	return fs
}

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False,
// indent=indent) does (indent < 0: none).
func pyJSON(b *strings.Builder, v reflect.Value, indent, depth int) error {
	if v.IsValid() && v.CanInterface() {
		switch x := v.Interface().(type) {
		case *exec.Value:
			return pyJSON(b, reflect.ValueOf(x.Interface()), indent, depth)
		case exec.Dict:
			return pyDict(b, &x, indent, depth)
		case *exec.Dict:
			return pyDict(b, x, indent, depth)
		}
	}
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	if depth > 100 {
		return fmt.Errorf("tojson: nested too deeply")
	}
	newline := func(d int) {
		if indent >= 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*d))
		}
	}
	itemSep := ", "
	if indent >= 0 {
		itemSep = ","
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		case f == math.Trunc(f) && math.Abs(f) < 1e16:
			b.WriteString(strconv.FormatFloat(f, 'f', 1, 64))
		default:
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case reflect.String:
		pyString(b, v.String())
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[")
		for i := range v.Len() {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := pyJSON(b, v.Index(i), indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteString("]")
	case reflect.Map:
		if v.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i].Interface()) < fmt.Sprint(keys[j].Interface()) })
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			pyString(b, fmt.Sprint(k.Interface()))
			b.WriteString(": ")
			if err := pyJSON(b, v.MapIndex(k), indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteString("}")
	default:
		return fmt.Errorf("tojson: cannot write a %s", v.Type())
	}
	return nil
}

// pyDict writes a Jinja dict in its insertion order, as Python does.
func pyDict(b *strings.Builder, d *exec.Dict, indent, depth int) error {
	if len(d.Pairs) == 0 {
		b.WriteString("{}")
		return nil
	}
	b.WriteString("{")
	for i, p := range d.Pairs {
		if i > 0 {
			if indent >= 0 {
				b.WriteString(",")
			} else {
				b.WriteString(", ")
			}
		}
		if indent >= 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*(depth+1)))
		}
		pyString(b, p.Key.String())
		b.WriteString(": ")
		if err := pyJSON(b, reflect.ValueOf(p.Value.Interface()), indent, depth+1); err != nil {
			return err
		}
	}
	if indent >= 0 {
		b.WriteString("\n" + strings.Repeat(" ", indent*depth))
	}
	b.WriteString("}")
	return nil
}

// pyString writes s as a JSON string the way Python does with
// ensure_ascii=False: only '"', '\\' and control characters are escaped.
func pyString(b *strings.Builder, s string) {
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
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
