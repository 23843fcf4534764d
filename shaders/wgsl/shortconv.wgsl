// Gated causal short convolution with its recurrent state
// (fusion.ShortConvOp, LFM2): each row of bcx is [B | C | x] (3*channels
// values); per channel c and row t at position q = row_pos(t),
//
//     u_q = B[t] * x[t]
//     out[t] = C[t] * sum_{j < width} w[c][j] * u_{q-width+1+j}
//
// where u before the step's first position comes from the layer's state
// (the last width-1 values of u, [width-1][channels] f32, oldest first,
// exactly the CPU reference's window) and is zero before position 0: a
// step at position 0 ignores what the state holds (the reset). After the
// step the state holds the last width-1 values of u. The weight w is
// [channels][width] of any matrix type but llama.cpp's blocks (f32, f16,
// bf16; int8 or int4 with their scales s, per row or per block).
//
// One invocation per channel runs the step's rows in order, so the
// state of a channel has one reader and writer and the taps are summed
// in the CPU's order (j ascending). An unbatched step runs its
// step[STEP_ROWS] rows from position step[STEP_POS] on; a batched step
// (pos_at != 0) dispatches once per row, row0 binding that row's
// sequence's state, and an unused row (position 0xffffffff) does
// nothing. Dispatch: (ceil(channels/64), 1, 1).

struct ShortConvParams {
    channels: u32,
    width: u32,   // taps (2..1024); the state holds width-1 inputs per channel
    nrows: u32,   // rows of bcx and out (the graph's tokens)
    row0: u32,    // a batched step's row of this dispatch (0 unbatched)
    pos_at: u32,  // row_pos: 0 unbatched, else the word of row 0's position
    wt: u32,      // a WeightType of w
    bcx_f16: u32, // 1: bcx is an f16 activation (packed halves)
    out_f16: u32, // 1: out is an f16 activation
    st: u32,      // a ScaleType of s
    block: u32,   // taps per scale (0: unquantized)
    nblocks: u32, // scales per row of w
    pad0: u32,
}

@group(0) @binding(0) var<uniform> p: ShortConvParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> bcx_w: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> s: array<u32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: bcx, out
// include: row_pos

// conv_in is u = B * x of channel c in row t of bcx.
fn conv_in(t: u32, c: u32) -> f32 {
    let base = t * 3u * p.channels;
    return bcx_at(base + c) * bcx_at(base + 2u * p.channels + c);
}

// tap is w[c][j], dequantized.
fn tap(c: u32, j: u32) -> f32 {
    let e = c * p.width + j;
    let v = decode(w[word_of(e, p.wt)], e, p.wt);
    if p.block == 0u {
        return v;
    }
    let si = c * p.nblocks + j / p.block;
    return v * decode_scale(s[scale_word(si, p.st)], si, p.st);
}

// window is slot i of channel c's window over the step: slots below
// width-1 are the state (zero on a fresh sequence), slot width-1+t is row
// t0+t's input.
fn window(i: u32, c: u32, t0: u32, fresh: bool) -> f32 {
    let k1 = p.width - 1u;
    if i < k1 {
        if fresh {
            return 0.0;
        }
        return state[i * p.channels + c];
    }
    return conv_in(t0 + i - k1, c);
}

@compute @workgroup_size(64)
fn short_conv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.channels {
        return;
    }
    var t0 = 0u;
    var n = min(step[STEP_ROWS], p.nrows);
    if p.pos_at != 0u {
        t0 = p.row0;
        n = select(0u, 1u, p.row0 < n);
    }
    if n == 0u {
        return;
    }
    let pos = row_pos(t0);
    if pos == 0xffffffffu {
        return;
    }
    let fresh = pos == 0u;
    let k1 = p.width - 1u;
    for (var t = 0u; t < n; t++) {
        var sum = 0.0;
        for (var j = 0u; j < p.width; j++) {
            sum += tap(c, j) * window(t + j, c, t0, fresh);
        }
        let row = t0 + t;
        out_set(row * p.channels + c, bcx_at(row * 3u * p.channels + p.channels + c) * sum);
    }
    // The new state is the window's last width-1 slots: slot i takes slot
    // n+i, read before any slot at or past it is written.
    for (var i = 0u; i < k1; i++) {
        state[i * p.channels + c] = window(n + i, c, t0, fresh);
    }
}
