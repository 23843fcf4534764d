// Package tables extracts the I-quant lookup tables from llama.cpp's
// ggml/src/ggml-common.h and renders them in a canonical text whose
// SHA-256 package tensors keeps (iqtables.sha256), so its tests can check
// the generated Go tables without the header.
package tables

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Table is one GGML_TABLE_BEGIN(ctype, name, size) ... GGML_TABLE_END()
// array. Values hold each element's bit pattern in the element's width
// (an int8 -127 is 0x81).
type Table struct {
	Name   string // the C name
	CType  string // uint8_t, int8_t, uint32_t or uint64_t
	GoName string // the generated Go variable
	Values []uint64
}

// Wanted lists the tables package tensors uses, in the generated order:
// C name, C type, Go name.
var Wanted = []struct{ Name, CType, GoName string }{
	{"kmask_iq2xs", "uint8_t", "kmaskIQ2XS"},
	{"ksigns_iq2xs", "uint8_t", "ksignsIQ2XS"},
	{"iq2xxs_grid", "uint64_t", "iq2xxsGrid"},
	{"iq2xs_grid", "uint64_t", "iq2xsGrid"},
	{"iq2s_grid", "uint64_t", "iq2sGrid"},
	{"iq3xxs_grid", "uint32_t", "iq3xxsGrid"},
	{"iq3s_grid", "uint32_t", "iq3sGrid"},
	{"kvalues_iq4nl", "int8_t", "kvaluesIQ4NL"},
	{"kvalues_fp4", "int8_t", "kvaluesFP4"},
	{"iq1s_grid", "uint64_t", "iq1sGrid"},
}

var (
	beginRE  = regexp.MustCompile(`GGML_TABLE_BEGIN\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)`)
	defineRE = regexp.MustCompile(`(?m)^\s*#define\s+(\w+)\s+(\d+)\s*$`)
	commentR = regexp.MustCompile(`//[^\n]*`)
)

func bits(ctype string) (int, bool) {
	switch ctype {
	case "uint8_t", "int8_t":
		return 8, true
	case "uint16_t":
		return 16, true
	case "uint32_t":
		return 32, true
	case "uint64_t":
		return 64, true
	}
	return 0, false
}

// Extract returns the Wanted tables of the header src, checking each
// one's type and declared size.
func Extract(src []byte) ([]Table, error) {
	text := commentR.ReplaceAllString(string(src), "")
	defines := map[string]int{}
	for _, m := range defineRE.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[2])
		defines[m[1]] = n
	}
	found := map[string]Table{}
	for _, loc := range beginRE.FindAllStringSubmatchIndex(text, -1) {
		ctype, name, size := text[loc[2]:loc[3]], text[loc[4]:loc[5]], text[loc[6]:loc[7]]
		if ctype == "type" { // the macro's own definition
			continue
		}
		rest := text[loc[1]:]
		end := strings.Index(rest, "GGML_TABLE_END()")
		if end < 0 {
			return nil, fmt.Errorf("table %s has no GGML_TABLE_END()", name)
		}
		n, err := strconv.Atoi(size)
		if err != nil {
			var ok bool
			if n, ok = defines[size]; !ok {
				return nil, fmt.Errorf("table %s: size %q is neither a number nor a #define", name, size)
			}
		}
		w, ok := bits(ctype)
		if !ok {
			continue // a type no wanted table has
		}
		var vals []uint64
		for _, f := range strings.Split(rest[:end], ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			v, err := strconv.ParseInt(f, 0, 64)
			if err != nil {
				u, uerr := strconv.ParseUint(f, 0, 64)
				if uerr != nil {
					return nil, fmt.Errorf("table %s: value %q: %w", name, f, err)
				}
				v = int64(u)
			}
			u := uint64(v)
			if w < 64 {
				u &= 1<<w - 1
				if ctype[0] == 'u' && uint64(v) != u || ctype[0] == 'i' && (v < -(1<<(w-1)) || v >= 1<<(w-1)) {
					return nil, fmt.Errorf("table %s: value %s does not fit %s", name, f, ctype)
				}
			}
			vals = append(vals, u)
		}
		if len(vals) != n {
			return nil, fmt.Errorf("table %s: %d values for size %d", name, len(vals), n)
		}
		found[name] = Table{Name: name, CType: ctype, Values: vals}
	}
	var out []Table
	for _, w := range Wanted {
		t, ok := found[w.Name]
		if !ok {
			return nil, fmt.Errorf("no table %s", w.Name)
		}
		if t.CType != w.CType {
			return nil, fmt.Errorf("table %s is %s, want %s", w.Name, t.CType, w.CType)
		}
		t.GoName = w.GoName
		out = append(out, t)
	}
	return out, nil
}

// Canonical is the tables' text whose SHA-256 is kept: per table a line
// "name ctype count" and then one line per value in hexadecimal.
func Canonical(ts []Table) []byte {
	var b bytes.Buffer
	for _, t := range ts {
		fmt.Fprintf(&b, "%s %s %d\n", t.Name, t.CType, len(t.Values))
		for _, v := range t.Values {
			fmt.Fprintf(&b, "%x\n", v)
		}
	}
	return b.Bytes()
}

// GoType is the Go element type of t.
func (t Table) GoType() string {
	return strings.TrimSuffix(t.CType, "_t")
}

// GoLiteral writes value v of t as a Go literal.
func (t Table) GoLiteral(v uint64) string {
	switch t.CType {
	case "int8_t":
		return strconv.Itoa(int(int8(v)))
	case "uint8_t":
		return strconv.FormatUint(v, 10)
	case "uint32_t":
		return fmt.Sprintf("0x%08x", v)
	}
	return fmt.Sprintf("0x%016x", v)
}
