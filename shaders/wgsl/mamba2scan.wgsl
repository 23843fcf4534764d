// Mamba-2's selective scan with its state (fusion.Mamba2Op, Granite 4.0
// H; after mamba2conv.wgsl, before the norm kernel), on mamba2_conv's
// f32 rows xbc = silu(conv([x | B | C])) and the zx rows [z | x | B | C |
// dt]. The state's matrices follow the convolution's window: a [head dim
// P][dstate] matrix per head (the CPU reference's layout).
//
// One invocation per state row (head h, row i of its head dim P =
// inner/heads) runs the step's rows in order, with g = h / (heads /
// groups), d = softplus(dt[t][h] + dt_bias[h]) (dt past 20 as is) and x =
// xbc[t][h*P + i]:
//
//     S[h][i][n] = exp(d * a[h]) * S[h][i][n] + d * x * B_g[n]
//     out[t][h*P + i] = (sum_n S[h][i][n] * C_g[n] + dd[h] * x) * silu(z[t][h*P + i])
//
// summed in n order as the CPU does, the matrix zero before position 0
// (a fresh sequence reads no state). out is the planner's f32 scratch
// (out_f16 0), which the norm kernel then norms into the op's output.
//
// An unbatched step runs its step[STEP_ROWS] rows from position
// step[STEP_POS] on; a batched step (pos_at != 0) dispatches once per row,
// row0 binding that row's sequence's state, and an unused row (position
// 0xffffffff) does nothing. Dispatch: (ceil(inner/64), 1, 1).

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
@group(0) @binding(3) var<storage, read> xbc: array<f32>;
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read> a: array<f32>;
@group(0) @binding(6) var<storage, read> dd: array<f32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: zx, out
// include: row_pos
// include: mamba2

// softplus is ln(1 + e^v), v itself past 20 (as ggml's ssm_scan).
fn softplus(v: f32) -> f32 {
    if v > 20.0 {
        return v;
    }
    return log(1.0 + exp(v));
}

@compute @workgroup_size(64)
fn mamba2_scan(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.x; // h*P + i
    if row >= p.inner {
        return;
    }
    let r = rows();
    let t0 = r.x;
    let n = r.y;
    if n == 0u {
        return;
    }
    let fresh = row_pos(t0) == 0u;
    let channels = cc();
    let hp = p.inner / p.heads;
    let h = row / hp;
    let g = h / (p.heads / p.groups);
    let gn = p.groups * p.dstate;
    let sbase = (p.width - 1u) * channels + row * p.dstate;
    for (var t = 0u; t < n; t++) {
        let tr = t0 + t;
        let d = softplus(zx_at(tr * zx_cols() + p.inner + channels + h) + dt_bias[h]);
        let decay = exp(d * a[h]);
        let xb = tr * channels;
        let x = xbc[xb + row];
        let dx = d * x;
        let bb = xb + p.inner + g * p.dstate;
        let cb = xb + p.inner + gn + g * p.dstate;
        var y = 0.0;
        for (var k = 0u; k < p.dstate; k++) {
            var s = 0.0;
            if !(fresh && t == 0u) {
                s = state[sbase + k];
            }
            s = decay * s + dx * xbc[bb + k];
            state[sbase + k] = s;
            y += s * xbc[cb + k];
        }
        y += dd[h] * x;
        out_set(tr * p.inner + row, y * apply_act(ACT_SILU, zx_at(tr * zx_cols() + row)));
    }
}
