// Library snippet, not a family: a family's line "// include: step_span"
// is replaced by what follows (shaders.expandIncludes). It reads the
// family's step binding, p.nrows, p.row0 and p.pos_at, and needs row_pos.

// step_span is the rows of the step one dispatch runs, (first row, count):
// an unbatched step's step[STEP_ROWS] rows from row 0; in a batched step
// (p.pos_at != 0), dispatched once per row with that row's sequence's
// state, row p.row0 alone, or none when it is past the step's rows or
// unused (position 0xffffffff).
fn step_span() -> vec2<u32> {
    let n = min(step[STEP_ROWS], p.nrows);
    if p.pos_at == 0u {
        return vec2<u32>(0u, n);
    }
    if p.row0 >= n || row_pos(p.row0) == 0xffffffffu {
        return vec2<u32>(p.row0, 0u);
    }
    return vec2<u32>(p.row0, 1u);
}
