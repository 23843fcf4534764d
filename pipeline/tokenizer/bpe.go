package tokenizer

// symbol is one node of the doubly linked list BPE merges over.
type symbol struct {
	start, end int // byte range in the normalized text
	prev, next int // neighbor indices, -1 at the ends
	frozen     bool
}

// mergeCandidate is a possible merge of symbols left and right (adjacent
// when pushed) into a piece of the given score and byte length.
type mergeCandidate struct {
	score       float32
	left, right int
	size        int
}

// mergeQueue is a binary max-heap that pops the highest score first and,
// among equal scores, the leftmost pair, as SentencePiece's agenda does.
// It is typed (not container/heap) to avoid boxing every candidate.
type mergeQueue []mergeCandidate

func (q mergeQueue) before(i, j int) bool {
	if q[i].score != q[j].score {
		return q[i].score > q[j].score
	}
	return q[i].left < q[j].left
}

func (q *mergeQueue) push(c mergeCandidate) {
	*q = append(*q, c)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.before(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *mergeQueue) pop() mergeCandidate {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		best, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h.before(l, best) {
			best = l
		}
		if r < len(h) && h.before(r, best) {
			best = r
		}
		if best == i {
			break
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
	*q = h
	return top
}

// encodeBPE splits normalized text into characters (user-defined symbols
// whole and frozen), then repeatedly merges the best adjacent pair whose
// concatenation is a piece. Pieces marked UNUSED are split back into the
// pieces they were merged from. O(n log n) in the text length.
func (t *Tokenizer) encodeBPE(text string, emit func(piece string, id int)) {
	var syms []symbol
	for pos := 0; pos < len(text); {
		l, frozen := t.matchUserDefined(text[pos:])
		syms = append(syms, symbol{start: pos, end: pos + l, prev: len(syms) - 1, next: len(syms) + 1, frozen: frozen})
		pos += l
	}
	if len(syms) == 0 {
		return
	}
	syms[len(syms)-1].next = -1

	queue := make(mergeQueue, 0, len(syms))
	// unusedSplit remembers how an UNUSED piece was formed so it can be
	// resegmented; keyed by the merged piece text.
	var unusedSplit map[string][2]string
	tryPair := func(left, right int) {
		if left < 0 || right < 0 || syms[left].frozen || syms[right].frozen {
			return
		}
		merged := text[syms[left].start:syms[right].end]
		id, ok := t.pieceIDs[merged]
		if !ok {
			return
		}
		queue.push(mergeCandidate{score: t.pieces[id].score, left: left, right: right, size: len(merged)})
		if t.pieces[id].pieceType() == typeUnused {
			if unusedSplit == nil {
				unusedSplit = map[string][2]string{}
			}
			unusedSplit[merged] = [2]string{text[syms[left].start:syms[left].end], text[syms[right].start:syms[right].end]}
		}
	}
	for i := 1; i < len(syms); i++ {
		tryPair(i-1, i)
	}
	for len(queue) > 0 {
		c := queue.pop()
		l, r := &syms[c.left], &syms[c.right]
		// Stale candidates: a side was merged away or grew since the push.
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != c.size {
			continue
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.start, r.end = 0, 0
		tryPair(l.prev, c.left)
		tryPair(c.left, l.next)
	}

	var resegment func(piece string)
	resegment = func(piece string) {
		id := t.textPieceID(piece)
		if id == t.unk || t.pieces[id].pieceType() != typeUnused {
			emit(piece, id)
			return
		}
		parts, ok := unusedSplit[piece]
		if !ok {
			emit(piece, id)
			return
		}
		resegment(parts[0])
		resegment(parts[1])
	}
	for i := 0; i != -1; i = syms[i].next {
		resegment(text[syms[i].start:syms[i].end])
	}
}
