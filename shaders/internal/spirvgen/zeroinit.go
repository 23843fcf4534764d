package spirvgen

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// NoZeroInitMarker, on a line of its own in a family's WGSL, makes Generate
// drop naga's zero-initialization of workgroup memory from that family's
// module (see DropWorkgroupZeroInit). The family promises that it never
// reads a workgroup word it has not written first.
const NoZeroInitMarker = "// spirvgen: no-workgroup-zero-init"

// SPIR-V opcodes and the storage class the pass needs.
const (
	opConstantNull = 46
	opVariable     = 59
	opStore        = 62
	scWorkgroup    = 4
)

// DropWorkgroupZeroInit removes every OpStore of an OpConstantNull into a
// Workgroup variable: the code naga puts at the start of each entry point
// to give workgroup memory WGSL's zero initial value. lavapipe (Mesa 22.3)
// expands such a store of a large array into one store per element and
// takes minutes to compile the result (an 8 KiB array: over five minutes).
// Everything else, the barrier after those stores included, stays.
func DropWorkgroupZeroInit(spv []byte) ([]byte, error) {
	if len(spv)%4 != 0 || len(spv) < 20 {
		return nil, errors.New("spirvgen: not a SPIR-V module")
	}
	words := make([]uint32, len(spv)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(spv[4*i:])
	}
	if words[0] != 0x07230203 {
		return nil, fmt.Errorf("spirvgen: SPIR-V magic %#x", words[0])
	}
	nulls := map[uint32]bool{}
	shared := map[uint32]bool{}
	out := append([]uint32(nil), words[:5]...)
	for i := 5; i < len(words); {
		n := int(words[i] >> 16)
		op := words[i] & 0xffff
		if n == 0 || i+n > len(words) {
			return nil, fmt.Errorf("spirvgen: bad instruction length %d at word %d", n, i)
		}
		ins := words[i : i+n]
		switch {
		case op == opConstantNull && n >= 3:
			nulls[ins[2]] = true
		case op == opVariable && n >= 4 && ins[3] == scWorkgroup:
			shared[ins[2]] = true
		case op == opStore && n >= 3 && shared[ins[1]] && nulls[ins[2]]:
			i += n
			continue // dropped
		}
		out = append(out, ins...)
		i += n
	}
	b := make([]byte, 4*len(out))
	for i, w := range out {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b, nil
}
