package constrain

import (
	"sync"
)

// Vocabulary is what masks are computed from: each token's bytes as it
// continues a text (empty for control tokens, which a document never
// contains), and the ids that may end a document (EOS, end-of-turn).
type Vocabulary struct {
	Tokens [][]byte
	Ends   []int
}

// Masker computes the tokens allowed after each state of a grammar's
// matcher over a vocabulary, each state's mask once (walking every
// token's bytes through a copy of the matcher), and caches them. It is
// safe for concurrent use.
type Masker struct {
	g     *Grammar
	vocab *Vocabulary
	mu    sync.Mutex
	masks map[string]*Mask
	pool  sync.Pool
}

// Mask is the set of allowed token ids of one state.
type Mask struct {
	bits  []uint64
	count int // allowed tokens
}

// Allowed reports whether id may come next.
func (k *Mask) Allowed(id int) bool {
	return id >= 0 && id/64 < len(k.bits) && k.bits[id/64]&(1<<(id%64)) != 0
}

// Bits is the mask as bits: bit id % 64 of word id / 64 allows id (the
// layout gpu.Program.SetTokenMask takes). The caller must not change it: masks are
// shared through the masker's cache.
func (k *Mask) Bits() []uint64 { return k.bits }

// Count is how many tokens are allowed.
func (k *Mask) Count() int { return k.count }

// maxMasks bounds a masker's cache; beyond it the cache starts over.
const maxMasks = 1 << 14

// NewMasker returns a masker for g over vocab.
func NewMasker(g *Grammar, vocab *Vocabulary) *Masker {
	return &Masker{g: g, vocab: vocab, masks: map[string]*Mask{}}
}

// Grammar is the masker's grammar.
func (k *Masker) Grammar() *Grammar { return k.g }

// Mask returns the tokens allowed after m's state: those whose bytes m
// accepts, and the end tokens where m is accepting.
func (k *Masker) Mask(m *Matcher) *Mask {
	var kb [256]byte
	key := m.key(kb[:0])
	k.mu.Lock()
	mask, ok := k.masks[string(key)]
	k.mu.Unlock()
	if ok {
		return mask
	}
	mask = k.compute(m)
	k.mu.Lock()
	if len(k.masks) >= maxMasks {
		k.masks = map[string]*Mask{}
	}
	k.masks[string(key)] = mask
	k.mu.Unlock()
	return mask
}

func (k *Masker) compute(m *Matcher) *Mask {
	n := len(k.vocab.Tokens)
	mask := &Mask{bits: make([]uint64, (n+63)/64)}
	scratch, _ := k.pool.Get().(*Matcher)
	if scratch == nil {
		scratch = &Matcher{}
	}
	defer k.pool.Put(scratch)
	if !m.done {
		for id, tok := range k.vocab.Tokens {
			if len(tok) == 0 {
				continue
			}
			m.cloneInto(scratch)
			if scratch.FeedBytes(tok) {
				mask.bits[id/64] |= 1 << (id % 64)
				mask.count++
			}
		}
	}
	if m.Accepting() {
		for _, id := range k.vocab.Ends {
			if id >= 0 && id < n && !mask.Allowed(id) {
				mask.bits[id/64] |= 1 << (id % 64)
				mask.count++
			}
		}
	}
	return mask
}
