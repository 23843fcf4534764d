package tokenizer

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// charsmap is SentencePiece's precompiled normalization map: a Darts-clone
// double-array trie over the UTF-8 of source strings whose values are
// offsets of NUL-terminated replacement strings.
//
// Blob layout: uint32 little-endian trie size in bytes, the trie (uint32
// units), then the replacement strings.
type charsmap struct {
	units      []uint32
	normalized []byte
}

// maxCharsmapMatches bounds how many prefix matches are considered per
// position, as the reference normalizer does.
const maxCharsmapMatches = 32

func parseCharsmap(blob []byte) (*charsmap, error) {
	if len(blob) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than its header", ErrInvalidCharsmap, len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	rest := blob[4:]
	if uint64(size) > uint64(len(rest)) || size%4 != 0 || size == 0 {
		return nil, fmt.Errorf("%w: trie size %d with %d bytes left", ErrInvalidCharsmap, size, len(rest))
	}
	cm := &charsmap{units: make([]uint32, size/4), normalized: rest[size:]}
	for i := range cm.units {
		cm.units[i] = binary.LittleEndian.Uint32(rest[4*i:])
	}
	// Every value reached by a lookup must index a NUL-terminated string;
	// checking all leaf values now keeps lookups free of bounds surprises.
	for i, u := range cm.units {
		if u>>31 == 0 {
			continue // not a leaf unit
		}
		v := int(u & 0x7fffffff)
		if v >= len(cm.normalized) || bytes.IndexByte(cm.normalized[v:], 0) < 0 {
			return nil, fmt.Errorf("%w: unit %d points at replacement %d outside %d bytes", ErrInvalidCharsmap, i, v, len(cm.normalized))
		}
	}
	return cm, nil
}

// Darts-clone unit accessors.
func unitHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func unitValue(u uint32) uint32  { return u & 0x7fffffff }
func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xff) }
func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// longestMatch returns the length of the longest source string that
// prefixes s (among the first maxCharsmapMatches matches) and its
// replacement, or 0 when none does.
func (c *charsmap) longestMatch(s string) (int, string) {
	units := c.units
	pos := uint32(0)
	u := units[0]
	pos ^= unitOffset(u)
	found, bestLen := 0, 0
	var bestVal uint32
	for i := 0; i < len(s); i++ {
		pos ^= uint32(s[i])
		if pos >= uint32(len(units)) {
			break
		}
		u = units[pos]
		if unitLabel(u) != uint32(s[i]) {
			break
		}
		pos ^= unitOffset(u)
		if unitHasLeaf(u) {
			if pos >= uint32(len(units)) {
				break
			}
			if found < maxCharsmapMatches {
				bestLen = i + 1
				bestVal = unitValue(units[pos])
			}
			found++
		}
	}
	if bestLen == 0 {
		return 0, ""
	}
	if int(bestVal) >= len(c.normalized) {
		return 0, "" // malformed trie: treat as no rule
	}
	rep := c.normalized[bestVal:]
	end := bytes.IndexByte(rep, 0)
	if end < 0 {
		return 0, ""
	}
	return bestLen, string(rep[:end])
}
