//go:build cgo && !js

package webgpu

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// TestBindingLayout guards the unsafe mirrors in handles.go: the binding's
// structs must still be exactly these pointer fields at these offsets.
func TestBindingLayout(t *testing.T) {
	ptr := unsafe.Sizeof(uintptr(0))
	tests := []struct {
		typ    reflect.Type
		mirror reflect.Type
		fields []string
	}{
		{reflect.TypeOf(wgpu.Buffer{}), reflect.TypeOf(bufferLayout{}), []string{"deviceRef", "ref"}},
		{reflect.TypeOf(wgpu.Device{}), reflect.TypeOf(deviceLayout{}), []string{"ref"}},
	}
	for _, tc := range tests {
		t.Run(tc.typ.Name(), func(t *testing.T) {
			if tc.typ.NumField() != len(tc.fields) {
				t.Fatalf("%d fields, want %d", tc.typ.NumField(), len(tc.fields))
			}
			if tc.typ.Size() != tc.mirror.Size() || tc.typ.Size() != uintptr(len(tc.fields))*ptr {
				t.Fatalf("size %d, mirror %d", tc.typ.Size(), tc.mirror.Size())
			}
			for i, name := range tc.fields {
				f := tc.typ.Field(i)
				if f.Name != name || f.Offset != uintptr(i)*ptr || f.Type.Kind() != reflect.Pointer {
					t.Errorf("field %d: %s at %d (%s), want %s at %d (pointer)", i, f.Name, f.Offset, f.Type.Kind(), name, uintptr(i)*ptr)
				}
				if m := tc.mirror.Field(i); m.Name != name || m.Offset != f.Offset {
					t.Errorf("mirror field %d: %s at %d", i, m.Name, m.Offset)
				}
			}
		})
	}
}
