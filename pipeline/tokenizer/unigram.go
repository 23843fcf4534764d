package tokenizer

import "math"

// unkPenalty is how much worse than the worst piece an unknown character
// scores in the Viterbi search.
const unkPenalty = 10

type bestPath struct {
	id      int
	score   float32
	startAt int // -1: not reached yet
}

// encodeUnigram finds the segmentation with the highest total score
// (Viterbi over all vocabulary pieces that match at each character
// boundary). A character no piece starts with becomes an unknown piece.
func (t *Tokenizer) encodeUnigram(text string, emit func(piece string, id int)) {
	n := len(text)
	best := make([]bestPath, n+1)
	for i := range best {
		best[i].startAt = -1
	}
	unkScore := t.minScore - unkPenalty
	for start := 0; start < n; {
		here := best[start].score
		mblen := oneCharLen(text[start:])
		hasSingle := false
		t.trie.walk(text[start:], func(length, id int) {
			typ := t.pieces[id].pieceType()
			if typ == typeUnused {
				return
			}
			target := &best[start+length]
			// The reference computes the candidate in double precision (its
			// score expression mixes float and double) and stores it as
			// float; rounding decides between equal-looking paths.
			var score float64
			if typ == typeUserDefined {
				// User-defined symbols get a bonus so they always win.
				score = float64(float32(length)*t.maxScore) - 0.1
			} else {
				score = float64(t.pieces[id].score)
			}
			cand := score + float64(here)
			if target.startAt == -1 || cand > float64(target.score) {
				*target = bestPath{id: id, score: float32(cand), startAt: start}
			}
			if length == mblen {
				hasSingle = true
			}
		})
		if !hasSingle {
			target := &best[start+mblen]
			cand := unkScore + here
			if target.startAt == -1 || cand > target.score {
				*target = bestPath{id: t.unk, score: cand, startAt: start}
			}
		}
		start += mblen
	}
	// Walk back from the end; every position reached through a character
	// boundary has a predecessor, so this terminates.
	type span struct{ start, end, id int }
	var path []span
	for end := n; end > 0; {
		b := best[end]
		if b.startAt < 0 || b.startAt >= end {
			break // unreachable by construction; guards against looping
		}
		path = append(path, span{b.startAt, end, b.id})
		end = b.startAt
	}
	for i := len(path) - 1; i >= 0; i-- {
		emit(text[path[i].start:path[i].end], path[i].id)
	}
}

// scoreRange returns the lowest and highest score of NORMAL pieces with
// the reference's initial values (FLT_MAX and FLT_MIN).
func scoreRange(pieces []pieceProto) (lo, hi float32) {
	lo, hi = math.MaxFloat32, 0x1p-126 // FLT_MAX, FLT_MIN
	for i := range pieces {
		if pieces[i].pieceType() == typeNormal {
			lo = min(lo, pieces[i].score)
			hi = max(hi, pieces[i].score)
		}
	}
	return lo, hi
}
