package bpe

import (
	"container/heap"
	"strings"
	"unicode/utf8"
)

// merge is what a pair of adjacent symbols merges into.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// symbol is one node of the doubly linked list a word is merged in.
type symbol struct {
	id         int32
	prev, next int32 // -1 at the ends
	size       int32 // 0 once merged into its left neighbour
}

// candidate is a possible merge of symbols[left] with its right neighbour.
type candidate struct {
	left       int32
	rank       int32
	id         int32
	leftID     int32
	rightID    int32
	rightIndex int32
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// encodeWord runs the BPE model on one pre-tokenized piece.
func (t *Tokenizer) encodeWord(word string, out []int) []int {
	if word == "" {
		return out
	}
	if t.ignoreMerges || t.wholeNewlineRuns && strings.Trim(word, "\n") == "" {
		if id, ok := t.vocab[word]; ok {
			return append(out, id)
		}
	}
	// Initial symbols: one per character; a character missing from the
	// vocabulary becomes its byte tokens (byte_fallback) or the unknown
	// token.
	syms := make([]symbol, 0, len(word))
	unkRun := false
	for _, r := range word {
		var buf [utf8.UTFMax]byte
		ch := buf[:utf8.EncodeRune(buf[:], r)]
		if id, ok := t.vocab[string(ch)]; ok {
			syms = append(syms, symbol{id: int32(id)})
			unkRun = false
			continue
		}
		if t.byteFallback && t.hasByteTokens(ch) {
			for _, b := range ch {
				syms = append(syms, symbol{id: int32(t.byteIDs[b])})
			}
			unkRun = false
			continue
		}
		if t.unk < 0 {
			continue // no way to represent it: the reference drops it too
		}
		if t.fuseUnk && unkRun {
			continue
		}
		syms = append(syms, symbol{id: int32(t.unk)})
		unkRun = true
	}
	for i := range syms {
		syms[i].prev, syms[i].next, syms[i].size = int32(i-1), int32(i+1), 1
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	var q candidates
	push := func(left int32) {
		right := syms[left].next
		if right < 0 {
			return
		}
		if m, ok := t.merges[pairKey(syms[left].id, syms[right].id)]; ok {
			heap.Push(&q, candidate{left: left, rank: m.rank, id: m.id, leftID: syms[left].id, rightID: syms[right].id, rightIndex: right})
		}
	}
	for i := range syms {
		push(int32(i))
	}
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		l := &syms[c.left]
		// Skip candidates made stale by an earlier merge.
		if l.size == 0 || l.id != c.leftID || l.next != c.rightIndex {
			continue
		}
		r := &syms[c.rightIndex]
		if r.size == 0 || r.id != c.rightID {
			continue
		}
		l.id = c.id
		l.size += r.size
		r.size = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if l.prev >= 0 {
			push(l.prev)
		}
		push(c.left)
	}
	for i := int32(0); len(syms) > 0 && i >= 0; i = syms[i].next {
		out = append(out, int(syms[i].id))
	}
	return out
}

// hasByteTokens reports whether every byte of ch has a <0xNN> token.
func (t *Tokenizer) hasByteTokens(ch []byte) bool {
	for _, b := range ch {
		if t.byteIDs[b] < 0 {
			return false
		}
	}
	return true
}
