package kernels

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/shaders"
)

// TestAttnParamsLayout holds attnParams to struct AttnParams of
// attention.wgsl: the same fields in the same order with the same 4-byte
// types, so the words uniformWords writes are the ones the kernels read.
func TestAttnParamsLayout(t *testing.T) {
	spec, err := shaders.Get("attn_split")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)struct AttnParams \{(.*?)\n\}`).FindStringSubmatch(spec.WGSL)
	if m == nil {
		t.Fatal("struct AttnParams not found in attention.wgsl")
	}
	var wgsl [][2]string
	for _, line := range strings.Split(m[1], "\n") {
		line, _, _ = strings.Cut(line, "//")
		name, typ, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		wgsl = append(wgsl, [2]string{strings.TrimSpace(name), strings.TrimSuffix(strings.TrimSpace(typ), ",")})
	}
	rt := reflect.TypeOf(attnParams{})
	if rt.NumField() != len(wgsl) {
		t.Fatalf("Go struct has %d fields, WGSL %d: %v", rt.NumField(), len(wgsl), wgsl)
	}
	goType := map[reflect.Kind]string{reflect.Uint32: "u32", reflect.Float32: "f32", reflect.Int32: "i32"}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if got := [2]string{f.Tag.Get("wgsl"), goType[f.Type.Kind()]}; got != wgsl[i] {
			t.Errorf("field %d: Go %s %v, WGSL %v", i, f.Name, got, wgsl[i])
		}
	}
	if n := len(uniformWords(attnParams{})); n != len(wgsl) || 4*n > paramBytes {
		t.Errorf("%d words for %d fields (binding holds %d bytes)", n, len(wgsl), paramBytes)
	}
}
