package bpe

// trie finds the longest added token at the start of a string.
type trie struct {
	next map[byte]*trie
	end  bool
}

func newTrie() *trie { return &trie{next: map[byte]*trie{}} }

func (t *trie) insert(s string) {
	n := t
	for i := 0; i < len(s); i++ {
		c, ok := n.next[s[i]]
		if !ok {
			c = newTrie()
			n.next[s[i]] = c
		}
		n = c
	}
	n.end = true
}

// longestPrefix is the length of the longest inserted string that starts
// s, or 0.
func (t *trie) longestPrefix(s string) int {
	best := 0
	n := t
	for i := 0; i < len(s); i++ {
		c, ok := n.next[s[i]]
		if !ok {
			break
		}
		n = c
		if n.end {
			best = i + 1
		}
	}
	return best
}
