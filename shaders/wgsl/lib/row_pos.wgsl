// Library snippet, not a family: a family's line "// include: row_pos"
// is replaced by what follows (shaders.expandIncludes). It reads the
// family's step binding and p.pos_at.

// row_pos is the cache position of row t: step[STEP_POS] + t for an unbatched
// step, else the row's own position in the step buffer from p.pos_at on;
// a batched step's unused rows are at 0xffffffff, past every cache, so
// nothing is stored or attended for them. With pos_at POS_AT_ROW row t is
// at position t (a self-attention's private cache of the step's rows).
const POS_AT_ROW: u32 = 0xffffffffu; // shaders.PosAtRow

fn row_pos(t: u32) -> u32 {
    if p.pos_at == 0u {
        return step[STEP_POS] + t;
    }
    if p.pos_at == POS_AT_ROW {
        return t;
    }
    return step[p.pos_at + t];
}
