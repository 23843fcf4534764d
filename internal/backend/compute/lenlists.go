package compute

import "github.com/gpurun/gpurun/gpu"

// Command lists by valid length. A decode step's attn_split dispatches one
// workgroup per attnChunk positions of the cache (the item's y), and the
// chunks past the step's last position return at once; yet each still
// costs a launch, so a list recorded for the whole cache makes a step's
// time follow the cache size. gpu.Commands has no indirect dispatch, so a
// program with such items (chunked) records, on first use, one list per
// span: a power of two of chunks below the cache's, whose attn_split items
// dispatch that many chunks. A step runs the list of the smallest span
// holding its last position. The kernels and their parameters (the
// partials' layout included) are the same in every list, and
// attn_combine reads only the chunks holding positions the row sees, so
// each list computes what the whole one does, bit for bit (chunks past the
// last position write nothing). Span 0 is the whole cache's list
// (program.cmds).

// span returns the span of a step whose rows see positions below valid:
// the smallest power of two of chunks holding them, or 0 where that is
// not below the program's chunks (or the program has no chunked items).
func (p *program) span(valid int) int {
	need := ceilDiv(max(valid, 1), attnChunk)
	s := 1
	for s < need {
		s *= 2
	}
	if s >= p.chunks {
		return 0
	}
	return s
}

// grid is the item's workgroup grid in the list of span.
func (it *item) grid(span int) (x, y, z int) {
	if it.chunked && span > 0 {
		return it.x, min(it.y, span), it.z
	}
	return it.x, it.y, it.z
}

// spanList returns the list of span, recording it on first use.
func (p *program) spanList(span int) (gpu.Commands, error) {
	if span == 0 {
		return p.cmds, nil
	}
	if c, ok := p.spans[span]; ok {
		return c, nil
	}
	cmds, _, err := p.recordList(false, span)
	if err != nil {
		return nil, err
	}
	if p.spans == nil {
		p.spans = map[int]gpu.Commands{}
	}
	p.spans[span] = cmds
	return cmds, nil
}

// chunked marks the item just planned as an attn_split whose y counts the
// cache's chunks.
func (pl *planner) chunked() { pl.items[len(pl.items)-1].chunked = true }
