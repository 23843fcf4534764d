package spirvgen

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
	words, err := decode(spv)
	if err != nil {
		return nil, err
	}
	nulls := map[uint32]bool{}
	shared := map[uint32]bool{}
	out := append([]uint32(nil), words[:firstWordAfterHeader]...)
	err = walk(words, func(op uint32, ins []uint32) {
		n := len(ins)
		switch {
		case op == opConstantNull && n >= 3:
			nulls[ins[2]] = true
		case op == opVariable && n >= 4 && ins[3] == scWorkgroup:
			shared[ins[2]] = true
		case op == opStore && n >= 3 && shared[ins[1]] && nulls[ins[2]]:
			return // dropped
		}
		out = append(out, ins...)
	})
	if err != nil {
		return nil, err
	}
	return encode(out), nil
}
