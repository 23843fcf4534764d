// Gated DeltaNet's convolution (fusion.DeltaNetOp, first half): for each
// row t < T and channel c of the C = (2K+V)·D channels of qkv,
//
//   xs[t][c] = SiLU(sum_{j<W} conv[c][j] * x_{t-W+1+j}[c])
//
// (taps conv of type wt: f32, f16 or bf16) where x before row 0 is the
// layer state's window (state[r*C + c], r < W-1, oldest first; zero when
// the step starts at position 0), then the q
// and k heads (the first 2K heads of D channels) divided by max(|head|,
// eps). Afterwards the window holds the last W-1 rows of x. One workgroup
// per head of D channels (dispatch (2K+V, 1, 1)), rows in order, each
// invocation owning channels lid, lid+64, ... of its head (D <= 256), so
// the window of a channel is read and written by one invocation only.
// delta_rule and delta_chunk (deltanet.wgsl) run the recurrence on xs.
// An unbatched step runs its step[STEP_ROWS] rows from position
// step[STEP_POS] on; a batched step (pos_at != 0) dispatches once per row,
// row0 binding that row's sequence's state (row t0 of qkv into row t0 of
// xs), and an unused row (position 0xffffffff) does nothing (step_span).

struct DeltaParams {
    key_heads: u32,
    value_heads: u32,
    head_dim: u32,
    width: u32,   // convolution taps W
    nrows: u32,   // rows of the buffers (Tokens)
    eps: f32,     // the L2 norms' floor
    qkv_f16: u32, // 1: qkv is an f16 activation (packed halves)
    beta_f16: u32,
    alpha_f16: u32,
    out_f16: u32,
    row0: u32,    // a batched step's row of this dispatch (0 unbatched)
    pos_at: u32,  // row_pos: 0 unbatched, else the word of row 0's position
    wt: u32,      // a WeightType (f32, f16, bf16) of the taps conv
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: DeltaParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv_w: array<u32>;
@group(0) @binding(3) var<storage, read> conv: array<u32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> xs: array<f32>;

// activations: qkv
// include: row_pos
// include: step_span

const WG: u32 = 64u;
const COLS: u32 = 4u; // channels per invocation: head dims up to 256
var<workgroup> red: array<f32, 64>;

// head_sum sums v over the workgroup; every invocation adds the 64
// partial sums in the same order, so all get the same total.
fn head_sum(v: f32, i: u32) -> f32 {
    red[i] = v;
    workgroupBarrier();
    var total = 0.0;
    for (var k = 0u; k < WG; k++) {
        total += red[k];
    }
    workgroupBarrier();
    return total;
}

// window_at is x of virtual row r (r < W-1: the state's window, else row
// t0+r-(W-1) of qkv) for channel c.
fn window_at(r: u32, c: u32, ch: u32, t0: u32, fresh: bool) -> f32 {
    let k1 = p.width - 1u;
    if r < k1 {
        return select(state[r * ch + c], 0.0, fresh);
    }
    return qkv_at((t0 + r - k1) * ch + c);
}

@compute @workgroup_size(64)
fn delta_conv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let d = p.head_dim;
    let ch = (2u * p.key_heads + p.value_heads) * d;
    let head = wid.x;
    let span = step_span();
    let t0 = span.x;
    let rows = span.y;
    if rows == 0u {
        return;
    }
    let fresh = row_pos(t0) == 0u;
    let i = lid.x;
    let normed = head < 2u * p.key_heads;
    for (var t = 0u; t < rows; t++) {
        var vals: array<f32, 4>;
        var sq = 0.0;
        for (var m = 0u; m < COLS; m++) {
            let col = i + m * WG;
            if col < d {
                let c = head * d + col;
                var sum = 0.0;
                for (var j = 0u; j < p.width; j++) {
                    let e = c * p.width + j;
                    sum += decode(conv[word_of(e, p.wt)], e, p.wt) * window_at(t + j, c, ch, t0, fresh);
                }
                let v = sum / (1.0 + exp(-sum));
                vals[m] = v;
                sq += v * v;
            }
        }
        var scale = 1.0;
        if normed {
            scale = 1.0 / max(sqrt(head_sum(sq, i)), p.eps);
        }
        for (var m = 0u; m < COLS; m++) {
            let col = i + m * WG;
            if col < d {
                xs[(t0 + t) * ch + head * d + col] = vals[m] * scale;
            }
        }
    }
    // The new window: virtual rows rows .. rows+W-2, in ascending order
    // (row rows+r is read before row r+1's old value is overwritten).
    for (var m = 0u; m < COLS; m++) {
        let col = i + m * WG;
        if col < d {
            let c = head * d + col;
            for (var r = 0u; r + 1u < p.width; r++) {
                state[r * ch + c] = window_at(rows + r, c, ch, t0, fresh);
            }
        }
    }
}
