// MatMul: out[t][row_base + r] = sum_c W[r][c] x[t][c] (+ bias), for the row
// block [row_base, row_base+rows) of W bound here (weights over the binding
// limit are split by rows, one dispatch per block), rows t < min(T, nrows).
// With accum set the result is added to out (MatMul's Accumulate: the
// residual add fused into the projection). GLU variants compute
// act(W·x + bias) * (W2·x + bias2) (MatMulGLU: gate W, up W2 with the same
// type, scales and row blocks); the bias belongs to the gate when has_bias
// is set, to the up projection when has_bias2 is set (never both).
//
// This family is specialized (shaders.MatMulVariant): every module starts
// with constants WT (weight type), ST (scale type), EPW (elements per u32
// word), QUANT (scales bound) and GLU, and the shape constants below, so
// each module holds one decoding path that the compilers fold; nothing
// switches on the type per element.
//
// Weights are read a chunk at a time: one vec4<u32> (16 bytes, CW = 4*EPW
// elements), dequantized in registers by dq (vec4 q of a chunk is elements
// 4q..4q+3) and dotted with the EPW vec4 of activations it pairs with.
// Chunks need rows and scale blocks that hold whole chunks (fast());
// matvec_lanes also has an element-wise path for other shapes (tiny
// models' odd widths), which the host then picks for any number of rows.
//
// Kernels (dispatch sizes: shaders.MatMulShape). Every device runs the
// same kernels; the host picks by shape and by what the device offers:
//   matvec_lanes   decode, batched decode (and steps whose shape is not
//                  of whole chunks): p.lanes invocations per group of
//                  LV_ROWS rows read consecutive chunks (coalesced 16-byte
//                  loads), each activation chunk feeds LV_ROWS rows, then
//                  a workgroup-memory tree reduction; one row of the
//                  step per workgroup, the step's rows side by side.
//   matvec_sg      (Vulkan only, devices with subgroup operations,
//                  wgsl/ext/subgroups.wgsl) matvec_lanes reducing through
//                  subgroup shuffles instead of workgroup memory.
//   matvec_sg_h    (Vulkan only, devices with shaderFloat16,
//                  wgsl/ext/f16.wgsl) matvec_sg in f16 arithmetic, for f16
//                  activations.
//   matvec_lanes_norm
//                  matvec_lanes with an RMS-norm prologue (fusion's
//                  Prologue): the products read x[t][c] * r * g[c], the
//                  Norm op's output, r = 1/sqrt(mean(x[t]^2) + norm_eps),
//                  the scale g bound at the bias slot (the op has no bias).
//                  The sums take x * g, the sum of squares comes from the
//                  same loads (reduced with the sums) and r scales the
//                  sums at the end: no norm dispatch and no round trip of
//                  the normed rows through memory. Only for rows and blocks
//                  of whole chunks. A separate entry point, so matvec_lanes
//                  carries no second reduction.
//   matmul         prefill (4+ tokens): a 32-token x
//                  64-weight-row tile per workgroup, weights dequantized
//                  once per tile into workgroup memory (rows padded by one
//                  vec4 against bank conflicts), 4 tokens x 8 weight rows
//                  per invocation. Needs fast().
// A "weight row" is a row of W, or in GLU variants a row of W (slots 0-3)
// or of W2 (slots 4-7): GLU tiles cover half as many output rows.

// include: matvec

@group(0) @binding(0) var<uniform> p: MatParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x_w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> s: array<u32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out_w: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read> w2: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read> s2: array<u32>;
// x is an f16 activation (packed halves) when p.x_f16 is set: vec4 i
// (elements 4i..4i+3) is then half of vec4 word i/2. bias holds the norm
// scale g in the *_norm kernels (their ops have no bias).

// activations: out

// fast reports whether rows and scale blocks hold whole chunks.
fn fast() -> bool {
    return p.in_cols % CW == 0u && p.block % CW == 0u;
}

fn scale1(i: u32) -> f32 {
    if ST == ST_F16 {
        let h = unpack2x16float(s[i >> 1u]);
        return select(h.x, h.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(s[i]);
}

fn scale2(i: u32) -> f32 {
    if ST == ST_F16 {
        let h = unpack2x16float(s2[i >> 1u]);
        return select(h.x, h.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(s2[i]);
}

// scales is the (W, W2) scale pair of scale index i: (1, 1) unquantized.
fn scales(i: u32) -> vec2<f32> {
    if !QUANT {
        return vec2<f32>(1.0);
    }
    if GLU {
        return vec2<f32>(scale1(i), scale2(i));
    }
    return vec2<f32>(scale1(i), 1.0);
}

// Element-wise access for the slow path.
fn xat(i: u32) -> f32 {
    let h = p.x_f16 != 0u;
    let j = select(i, i >> 1u, h); // the word holding element i
    return act_value(x_w[j >> 2u][j & 3u], i, h);
}

fn wword(i: u32) -> u32 {
    return w[i >> 2u][i & 3u];
}

fn wword2(i: u32) -> u32 {
    return w2[i >> 2u][i & 3u];
}

// finish adds the bias (or applies the GLU) and stores one output.
fn finish(t: u32, r: u32, acc: vec2<f32>) {
    let o = p.row_base + r;
    var v = acc.x;
    if GLU {
        var g = acc.x;
        var u = acc.y;
        if p.has_bias != 0u {
            g += bias[o];
        }
        if p.has_bias2 != 0u {
            u += bias[o];
        }
        v = apply_act(p.act, g) * u;
    } else if p.has_bias != 0u {
        v += bias[o];
    }
    let i = t * p.out_cols + o;
    if p.accum != 0u {
        out_set(i, out_at(i) + v);
    } else {
        out_set(i, v);
    }
}

// matvec_lanes: workgroups of LV_WG (32) invocations in groups of p.lanes, each
// group LV_ROWS (4) rows of token t; lane l of a group reads chunks l,
// l + lanes, ... of each row (lane l takes elements l, l + lanes, ...
// where the shape is not of whole chunks), so each activation load feeds
// four rows (eight weight rows in GLU variants: W's and W2's). A group's
// partial sums are a vec4 of its rows' W sums, and in GLU variants a
// second of their W2 sums (hi; red_hi in workgroup memory). (The subgroup
// variant, wgsl/ext/subgroups.wgsl, shares lanes_part and lanes_finish.)

// red_hi: the lane groups' W2 sums (GLU variants).
var<workgroup> red_hi: array<vec4<f32>, LV_WG>;

// lanes_part is lane's share of the LV_ROWS rows from r0 of token t:
// their W sums, their W2 sums in hi (GLU). With the norm prologue, when nm
// (a constant in each caller), the sums take x * g and the lane's sum of
// squares of x goes to ss (lanes_mv and sg_finish reduce both and scale by
// r). Shapes that
// are not of whole chunks take lanes_slow (never with the prologue). Rows
// past the last repeat it (lanes_finish drops them).
fn lanes_part(t: u32, r0: u32, lane: u32, lanes: u32, nm: bool, ss: ptr<function, vec4<f32>>, hi: ptr<function, vec4<f32>>) -> vec4<f32> {
    if r0 < p.rows && !nm && !fast() {
        return lanes_slow(t, r0, lane, lanes, hi);
    }
    var acc = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    if r0 < p.rows {
        let last = p.rows - 1u;
        let r1 = min(r0 + 1u, last);
        let r2 = min(r0 + 2u, last);
        let r3 = min(r0 + 3u, last);
        let cpr = p.in_cols / CW;
        let xb = t * (p.in_cols / 4u);
        for (var j = lane; j < cpr; j += lanes) {
            let xi = xb + j * EPW;
            let b = (j * CW) / p.block;
            let v0 = w[r0 * cpr + j];
            let v1 = w[r1 * cpr + j];
            let v2 = w[r2 * cpr + j];
            let v3 = w[r3 * cpr + j];
            var u0 = v0;
            var u1 = v1;
            var u2 = v2;
            var u3 = v3;
            if GLU {
                u0 = w2[r0 * cpr + j];
                u1 = w2[r1 * cpr + j];
                u2 = w2[r2 * cpr + j];
                u3 = w2[r3 * cpr + j];
            }
            let m = mvq_chunk(v0, v1, v2, v3, u0, u1, u2, u3, xi, xb, nm, ss);
            let s0 = scales(r0 * p.nblocks + b);
            let s1 = scales(r1 * p.nblocks + b);
            let s2 = scales(r2 * p.nblocks + b);
            let s3 = scales(r3 * p.nblocks + b);
            acc += vec4<f32>(m[0].x * s0.x, m[1].x * s1.x, m[2].x * s2.x, m[3].x * s3.x);
            if GLU {
                acc2 += vec4<f32>(m[0].y * s0.y, m[1].y * s1.y, m[2].y * s2.y, m[3].y * s3.y);
            }
        }
    }
    *hi = acc2;
    return acc;
}

// lanes_slow is lanes_part (without the prologue) element by element, for rows or scale
// blocks that do not hold whole chunks (any row length and block size;
// weights packed without row padding, as the host uploads them).
fn lanes_slow(t: u32, r0: u32, lane: u32, lanes: u32, hi: ptr<function, vec4<f32>>) -> vec4<f32> {
    let last = p.rows - 1u;
    let r = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last));
    var acc = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    for (var c = lane; c < p.in_cols; c += lanes) {
        let xv = xat(t * p.in_cols + c);
        let b = c / p.block;
        let e = r * p.in_cols + vec4<u32>(c);
        let s0 = scales(r.x * p.nblocks + b);
        let s1 = scales(r.y * p.nblocks + b);
        let s2 = scales(r.z * p.nblocks + b);
        let s3 = scales(r.w * p.nblocks + b);
        acc += vec4<f32>(decode(wword(e.x / EPW), e.x, WT) * xv * s0.x, decode(wword(e.y / EPW), e.y, WT) * xv * s1.x,
                         decode(wword(e.z / EPW), e.z, WT) * xv * s2.x, decode(wword(e.w / EPW), e.w, WT) * xv * s3.x);
        if GLU {
            acc2 += vec4<f32>(decode(wword2(e.x / EPW), e.x, WT) * xv * s0.y, decode(wword2(e.y / EPW), e.y, WT) * xv * s1.y,
                              decode(wword2(e.z / EPW), e.z, WT) * xv * s2.y, decode(wword2(e.w / EPW), e.w, WT) * xv * s3.y);
        }
    }
    *hi = acc2;
    return acc;
}

// lanes_finish writes the reduced sums of the rows from r0 of token t: v
// their W sums, hi their W2 sums (GLU).
fn lanes_finish(t: u32, r0: u32, v: vec4<f32>, hi: vec4<f32>) {
    for (var k = 0u; k < 4u; k++) {
        if r0 + k < p.rows {
            finish(t, r0 + k, vec2<f32>(v[k], hi[k]));
        }
    }
}

@compute @workgroup_size(LV_WG)
fn matvec_lanes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    lanes_mv(wid, li, false);
}

@compute @workgroup_size(LV_WG)
fn matvec_lanes_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    lanes_mv(wid, li, true);
}

// lanes_mv computes row t = wid.x of the step for the weight rows of
// workgroup row wid.y (dispatch: step rows x row groups). The step rows
// are the fastest-varying dimension, so the workgroups that read the same
// weight rows for the R rows of a batched step run side by side and all
// but the first find those weights in cache: a batched step of a few
// sequences reads each weight from memory about once. Every row is
// computed by the same code in the same order as a one-row step, so a
// sequence gets the same results batched or alone. (One row per workgroup
// and no loop around the barriers: a loop over several rows per workgroup
// made lavapipe's one-row decode matvecs 1.6-2.5x slower, since it runs
// uniform control flow under an execution mask.)
fn lanes_mv(wid: vec3<u32>, li: u32, nm: bool) {
    let t = wid.x;
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    if p.row_set_at != 0u && step[p.row_set_at + t] != p.row_set {
        return; // uniform too: a row of another adapter set
    }
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let r0 = (wid.y * (LV_WG / lanes) + li / lanes) * LV_ROWS;
    var ss = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    red[li] = lanes_part(t, r0, lane, lanes, nm, &ss, &hi);
    if GLU {
        red_hi[li] = hi;
    }
    if nm {
        red_ss[li] = (ss.x + ss.y) + (ss.z + ss.w);
    }
    workgroupBarrier();
    for (var h = lanes / 2u; h > 0u; h = h / 2u) {
        if lane < h {
            red[li] += red[li + h];
            if GLU {
                red_hi[li] += red_hi[li + h];
            }
            if nm {
                red_ss[li] += red_ss[li + h];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u {
        var v = red[li];
        var vh = vec4<f32>(0.0);
        if GLU {
            vh = red_hi[li];
        }
        if nm {
            let r = 1.0 / sqrt(red_ss[li] / f32(p.in_cols) + p.norm_eps);
            v *= r;
            vh *= r;
        }
        lanes_finish(t, r0, v, vh);
    }
}

// finish_tile stores the outputs of one token: acc holds slots 0-3 in lo
// and 4-7 in hi.
fn finish_tile(t: u32, n: u32, rbase: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if t >= n {
        return;
    }
    for (var k = 0u; k < 4u; k++) {
        let r = rbase + 8u * k;
        if GLU {
            if r < p.rows {
                finish(t, r, vec2<f32>(lo[k], hi[k]));
            }
        } else {
            if r < p.rows {
                finish(t, r, vec2<f32>(lo[k], 0.0));
            }
            if r + 32u < p.rows {
                finish(t, r + 32u, vec2<f32>(hi[k], 0.0));
            }
        }
    }
}

// matmul (tiled): per step of MM_K (32) columns the workgroup stages the
// 32 tokens' activations and its 64 weight rows, dequantized and scaled,
// in workgroup memory (row stride 9 vec4: one vec4 of padding), then each
// invocation multiplies its 4 tokens x 8 slots from there. Needs fast().
//
// No kernel of this family reads a workgroup word it has not written (the
// tiles' padding vec4 is never read; the reductions write red, red_ss and
// the subgroup sums before the barrier ahead of their reads), so the
// Vulkan modules go without naga's zero-initialization of workgroup
// memory, which lavapipe unrolls into a store per element of the 9 KiB
// tiles (0.5-1 s per pipeline); the marker line tells
// shaders/internal/spirvgen:
// spirvgen: no-workgroup-zero-init
var<workgroup> xtile: array<array<vec4<f32>, 9>, 32>; // [token][k/4]
var<workgroup> wtile: array<array<vec4<f32>, 9>, 64>; // [weight row][k/4]

@compute @workgroup_size(8, 8)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let n = min(step[STEP_ROWS], p.nrows);
    let tt = wid.y * MM_TOKENS;
    if tt >= n {
        return;
    }
    let rt = wid.x * MM_ROWS;
    let xs = p.in_cols / 4u;
    var acc: array<vec4<f32>, 8>; // [token i][lo/hi]: 2i lo, 2i+1 hi
    for (var k0 = 0u; k0 < p.in_cols; k0 += MM_K) {
        // Activations: 32 tokens x 8 vec4, 4 per invocation.
        for (var m = li; m < 256u; m += 64u) {
            let tok = m / 8u;
            let kq = m % 8u;
            var v = vec4<f32>(0.0);
            if tt + tok < n && k0 + 4u * kq < p.in_cols {
                v = xv4((tt + tok) * xs + k0 / 4u + kq);
            }
            xtile[tok][kq] = v;
        }
        // Weights: 64 weight rows x (MM_K / CW) chunks.
        for (var m = li; m < 64u * (MM_K / CW); m += 64u) {
            let wr = m / (MM_K / CW);
            let cq = m % (MM_K / CW);
            let k = k0 + cq * CW;
            var src = 0u; // 0: W, 1: W2
            var row = rt + wr;
            if GLU {
                row = rt + (wr & 31u);
                src = wr >> 5u;
            }
            var v = vec4<u32>(0u);
            var sc = 0.0;
            if row < p.rows && k < p.in_cols {
                let i = row * (p.in_cols / CW) + k / CW;
                let b = k / p.block;
                if src == 1u {
                    v = w2[i];
                    sc = scales(row * p.nblocks + b).y;
                } else {
                    v = w[i];
                    sc = scales(row * p.nblocks + b).x;
                }
            }
            for (var q = 0u; q < EPW; q++) {
                wtile[wr][cq * EPW + q] = dq(v, q) * sc;
            }
        }
        workgroupBarrier();
        for (var kq = 0u; kq < MM_K / 4u; kq++) {
            var wv: array<vec4<f32>, 8>;
            for (var k = 0u; k < 8u; k++) {
                wv[k] = wtile[lid.x + 8u * k][kq];
            }
            for (var i = 0u; i < 4u; i++) {
                let xv = xtile[lid.y + 8u * i][kq];
                acc[2u * i] += vec4<f32>(dot(wv[0], xv), dot(wv[1], xv), dot(wv[2], xv), dot(wv[3], xv));
                acc[2u * i + 1u] += vec4<f32>(dot(wv[4], xv), dot(wv[5], xv), dot(wv[6], xv), dot(wv[7], xv));
            }
        }
        workgroupBarrier();
    }
    let rbase = rt + lid.x;
    for (var i = 0u; i < 4u; i++) {
        finish_tile(tt + lid.y + 8u * i, n, rbase, acc[2u * i], acc[2u * i + 1u]);
    }
}
