// Mamba-2's convolution with its state (fusion.Mamba2Op, Granite 4.0 H;
// the first of its kernels, mamba2scan.wgsl's the second, the norm
// kernel the third). Each row of zx is [z (inner) | x (inner) | B
// (groups*dstate) | C (groups*dstate) | dt (heads)]; the state is the
// convolution's window over [x | B | C] (cc = inner + 2*groups*dstate
// channels, width-1 inputs each, [width-1][cc] oldest first) followed by
// a [head dim][dstate] matrix per head, exactly the CPU reference's
// layout.
//
// One invocation per channel c runs the step's rows in order, as
// short_conv does:
//
//     xbc[t][c] = silu(bias[c] + sum_{j < width} w[c][j] * u_{q-width+1+j}[c])
//
// u before the step's first position from the state's window (zero on a
// fresh sequence: position 0 reads no state), then the window updated to
// the last width-1 inputs. xbc is f32 scratch [nrows][cc]; the taps w are
// [cc][width] of an unquantized type (WT_F32, WT_F16, WT_BF16).
//
// An unbatched step runs its step[STEP_ROWS] rows from position
// step[STEP_POS] on; a batched step (pos_at != 0) dispatches once per row,
// row0 binding that row's sequence's state, and an unused row (position
// 0xffffffff) does nothing. Dispatch: (ceil(cc/64), 1, 1).

struct Mamba2Params {
    inner: u32,   // d_inner: z and x widths
    heads: u32,   // SSM heads (head dim inner/heads)
    groups: u32,  // groups of B and C
    dstate: u32,  // d_state
    width: u32,   // convolution taps (2..1024)
    nrows: u32,   // rows of zx, xbc and out (the graph's tokens)
    row0: u32,    // a batched step's row of this dispatch (0 unbatched)
    pos_at: u32,  // row_pos: 0 unbatched, else the word of row 0's position
    wt: u32,      // a WeightType (f32, f16, bf16) of the taps w
    zx_f16: u32,  // 1: zx is an f16 activation (packed halves)
    out_f16: u32, // 0: the scan writes the planner's f32 scratch
    pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Mamba2Params;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> zx_w: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> xbc: array<f32>;

// activations: zx
// include: row_pos
// include: mamba2

// window is slot i of channel c's window over the step: slots below
// width-1 are the state (zero on a fresh sequence), slot width-1+t is row
// t0+t's input u = zx[t][inner + c].
fn window(i: u32, c: u32, t0: u32, fresh: bool) -> f32 {
    let k1 = p.width - 1u;
    if i < k1 {
        if fresh {
            return 0.0;
        }
        return state[i * cc() + c];
    }
    return zx_at((t0 + i - k1) * zx_cols() + p.inner + c);
}

@compute @workgroup_size(64)
fn mamba2_conv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let channels = cc();
    if c >= channels {
        return;
    }
    let r = rows();
    let t0 = r.x;
    let n = r.y;
    if n == 0u {
        return;
    }
    let fresh = row_pos(t0) == 0u;
    let k1 = p.width - 1u;
    for (var t = 0u; t < n; t++) {
        var sum = bias[c];
        for (var j = 0u; j < p.width; j++) {
            let e = c * p.width + j;
            sum += decode(w[word_of(e, p.wt)], e, p.wt) * window(t + j, c, t0, fresh);
        }
        xbc[(t0 + t) * channels + c] = apply_act(ACT_SILU, sum);
    }
    // The new window is the last width-1 slots: slot i takes slot n+i,
    // read before any slot at or past it is written.
    for (var i = 0u; i < k1; i++) {
        state[i * channels + c] = window(n + i, c, t0, fresh);
    }
}
