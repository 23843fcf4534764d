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
// Chunks need rows and scale blocks that hold whole chunks (fast()); other
// shapes take an element-wise path that only the CPU-class kernels have
// (the host picks those for such shapes).
//
// Kernels (dispatch sizes: shaders.MatMulShape):
//   matvec         decode, CPU class: MV_ROWS (8) rows per invocation, no
//                  barriers; each activation load feeds MV_ROWS rows.
//                  matvec_u: the same, activations from a uniform binding.
//   matvec_lanes   decode, GPU class: p.lanes invocations per group of
//                  LV_ROWS rows read consecutive chunks (coalesced 16-byte
//                  loads), each activation chunk feeds LV_ROWS rows, then a
//                  workgroup-memory tree reduction.
//   matvec_sg      (Vulkan only, wgsl/ext/subgroups.wgsl) matvec_lanes
//                  reducing through subgroup shuffles.
//   matvec_sg_h    (Vulkan only, devices with f16, wgsl/ext/f16.wgsl)
//                  matvec_sg in f16 arithmetic, for f16 activations.
//   matvec_norm, matvec_u_norm, matvec_lanes_norm
//                  the same with an RMS-norm prologue (fusion's Prologue):
//                  the products read x[t][c] * r * g[c], the Norm op's
//                  output, r = 1/sqrt(mean(x[t]^2) + norm_eps), the scale g
//                  read from the uniform binding gu (the op has no bias).
//                  The sums take x * g, the sum of squares comes from the
//                  same loads (matvec_lanes_norm: reduced with the sums)
//                  and r scales the sums at the end. Only for rows and
//                  blocks of whole chunks.
//                  Separate entry points, so that the kernels without it
//                  compile to exactly what they were.
//   matmul_direct  prefill, CPU class: 4 tokens x 8 weight rows per
//                  invocation straight from memory, no barriers.
//   matmul_few     batched decode steps (<= 4 tokens), CPU class:
//                  matmul_direct with all the tokens in every invocation.
//   matmul         prefill, GPU class: a 32-token x 64-weight-row tile per
//                  workgroup, weights dequantized once per tile into
//                  workgroup memory (rows padded by one vec4 against bank
//                  conflicts), 4 tokens x 8 weight rows per invocation.
// A "weight row" is a row of W, or in GLU variants a row of W (slots 0-3)
// or of W2 (slots 4-7): GLU tiles cover half as many output rows.

struct MatParams {
    in_cols: u32,
    out_cols: u32,
    row_base: u32,
    rows: u32,
    block: u32,   // elements per scale (in_cols when unquantized)
    nblocks: u32, // scales per row (1 when unquantized)
    has_bias: u32,
    nrows: u32,   // rows of x and out (Tokens, or 1 after LastRow)
    accum: u32,   // 1: out += result
    act: u32,     // GLU: an ACT_* code
    has_bias2: u32,
    lanes: u32,   // matvec_lanes: invocations per row group, a power of two <= 64
    x_t0: u32,    // matmul_few(_u): first token of the dispatch (xu holds tokens from it)
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    norm_eps: f32, // the *_norm kernels' RMS-norm epsilon
    x_f16: u32,    // 1: x (and xu) are f16 activations (packed halves)
    win_rows: u32, // matvec_w (matvecw.wgsl): rows per weight window
    pad0: u32,     // (the block is a multiple of 16 bytes)
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: MatParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x_w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> s: array<u32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out_w: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read> w2: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read> s2: array<u32>;
// The activations again, as a uniform buffer (64 KiB bound from x's buffer
// where a decode step's rows fit, else any 64 KiB buffer): matvec_u reads
// them here. On CPU-class devices (lavapipe) a storage load is a loop over
// the SIMD lanes, while a uniform load at an address every lane shares is
// one load: matvec's activation loads cost as much as its weight loads.
@group(0) @binding(9) var<uniform> xu_w: array<vec4<u32>, 4096>;
// The RMS-norm prologue's scale g (the *_norm kernels), as a uniform
// buffer for the same reason (a vector padded to 64 KiB on upload; any
// 64 KiB buffer where no kernel reads it): on lavapipe every invocation
// loading g from a storage buffer cost more than the norm dispatch saved.
@group(0) @binding(10) var<uniform> gu: array<vec4<f32>, 4096>;

// x and xu are f16 activations (packed halves) when p.x_f16 is set: vec4 i
// (elements 4i..4i+3) is then half of vec4 word i/2.

// activations: out

const CW: u32 = 4u * EPW; // elements per chunk

// fast reports whether rows and scale blocks hold whole chunks.
fn fast() -> bool {
    return p.in_cols % CW == 0u && p.block % CW == 0u;
}

// i8x4 is the four int8 elements of word v (element k in bits [8k, 8k+8)).
fn i8x4(v: u32) -> vec4<i32> {
    return (vec4<i32>(bitcast<i32>(v)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

// i4x4 is int4 elements 4q..4q+3 of chunk v: element k of a word is bits
// [4k, 4k+4); shifted to the top, an arithmetic shift sign-extends it.
fn i4x4(v: vec4<u32>, q: u32) -> vec4<i32> {
    let up = select(vec4<u32>(28u, 24u, 20u, 16u), vec4<u32>(12u, 8u, 4u, 0u), (q & 1u) == 1u);
    return (vec4<i32>(bitcast<i32>(v[q >> 1u])) << up) >> vec4<u32>(28u);
}

fn bf2(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u));
}

// dq dequantizes vec4 q (< EPW) of chunk v, before its scale.
fn dq(v: vec4<u32>, q: u32) -> vec4<f32> {
    if WT == WT_F16 {
        let h = select(v.xy, v.zw, q == 1u);
        return vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
    }
    if WT == WT_BF16 {
        let h = select(v.xy, v.zw, q == 1u);
        return vec4<f32>(bf2(h.x), bf2(h.y));
    }
    if WT == WT_I8 {
        return vec4<f32>(i8x4(v[q]));
    }
    if WT == WT_I4 {
        return vec4<f32>(i4x4(v, q));
    }
    return bitcast<vec4<f32>>(v);
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

// d2 is the dot products of vec4 q of chunks v (of W) and u (of W2, GLU
// only) with activations xv.
fn d2(v: vec4<u32>, u: vec4<u32>, q: u32, xv: vec4<f32>) -> vec2<f32> {
    if GLU {
        return vec2<f32>(dot(dq(v, q), xv), dot(dq(u, q), xv));
    }
    return vec2<f32>(dot(dq(v, q), xv), 0.0);
}

// mvq is d2 for four rows: column k is row k's (W, W2) dot products.
fn mvq(v0: vec4<u32>, v1: vec4<u32>, v2: vec4<u32>, v3: vec4<u32>, u0: vec4<u32>, u1: vec4<u32>, u2: vec4<u32>, u3: vec4<u32>,
       q: u32, xv: vec4<f32>) -> mat4x2<f32> {
    return mat4x2<f32>(d2(v0, u0, q, xv), d2(v1, u1, q, xv), d2(v2, u2, q, xv), d2(v3, u3, q, xv));
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

// xs is activation vec4 i (token t's vec4s start at xb) times the norm
// scale when nm (a constant in each caller), adding its squares to ss.
fn xs(i: u32, xb: u32, ux: bool, nm: bool, ss: ptr<function, vec4<f32>>) -> vec4<f32> {
    let v = xv4(i, ux);
    if !nm {
        return v;
    }
    *ss += v * v;
    return v * gu[i - xb];
}

// slow_row is the (W, W2) dot products of row r with token t, element by
// element: any row length and block size.
fn slow_row(r: u32, t: u32) -> vec2<f32> {
    var acc = vec2<f32>(0.0);
    for (var b = 0u; b < p.nblocks; b++) {
        var part = vec2<f32>(0.0);
        for (var c = b * p.block; c < (b + 1u) * p.block; c++) {
            let e = r * p.in_cols + c;
            let xv = xat(t * p.in_cols + c);
            part.x += decode(wword(e / EPW), e, WT) * xv;
            if GLU {
                part.y += decode(wword2(e / EPW), e, WT) * xv;
            }
        }
        acc += part * scales(r * p.nblocks + b);
    }
    return acc;
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

// matvec: rows r0..r0+7 of token t per invocation. Rows past the end
// repeat the last row; their results are dropped. matvec_u is matvec with
// the activations read from xu (its x buffer holds at most 4096 vec4s).
@compute @workgroup_size(16)
fn matvec(@builtin(global_invocation_id) gid: vec3<u32>) {
    mv(gid, false, false);
}

@compute @workgroup_size(16)
fn matvec_u(@builtin(global_invocation_id) gid: vec3<u32>) {
    mv(gid, true, false);
}

@compute @workgroup_size(16)
fn matvec_norm(@builtin(global_invocation_id) gid: vec3<u32>) {
    mv(gid, false, true);
}

@compute @workgroup_size(16)
fn matvec_u_norm(@builtin(global_invocation_id) gid: vec3<u32>) {
    mv(gid, true, true);
}

// xv is activation vec4 i, from xu when ux (a constant in each caller, so
// the compilers drop the other branch).
fn xv4(i: u32, ux: bool) -> vec4<f32> {
    // One load either way (lavapipe would run both sides of a branch).
    // XH (a module constant) fixes the form in matvecw.wgsl's modules.
    let h = select(XH == 1u, p.x_f16 != 0u, XH == 2u);
    let j = select(i, i >> 1u, h);
    var w: vec4<u32>;
    if ux {
        w = xu_w[j];
    } else {
        w = x_w[j];
    }
    let hw = select(w.xy, w.zw, (i & 1u) == 1u);
    return select(bitcast<vec4<f32>>(w), vec4<f32>(unpack2x16float(hw.x), unpack2x16float(hw.y)), h);
}

// mv8 adds the products of one chunk of eight rows (v0..v7, and u0..u7
// of W2 with GLU) with the EPW activation vec4s from vec4 xi (token's
// vec4s start at xb) to q0 (rows 0-3) and q1 (rows 4-7). The vec4s of the
// chunk are unrolled with constant indices so each dq folds to its one
// decoding; each activation vec4 is loaded once for the eight rows. Shared
// by mv and qkv.wgsl's matvec_rope_kv (which passes v as u).
fn mv8(v0: vec4<u32>, v1: vec4<u32>, v2: vec4<u32>, v3: vec4<u32>, v4: vec4<u32>, v5: vec4<u32>, v6: vec4<u32>, v7: vec4<u32>,
       u0: vec4<u32>, u1: vec4<u32>, u2: vec4<u32>, u3: vec4<u32>, u4: vec4<u32>, u5: vec4<u32>, u6: vec4<u32>, u7: vec4<u32>,
       xi: u32, xb: u32, ux: bool, nm: bool, ss: ptr<function, vec4<f32>>,
       q0: ptr<function, mat4x2<f32>>, q1: ptr<function, mat4x2<f32>>) {
    let x0 = xs(xi, xb, ux, nm, ss);
    *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 0u, x0);
    *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 0u, x0);
    if EPW > 1u {
        let x1 = xs(xi + 1u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 1u, x1);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 1u, x1);
    }
    if EPW > 2u {
        let x2 = xs(xi + 2u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 2u, x2);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 2u, x2);
        let x3 = xs(xi + 3u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 3u, x3);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 3u, x3);
    }
    if EPW > 4u {
        let x4 = xs(xi + 4u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 4u, x4);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 4u, x4);
        let x5 = xs(xi + 5u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 5u, x5);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 5u, x5);
        let x6 = xs(xi + 6u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 6u, x6);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 6u, x6);
        let x7 = xs(xi + 7u, xb, ux, nm, ss);
        *q0 += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 7u, x7);
        *q1 += mvq(v4, v5, v6, v7, u4, u5, u6, u7, 7u, x7);
    }
}

fn mv(gid: vec3<u32>, ux: bool, nm: bool) {
    let t = gid.y;
    let r0 = gid.x * MV_ROWS;
    if r0 >= p.rows || t >= min(step[1], p.nrows) {
        return;
    }
    // The norm prologue (nm): the fast path's products take x * g and
    // gather the sum of squares of x from the same loads (ss), and r scales
    // the sums at the end; a separate norm loop before them cost lavapipe more
    // than the products (qkv.wgsl's kernel on stories260K: 7 ms against
    // 0.4 ms per dispatch).
    var ss = vec4<f32>(0.0);
    let last = p.rows - 1u;
    var rr = array<u32, 8>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last),
                           min(r0 + 4u, last), min(r0 + 5u, last), min(r0 + 6u, last), min(r0 + 7u, last));
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    var a2 = vec2<f32>(0.0);
    var a3 = vec2<f32>(0.0);
    var a4 = vec2<f32>(0.0);
    var a5 = vec2<f32>(0.0);
    var a6 = vec2<f32>(0.0);
    var a7 = vec2<f32>(0.0);
    // The norm kernels run only on shapes of whole chunks (the host plans a
    // norm dispatch for others): without the element-wise path, which
    // lavapipe executes masked even where no lane takes it, at a cost
    // that grew past the products' with the prologue in it.
    if nm || fast() {
        let cpr = p.in_cols / CW; // chunks per row
        let cpb = p.block / CW;   // chunks per scale block
        let xb = t * (p.in_cols / 4u);
        let ra = rr[0] * cpr;
        let rb = rr[1] * cpr;
        let rc = rr[2] * cpr;
        let rd = rr[3] * cpr;
        let re = rr[4] * cpr;
        let rf = rr[5] * cpr;
        let rg = rr[6] * cpr;
        let rh = rr[7] * cpr;
        for (var b = 0u; b < p.nblocks; b++) {
            var q0 = mat4x2<f32>();
            var q1 = mat4x2<f32>();
            for (var j = b * cpb; j < (b + 1u) * cpb; j++) {
                let v0 = w[ra + j];
                let v1 = w[rb + j];
                let v2 = w[rc + j];
                let v3 = w[rd + j];
                let v4 = w[re + j];
                let v5 = w[rf + j];
                let v6 = w[rg + j];
                let v7 = w[rh + j];
                var u0 = v0;
                var u1 = v1;
                var u2 = v2;
                var u3 = v3;
                var u4 = v4;
                var u5 = v5;
                var u6 = v6;
                var u7 = v7;
                if GLU {
                    u0 = w2[ra + j];
                    u1 = w2[rb + j];
                    u2 = w2[rc + j];
                    u3 = w2[rd + j];
                    u4 = w2[re + j];
                    u5 = w2[rf + j];
                    u6 = w2[rg + j];
                    u7 = w2[rh + j];
                }
                mv8(v0, v1, v2, v3, v4, v5, v6, v7, u0, u1, u2, u3, u4, u5, u6, u7, xb + j * EPW, xb, ux, nm, &ss, &q0, &q1);
            }
            a0 += q0[0] * scales(rr[0] * p.nblocks + b);
            a1 += q0[1] * scales(rr[1] * p.nblocks + b);
            a2 += q0[2] * scales(rr[2] * p.nblocks + b);
            a3 += q0[3] * scales(rr[3] * p.nblocks + b);
            a4 += q1[0] * scales(rr[4] * p.nblocks + b);
            a5 += q1[1] * scales(rr[5] * p.nblocks + b);
            a6 += q1[2] * scales(rr[6] * p.nblocks + b);
            a7 += q1[3] * scales(rr[7] * p.nblocks + b);
        }
        if nm {
            let r = 1.0 / sqrt(((ss.x + ss.y) + (ss.z + ss.w)) / f32(p.in_cols) + p.norm_eps);
            a0 *= r;
            a1 *= r;
            a2 *= r;
            a3 *= r;
            a4 *= r;
            a5 *= r;
            a6 *= r;
            a7 *= r;
        }
    } else {
        a0 = slow_row(rr[0], t);
        a1 = slow_row(rr[1], t);
        a2 = slow_row(rr[2], t);
        a3 = slow_row(rr[3], t);
        a4 = slow_row(rr[4], t);
        a5 = slow_row(rr[5], t);
        a6 = slow_row(rr[6], t);
        a7 = slow_row(rr[7], t);
    }
    var acc = array<vec2<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    for (var k = 0u; k < 8u; k++) {
        if r0 + k <= last {
            finish(t, r0 + k, acc[k]);
        }
    }
}

// matvec_lanes: workgroups of 64 invocations in groups of p.lanes, each
// group LV_ROWS (2) rows of token t; lane l of a group reads chunks l,
// l + lanes, ... of both rows. Needs fast(). (The subgroup variant,
// wgsl/ext/subgroups.wgsl, shares lanes_partial and lanes_finish.)
var<workgroup> red: array<vec4<f32>, 64>;
// red_ss: the lane groups' sums of squares (the norm prologue's kernels).
var<workgroup> red_ss: array<f32, 64>;

// lanes_partial is lane's share of rows r0 and r0+1 (xy, zw) of token t.
fn lanes_partial(t: u32, r0: u32, lane: u32, lanes: u32) -> vec4<f32> {
    var ss = vec4<f32>(0.0);
    return lanes_part(t, r0, lane, lanes, false, &ss);
}

// lanes_part is lanes_partial, with the norm prologue when nm (a constant
// in each caller): the sums then take x * g and the lane's sum of squares
// of x goes to ss (lanes_mv reduces both and scales by r), as mv does; a
// separate norm loop first cost lavapipe ~30 ms per stories260K GLU dispatch.
fn lanes_part(t: u32, r0: u32, lane: u32, lanes: u32, nm: bool, ss: ptr<function, vec4<f32>>) -> vec4<f32> {
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    if r0 < p.rows {
        let r1 = min(r0 + 1u, p.rows - 1u);
        let cpr = p.in_cols / CW;
        let xb = t * (p.in_cols / 4u);
        for (var j = lane; j < cpr; j += lanes) {
            let v0 = w[r0 * cpr + j];
            let v1 = w[r1 * cpr + j];
            var u0 = v0;
            var u1 = v1;
            if GLU {
                u0 = w2[r0 * cpr + j];
                u1 = w2[r1 * cpr + j];
            }
            let xi = xb + j * EPW;
            var m = mvq(v0, v1, v0, v1, u0, u1, u0, u1, 0u, xs(xi, xb, false, nm, ss));
            if EPW > 1u {
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 1u, xs(xi + 1u, xb, false, nm, ss));
            }
            if EPW > 2u {
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 2u, xs(xi + 2u, xb, false, nm, ss));
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 3u, xs(xi + 3u, xb, false, nm, ss));
            }
            if EPW > 4u {
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 4u, xs(xi + 4u, xb, false, nm, ss));
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 5u, xs(xi + 5u, xb, false, nm, ss));
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 6u, xs(xi + 6u, xb, false, nm, ss));
                m += mvq(v0, v1, v0, v1, u0, u1, u0, u1, 7u, xs(xi + 7u, xb, false, nm, ss));
            }
            let b = (j * CW) / p.block;
            a0 += m[0] * scales(r0 * p.nblocks + b);
            a1 += m[1] * scales(r1 * p.nblocks + b);
        }
    }
    return vec4<f32>(a0, a1);
}

// lanes_finish writes the reduced sums v of rows r0 and r0+1 of token t.
fn lanes_finish(t: u32, r0: u32, v: vec4<f32>) {
    if r0 < p.rows {
        finish(t, r0, v.xy);
        if r0 + 1u < p.rows {
            finish(t, r0 + 1u, v.zw);
        }
    }
}

@compute @workgroup_size(64)
fn matvec_lanes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    lanes_mv(wid, li, false);
}

@compute @workgroup_size(64)
fn matvec_lanes_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    lanes_mv(wid, li, true);
}

fn lanes_mv(wid: vec3<u32>, li: u32, nm: bool) {
    let t = wid.y;
    if t >= min(step[1], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let r0 = (wid.x * (64u / lanes) + li / lanes) * LV_ROWS;
    if !nm {
        red[li] = lanes_partial(t, r0, lane, lanes);
        workgroupBarrier();
        for (var h = lanes / 2u; h > 0u; h = h / 2u) {
            if lane < h {
                red[li] += red[li + h];
            }
            workgroupBarrier();
        }
        if lane == 0u {
            lanes_finish(t, r0, red[li]);
        }
        return;
    }
    var ss = vec4<f32>(0.0);
    red[li] = lanes_part(t, r0, lane, lanes, true, &ss);
    red_ss[li] = (ss.x + ss.y) + (ss.z + ss.w);
    workgroupBarrier();
    for (var h = lanes / 2u; h > 0u; h = h / 2u) {
        if lane < h {
            red[li] += red[li + h];
            red_ss[li] += red_ss[li + h];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        lanes_finish(t, r0, red[li] * (1.0 / sqrt(red_ss[li] / f32(p.in_cols) + p.norm_eps)));
    }
}

// Weight-row slots of the prefill kernels: slot k (0-7) of invocation
// column lx reads output row rbase + 8k (rbase = tile row + lx), or in GLU
// variants row rbase + 8(k % 4) of W (k < 4) or of W2 (k >= 4).
fn slot_row(rbase: u32, k: u32) -> u32 {
    if GLU {
        return rbase + 8u * (k & 3u);
    }
    return rbase + 8u * k;
}

fn slot_chunk(k: u32, row: u32, j: u32) -> vec4<u32> {
    let i = row * (p.in_cols / CW) + j;
    if GLU && k >= 4u {
        return w2[i];
    }
    return w[i];
}

fn slot_scale(k: u32, row: u32, b: u32) -> f32 {
    if !QUANT {
        return 1.0;
    }
    if GLU && k >= 4u {
        return scale2(row * p.nblocks + b);
    }
    return scale1(row * p.nblocks + b);
}

fn slot_slow(k: u32, row: u32, t: u32) -> f32 {
    let d = slow_row(row, t);
    if GLU && k >= 4u {
        return d.y;
    }
    return d.x;
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

// Tile is the products of one vec4 of a chunk: column i of lo (hi) holds
// token i's dot products with slots 0-3 (4-7).
struct Tile {
    lo: mat4x4<f32>,
    hi: mat4x4<f32>,
}

fn add_tile(a: Tile, b: Tile) -> Tile {
    return Tile(a.lo + b.lo, a.hi + b.hi);
}

// gq multiplies vec4 q of the 8 slots' chunks v (scaled by sl, sh) with
// the activations at vec4 indices xi of the 4 tokens. Only the first m
// tokens' activations are loaded (the others' results are dropped): on a
// CPU-class device every load is a loop over the SIMD lanes.
fn gq(v: array<vec4<u32>, 8>, sl: vec4<f32>, sh: vec4<f32>, q: u32, xi: vec4<u32>, m: u32, ux: bool) -> Tile {
    let w0 = dq(v[0], q) * sl.x;
    let w1 = dq(v[1], q) * sl.y;
    let w2_ = dq(v[2], q) * sl.z;
    let w3 = dq(v[3], q) * sl.w;
    let w4 = dq(v[4], q) * sh.x;
    let w5 = dq(v[5], q) * sh.y;
    let w6 = dq(v[6], q) * sh.z;
    let w7 = dq(v[7], q) * sh.w;
    let x0 = xv4(xi.x, ux);
    var x1 = x0;
    var x2 = x0;
    var x3 = x0;
    if m > 1u {
        x1 = xv4(xi.y, ux);
    }
    if m > 2u {
        x2 = xv4(xi.z, ux);
    }
    if m > 3u {
        x3 = xv4(xi.w, ux);
    }
    let lo = mat4x4<f32>(vec4<f32>(dot(w0, x0), dot(w1, x0), dot(w2_, x0), dot(w3, x0)),
                         vec4<f32>(dot(w0, x1), dot(w1, x1), dot(w2_, x1), dot(w3, x1)),
                         vec4<f32>(dot(w0, x2), dot(w1, x2), dot(w2_, x2), dot(w3, x2)),
                         vec4<f32>(dot(w0, x3), dot(w1, x3), dot(w2_, x3), dot(w3, x3)));
    let hi = mat4x4<f32>(vec4<f32>(dot(w4, x0), dot(w5, x0), dot(w6, x0), dot(w7, x0)),
                         vec4<f32>(dot(w4, x1), dot(w5, x1), dot(w6, x1), dot(w7, x1)),
                         vec4<f32>(dot(w4, x2), dot(w5, x2), dot(w6, x2), dot(w7, x2)),
                         vec4<f32>(dot(w4, x3), dot(w5, x3), dot(w6, x3), dot(w7, x3)));
    return Tile(lo, hi);
}

// chunk_tile is the products of the 8 slots' chunks v with the 4 tokens'
// activations from vec4 indices xi: gq over the chunk's EPW vec4s,
// unrolled with constant q so each dq folds to its one decoding.
fn chunk_tile(v: array<vec4<u32>, 8>, sl: vec4<f32>, sh: vec4<f32>, xi: vec4<u32>, m: u32, ux: bool) -> Tile {
    var tl = gq(v, sl, sh, 0u, xi, m, ux);
    if EPW > 1u {
        tl = add_tile(tl, gq(v, sl, sh, 1u, xi + 1u, m, ux));
    }
    if EPW > 2u {
        tl = add_tile(tl, gq(v, sl, sh, 2u, xi + 2u, m, ux));
        tl = add_tile(tl, gq(v, sl, sh, 3u, xi + 3u, m, ux));
    }
    if EPW > 4u {
        tl = add_tile(tl, gq(v, sl, sh, 4u, xi + 4u, m, ux));
        tl = add_tile(tl, gq(v, sl, sh, 5u, xi + 5u, m, ux));
        tl = add_tile(tl, gq(v, sl, sh, 6u, xi + 6u, m, ux));
        tl = add_tile(tl, gq(v, sl, sh, 7u, xi + 7u, m, ux));
    }
    return tl;
}

// matmul_direct: invocation (lx, ly) of a workgroup computes tokens
// ty + 8i (i < 4, ty = tile token + ly) for its 8 weight-row slots.
@compute @workgroup_size(8, 8)
fn matmul_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let n = min(step[1], p.nrows);
    if wid.y * MM_TOKENS >= n {
        return; // the whole tile is past T: uniform across the workgroup
    }
    direct(wid.x * MM_ROWS + lid.x, wid.y * MM_TOKENS + lid.y, 8u, n, false);
}

// matmul_few: matmul_direct for steps of at most 4 tokens (batched decode
// steps, one row per sequence), CPU class: invocation (lx, ly) computes
// tokens 0-3 for its 8 weight-row slots, the 8 rows of ly each covering
// MM_ROWS weight rows, so a workgroup covers 8 * MM_ROWS rows and every
// weight chunk is read once for all the tokens. (matmul_direct would give
// 7 of every 8 invocations tokens past the end.) Dispatch:
// (ceil(rows / (8 * MM_ROWS)), 1, 1).
@compute @workgroup_size(8, 8)
fn matmul_few(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let n = min(min(step[1], p.nrows), p.x_t0 + 4u);
    direct((wid.x * 8u + lid.y) * MM_ROWS + lid.x, p.x_t0, 1u, n, false);
}

// matmul_few_u is matmul_few with the activations read from xu (as
// matvec_u), whose row 0 is token x_t0: a prefill step on a CPU-class
// device runs as one matmul_few_u per 4 tokens, each binding its tokens'
// activations at xu.
@compute @workgroup_size(8, 8)
fn matmul_few_u(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let n = min(min(step[1], p.nrows), p.x_t0 + 4u);
    direct((wid.x * 8u + lid.y) * MM_ROWS + lid.x, p.x_t0, 1u, n, true);
}

// direct computes the 8 weight-row slots of rbase (slot_row) for tokens
// ty + dt*i, i < 4 (tokens past n repeat the last and are dropped), with
// the activations from xu when ux.
fn direct(rbase: u32, ty: u32, dt: u32, n: u32, ux: bool) {
    if rbase >= p.rows {
        return; // every slot past the last row
    }
    let last = p.rows - 1u;
    // Rows and tokens past the end repeat the last; dropped when stored.
    let r0 = min(slot_row(rbase, 0u), last);
    let r1 = min(slot_row(rbase, 1u), last);
    let r2 = min(slot_row(rbase, 2u), last);
    let r3 = min(slot_row(rbase, 3u), last);
    let r4 = min(slot_row(rbase, 4u), last);
    let r5 = min(slot_row(rbase, 5u), last);
    let r6 = min(slot_row(rbase, 6u), last);
    let r7 = min(slot_row(rbase, 7u), last);
    // m: the token slots that hold tokens (the rest repeat the last).
    let m = min((n - min(ty, n) + dt - 1u) / dt, 4u);
    if m == 0u {
        return; // no token of this invocation is in the step
    }
    let t0 = min(ty, n - 1u);
    let t1 = min(ty + dt, n - 1u);
    let t2 = min(ty + 2u * dt, n - 1u);
    let t3 = min(ty + 3u * dt, n - 1u);
    var c0l = vec4<f32>(0.0);
    var c0h = vec4<f32>(0.0);
    var c1l = vec4<f32>(0.0);
    var c1h = vec4<f32>(0.0);
    var c2l = vec4<f32>(0.0);
    var c2h = vec4<f32>(0.0);
    var c3l = vec4<f32>(0.0);
    var c3h = vec4<f32>(0.0);
    if fast() {
        let cpb = p.block / CW;
        let xs = p.in_cols / 4u;
        // xu's row 0 is token x_t0 (0 for matvec_u and batched steps).
        var xbase = 0u;
        if ux {
            xbase = p.x_t0;
        }
        for (var b = 0u; b < p.nblocks; b++) {
            let sl = vec4<f32>(slot_scale(0u, r0, b), slot_scale(1u, r1, b), slot_scale(2u, r2, b), slot_scale(3u, r3, b));
            let sh = vec4<f32>(slot_scale(4u, r4, b), slot_scale(5u, r5, b), slot_scale(6u, r6, b), slot_scale(7u, r7, b));
            for (var j = b * cpb; j < (b + 1u) * cpb; j++) {
                let v0 = slot_chunk(0u, r0, j);
                let v1 = slot_chunk(1u, r1, j);
                let v2 = slot_chunk(2u, r2, j);
                let v3 = slot_chunk(3u, r3, j);
                let v4 = slot_chunk(4u, r4, j);
                let v5 = slot_chunk(5u, r5, j);
                let v6 = slot_chunk(6u, r6, j);
                let v7 = slot_chunk(7u, r7, j);
                let v = array<vec4<u32>, 8>(v0, v1, v2, v3, v4, v5, v6, v7);
                let xi = (vec4<u32>(t0, t1, t2, t3) - xbase) * xs + j * EPW;
                let tl = chunk_tile(v, sl, sh, xi, m, ux);
                c0l += tl.lo[0];
                c1l += tl.lo[1];
                c2l += tl.lo[2];
                c3l += tl.lo[3];
                c0h += tl.hi[0];
                c1h += tl.hi[1];
                c2h += tl.hi[2];
                c3h += tl.hi[3];
            }
        }
    } else {
        let rl = vec4<u32>(r0, r1, r2, r3);
        let rh = vec4<u32>(r4, r5, r6, r7);
        for (var k = 0u; k < 4u; k++) {
            c0l[k] = slot_slow(k, rl[k], t0);
            c0h[k] = slot_slow(k + 4u, rh[k], t0);
            c1l[k] = slot_slow(k, rl[k], t1);
            c1h[k] = slot_slow(k + 4u, rh[k], t1);
            c2l[k] = slot_slow(k, rl[k], t2);
            c2h[k] = slot_slow(k + 4u, rh[k], t2);
            c3l[k] = slot_slow(k, rl[k], t3);
            c3h[k] = slot_slow(k + 4u, rh[k], t3);
        }
    }
    finish_tile(ty, n, rbase, c0l, c0h);
    finish_tile(ty + dt, n, rbase, c1l, c1h);
    finish_tile(ty + 2u * dt, n, rbase, c2l, c2h);
    finish_tile(ty + 3u * dt, n, rbase, c3l, c3h);
}

// matmul (tiled): per step of MM_K (32) columns the workgroup stages the
// 32 tokens' activations and its 64 weight rows, dequantized and scaled,
// in workgroup memory (row stride 9 vec4: one vec4 of padding), then each
// invocation multiplies its 4 tokens x 8 slots from there. Needs fast().
var<workgroup> xtile: array<array<vec4<f32>, 9>, 32>; // [token][k/4]
var<workgroup> wtile: array<array<vec4<f32>, 9>, 64>; // [weight row][k/4]

@compute @workgroup_size(8, 8)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let n = min(step[1], p.nrows);
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
                v = xv4((tt + tok) * xs + k0 / 4u + kq, false);
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
