// Library snippet, not a family: a family's line "// include: mamba2"
// is replaced by what follows (shaders.expandIncludes). The helpers of
// the Mamba-2 kernels (mamba2conv.wgsl, mamba2scan.wgsl): they read
// p (Mamba2Params) and, through row_pos, the step binding.

// cc is the convolution's channels: x, B and C.
fn cc() -> u32 {
    return p.inner + 2u * p.groups * p.dstate;
}

// zx_cols is the width of a row of zx: z, x, B, C and dt.
fn zx_cols() -> u32 {
    return cc() + p.inner + p.heads;
}

// rows is the step's first row and row count for this dispatch, count 0
// when it has none (an unused batched row).
fn rows() -> vec2<u32> {
    var t0 = 0u;
    var n = min(step[STEP_ROWS], p.nrows);
    if p.pos_at != 0u {
        t0 = p.row0;
        n = select(0u, 1u, p.row0 < n);
    }
    if n == 0u || row_pos(t0) == 0xffffffffu {
        return vec2<u32>(t0, 0u);
    }
    return vec2<u32>(t0, n);
}
