package spirvgen

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SPIR-V opcodes, capabilities and storage classes DropUnusedCapabilities
// reads.
const (
	opExtension        = 10
	opCapability       = 17
	opTypeInt          = 21
	opTypeFloat        = 22
	opTypeVector       = 23
	opTypeMatrix       = 24
	opTypeArray        = 28
	opTypeRuntimeArray = 29
	opTypeStruct       = 30
	opTypePointer      = 32

	capFloat16                      = 9
	capFloat64                      = 10
	capInt64                        = 11
	capInt16                        = 22
	capInt8                         = 39
	capStorageBuffer16              = 4433
	capUniformAndStorage16          = 4434
	capStoragePushConstant16        = 4435
	capStorageInputOutput16         = 4436
	capStorageBuffer8               = 4448
	capUniformAndStorage8           = 4449
	capStoragePushConstant8         = 4450
	scInput, scUniform              = 1, 2
	scOutput, scPushConstant        = 3, 9
	scStorageBuffer                 = 12
	ext16BitStorage                 = "SPV_KHR_16bit_storage"
	ext8BitStorage                  = "SPV_KHR_8bit_storage"
	firstWordAfterHeader            = 5
	spirvMagic               uint32 = 0x07230203
)

// DropUnusedCapabilities removes the capabilities a module declares but does
// not use, among those it can decide (the others stay):
//   - Float16, Float64, Int8, Int16, Int64: used when the module declares a
//     scalar type of that kind and width;
//   - the 16- and 8-bit storage capabilities (StorageBuffer, UniformAndStorage,
//     PushConstant, InputOutput): used when a pointer type of the matching
//     storage class points to a type holding a 16- (8-) bit scalar;
//
// and the extension SPV_KHR_16bit_storage (SPV_KHR_8bit_storage) when no
// 16-bit (8-bit) storage capability is left. naga 30 declares
// StorageInputOutput16 in every module with `enable f16;`, though a compute
// module has no 16-bit inputs or outputs, and lavapipe lacks that feature:
// without the pass it refuses every f16 module.
func DropUnusedCapabilities(spv []byte) ([]byte, error) {
	words, err := decode(spv)
	if err != nil {
		return nil, err
	}
	// Pass 1: the types. small[id] is the set of small scalar widths the
	// type id holds: bit 8 for 8-bit, bit 16 for 16-bit scalars.
	used := map[uint32]bool{}
	small := map[uint32]uint32{}
	err = walk(words, func(op uint32, ins []uint32) {
		switch {
		case op == opTypeInt && len(ins) >= 3:
			switch ins[2] {
			case 8:
				used[capInt8] = true
			case 16:
				used[capInt16] = true
			case 64:
				used[capInt64] = true
			}
			if ins[2] == 8 || ins[2] == 16 {
				small[ins[1]] |= ins[2]
			}
		case op == opTypeFloat && len(ins) >= 3:
			switch ins[2] {
			case 16:
				used[capFloat16] = true
				small[ins[1]] |= 16
			case 64:
				used[capFloat64] = true
			}
		case (op == opTypeVector || op == opTypeMatrix || op == opTypeArray || op == opTypeRuntimeArray) && len(ins) >= 3:
			small[ins[1]] |= small[ins[2]]
		case op == opTypeStruct && len(ins) >= 2:
			for _, m := range ins[2:] {
				small[ins[1]] |= small[m]
			}
		case op == opTypePointer && len(ins) >= 4:
			for _, c := range storageCaps(ins[2], small[ins[3]]) {
				used[c] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	// A use a capability the module does not declare would cover is
	// covered by one that implies it: keep that one.
	declared := map[uint32]bool{}
	_ = walk(words, func(op uint32, ins []uint32) {
		if op == opCapability && len(ins) == 2 {
			declared[ins[1]] = true
		}
	})
	for c, by := range map[uint32]uint32{capStorageBuffer16: capUniformAndStorage16, capStorageBuffer8: capUniformAndStorage8} {
		if used[c] && !declared[c] {
			used[by] = true
		}
	}
	decidable := map[uint32]bool{
		capFloat16: true, capFloat64: true, capInt8: true, capInt16: true, capInt64: true,
		capStorageBuffer16: true, capUniformAndStorage16: true, capStoragePushConstant16: true, capStorageInputOutput16: true,
		capStorageBuffer8: true, capUniformAndStorage8: true, capStoragePushConstant8: true,
	}
	keep16 := used[capStorageBuffer16] || used[capUniformAndStorage16] || used[capStoragePushConstant16] || used[capStorageInputOutput16]
	keep8 := used[capStorageBuffer8] || used[capUniformAndStorage8] || used[capStoragePushConstant8]
	// Pass 2: copy all but the unused capabilities and extensions.
	out := append([]uint32(nil), words[:firstWordAfterHeader]...)
	err = walk(words, func(op uint32, ins []uint32) {
		switch {
		case op == opCapability && len(ins) == 2 && decidable[ins[1]]:
			if !used[ins[1]] {
				return
			}
		case op == opExtension:
			name := literalString(ins[1:])
			if name == ext16BitStorage && !keep16 || name == ext8BitStorage && !keep8 {
				return
			}
		}
		out = append(out, ins...)
	})
	if err != nil {
		return nil, err
	}
	return encode(out), nil
}

// storageCaps is the capabilities a pointer of storage class sc to a type
// holding scalars of the widths in mask (bits 8 and 16) needs.
func storageCaps(sc, mask uint32) []uint32 {
	var out []uint32
	for _, w := range []uint32{8, 16} {
		if mask&w == 0 {
			continue
		}
		c := map[uint32]map[uint32]uint32{
			16: {scStorageBuffer: capStorageBuffer16, scUniform: capUniformAndStorage16, scPushConstant: capStoragePushConstant16, scInput: capStorageInputOutput16, scOutput: capStorageInputOutput16},
			8:  {scStorageBuffer: capStorageBuffer8, scUniform: capUniformAndStorage8, scPushConstant: capStoragePushConstant8},
		}[w][sc]
		if c != 0 {
			out = append(out, c)
		}
		if sc == scUniform {
			// A BufferBlock in Uniform needs only the storage buffer
			// capability: keep it too (too much, never too little).
			out = append(out, map[uint32]uint32{16: capStorageBuffer16, 8: capStorageBuffer8}[w])
		}
	}
	return out
}

func decode(spv []byte) ([]uint32, error) {
	if len(spv)%4 != 0 || len(spv) < 4*firstWordAfterHeader {
		return nil, errors.New("spirvgen: not a SPIR-V module")
	}
	words := make([]uint32, len(spv)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(spv[4*i:])
	}
	if words[0] != spirvMagic {
		return nil, fmt.Errorf("spirvgen: SPIR-V magic %#x", words[0])
	}
	return words, nil
}

func encode(words []uint32) []byte {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// walk calls f with each instruction after the header: its opcode and its
// words (the first holding length and opcode).
func walk(words []uint32, f func(op uint32, ins []uint32)) error {
	for i := firstWordAfterHeader; i < len(words); {
		n := int(words[i] >> 16)
		if n == 0 || i+n > len(words) {
			return fmt.Errorf("spirvgen: bad instruction length %d at word %d", n, i)
		}
		f(words[i]&0xffff, words[i:i+n])
		i += n
	}
	return nil
}

// literalString decodes a SPIR-V literal string (nul-terminated UTF-8,
// little-endian bytes within each word).
func literalString(ws []uint32) string {
	var b []byte
	for _, w := range ws {
		for k := 0; k < 4; k++ {
			c := byte(w >> (8 * k))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return string(b)
}
