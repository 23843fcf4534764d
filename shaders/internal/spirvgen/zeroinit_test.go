package spirvgen

import (
	"encoding/binary"
	"testing"
)

func module(ins ...[]uint32) []byte {
	words := []uint32{0x07230203, 0x00010300, 0, 100, 0}
	for _, in := range ins {
		words = append(words, uint32(len(in))<<16|in[0])
		words = append(words, in[1:]...)
	}
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// TestDropWorkgroupZeroInit: stores of a null constant into workgroup
// variables go; stores of other values, and of nulls into other storage
// classes, stay.
func TestDropWorkgroupZeroInit(t *testing.T) {
	// {opcode, operands...}; the length word is added by module.
	null := []uint32{opConstantNull, 1, 10}
	one := []uint32{43, 2, 11, 1} // OpConstant %2 %11 1
	shared := []uint32{opVariable, 3, 20, scWorkgroup}
	private := []uint32{opVariable, 4, 21, 6} // Private
	in := module(null, one, shared, private,
		[]uint32{opStore, 20, 10},    // dropped
		[]uint32{opStore, 20, 11},    // a value: kept
		[]uint32{opStore, 21, 10},    // not workgroup: kept
		[]uint32{opStore, 20, 10, 2}, // with memory operands: dropped
	)
	want := module(null, one, shared, private, []uint32{opStore, 20, 11}, []uint32{opStore, 21, 10})
	got, err := DropWorkgroupZeroInit(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	for _, bad := range [][]byte{nil, in[:7], append([]byte{0, 0, 0, 0}, in[4:]...), in[:len(in)-4]} {
		if _, err := DropWorkgroupZeroInit(bad); err == nil {
			t.Errorf("no error for %d bytes", len(bad))
		}
	}
}
