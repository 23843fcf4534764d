package tokenizer

// byteTrie maps byte strings to ids and walks them byte by byte, which is
// how SentencePiece's tries see pieces (a piece may end inside a UTF-8
// character only if the vocabulary says so).
type byteTrie struct {
	children map[uint64]int32 // node<<8 | byte -> child node
	ids      []int32          // id stored at a node, -1 when none
}

func newByteTrie() *byteTrie {
	return &byteTrie{children: map[uint64]int32{}, ids: []int32{-1}}
}

func (t *byteTrie) insert(s string, id int) {
	node := int32(0)
	for i := 0; i < len(s); i++ {
		key := uint64(node)<<8 | uint64(s[i])
		child, ok := t.children[key]
		if !ok {
			child = int32(len(t.ids))
			t.ids = append(t.ids, -1)
			t.children[key] = child
		}
		node = child
	}
	t.ids[node] = int32(id)
}

// walk calls visit(length, id) for every stored string that prefixes s, in
// increasing length.
func (t *byteTrie) walk(s string, visit func(length, id int)) {
	node := int32(0)
	for i := 0; i < len(s); i++ {
		child, ok := t.children[uint64(node)<<8|uint64(s[i])]
		if !ok {
			return
		}
		node = child
		if id := t.ids[node]; id >= 0 {
			visit(i+1, int(id))
		}
	}
}

// longestPrefix returns the length of the longest stored string that
// prefixes s, or 0.
func (t *byteTrie) longestPrefix(s string) int {
	best := 0
	t.walk(s, func(length, _ int) { best = length })
	return best
}

// oneCharLen is SentencePiece's UTF-8 length guess from the lead byte,
// clipped to the input; it never returns 0 for non-empty input.
func oneCharLen(s string) int {
	n := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[s[0]>>4]
	return min(n, len(s))
}
