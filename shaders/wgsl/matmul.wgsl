// MatMul: out[t][row_base + r] = sum_c W[r][c] x[t][c] (+ bias), for the row
// block [row_base, row_base+rows) of W bound here (weights over the binding
// limit are split by rows, one dispatch per block). Weights are dequantized
// in the kernel: per-block partial sums are multiplied by their scale.
//
// matvec (decode, bandwidth bound): one invocation per output row and token,
//   dispatch (ceil(rows/64), nrows, 1).
// matmul (prefill, compute bound): 32x32 output blocks of tokens x rows with
//   dequantized weight tiles in workgroup memory,
//   dispatch (ceil(rows/32), ceil(nrows/32), 1).
// Rows t < min(T, nrows) are computed. With accum set the result is added
// to out (out + (W·x + bias), MatMul's Accumulate: the residual add fused
// into the projection).
//
// matvec_glu and matmul_glu compute act(W·x + bias) * (W2·x + bias2) (the
// MatMulGLU op: gate W, up W2 with the same type, scales and row blocks,
// sharing each activation load); bias belongs to the gate when has_bias is
// set, to the up projection when has_bias2 is set (never both).

struct MatParams {
    in_cols: u32,
    out_cols: u32,
    row_base: u32,
    rows: u32,
    wt: u32,
    st: u32,
    block: u32,   // elements per scale (in_cols when unquantized)
    nblocks: u32, // scales per row (1 when unquantized)
    quant: u32,   // 1: scales bound
    has_bias: u32,
    nrows: u32,   // rows of x and out (Tokens, or 1 after LastRow)
    accum: u32,   // 1: out += result
    act: u32,     // *_glu: activation code (elementwise.wgsl's)
    has_bias2: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> p: MatParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> s: array<u32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<storage, read> w2: array<u32>;
@group(0) @binding(8) var<storage, read> s2: array<u32>;

fn wscale(r: u32, c: u32) -> f32 {
    if p.quant == 0u {
        return 1.0;
    }
    let si = r * p.nblocks + c / p.block;
    return decode_scale(s[scale_word(si, p.st)], si, p.st);
}

fn wscale2(r: u32, c: u32) -> f32 {
    if p.quant == 0u {
        return 1.0;
    }
    let si = r * p.nblocks + c / p.block;
    return decode_scale(s2[scale_word(si, p.st)], si, p.st);
}

// store writes one result, adding it to out in accumulate mode.
fn store(i: u32, v: f32) {
    if p.accum != 0u {
        out[i] = out[i] + v;
    } else {
        out[i] = v;
    }
}

// elems_per_word is how many elements of type wt one u32 holds.
fn elems_per_word(wt: u32) -> u32 {
    var n = 1u;
    switch wt {
        case 1u, 2u: { n = 2u; }
        case 3u: { n = 4u; }
        case 4u: { n = 8u; }
        default: {}
    }
    return n;
}

// x4 loads four consecutive activations.
fn x4(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}

// dot_words is the dot product of words w0+i (i = first, first+stride, ...
// < n) of weights with their activations (word 0 pairs with x[xi]),
// decoding a word at a time. The type switch sits outside the loops so each
// loop is branch-free.
fn dot_words(w0: u32, xi: u32, n: u32, first: u32, stride: u32) -> f32 {
    var acc = 0.0;
    switch p.wt {
        case 1u: {
            for (var i = first; i < n; i += stride) {
                let h = unpack2x16float(w[w0 + i]);
                acc += h.x * x[xi + 2u * i] + h.y * x[xi + 2u * i + 1u];
            }
        }
        case 2u: {
            for (var i = first; i < n; i += stride) {
                let v = w[w0 + i];
                acc += bitcast<f32>(v << 16u) * x[xi + 2u * i] + bitcast<f32>(v & 0xffff0000u) * x[xi + 2u * i + 1u];
            }
        }
        case 3u: {
            // Element k of a word is bits [8k, 8k+8): shift it to the top,
            // then an arithmetic shift sign-extends it.
            let up = vec4<u32>(24u, 16u, 8u, 0u);
            for (var i = first; i < n; i += stride) {
                let q = (vec4<i32>(bitcast<i32>(w[w0 + i])) << up) >> vec4<u32>(24u);
                acc += dot(vec4<f32>(q), x4(xi + 4u * i));
            }
        }
        case 4u: {
            let lo = vec4<u32>(28u, 24u, 20u, 16u);
            let hi = vec4<u32>(12u, 8u, 4u, 0u);
            for (var i = first; i < n; i += stride) {
                let v = vec4<i32>(bitcast<i32>(w[w0 + i]));
                let a = (v << lo) >> vec4<u32>(28u);
                let b = (v << hi) >> vec4<u32>(28u);
                acc += dot(vec4<f32>(a), x4(xi + 8u * i)) + dot(vec4<f32>(b), x4(xi + 8u * i + 4u));
            }
        }
        default: {
            for (var i = first; i < n; i += stride) {
                acc += bitcast<f32>(w[w0 + i]) * x[xi + i];
            }
        }
    }
    return acc;
}

@compute @workgroup_size(64)
fn matvec(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t = gid.y;
    if r >= p.rows || t >= min(step[1], p.nrows) {
        return;
    }
    let xb = t * p.in_cols;
    let wb = r * p.in_cols;
    let epw = elems_per_word(p.wt);
    // Rows and blocks that start on word boundaries decode whole words.
    let whole = p.in_cols % epw == 0u && p.block % epw == 0u;
    var acc = 0.0;
    for (var b = 0u; b < p.nblocks; b++) {
        var part = 0.0;
        let c0 = b * p.block;
        if whole {
            part = dot_words((wb + c0) / epw, xb + c0, p.block / epw, 0u, 1u);
        } else {
            for (var c = c0; c < c0 + p.block; c++) {
                let e = wb + c;
                part += decode(w[word_of(e, p.wt)], e, p.wt) * x[xb + c];
            }
        }
        acc += part * wscale(r, c0);
    }
    let o = p.row_base + r;
    if p.has_bias != 0u {
        acc += bias[o];
    }
    store(t * p.out_cols + o, acc);
}

// matvec_lanes: LANES consecutive invocations share a row and read
// interleaved words, so a workgroup's loads are contiguous (coalesced on
// GPUs); lane 0 then sums the lanes' partial results. Dispatch
// (ceil(rows/ROWS_PER_WG), nrows, 1). matvec (one invocation per row) is
// faster on CPU drivers such as lavapipe, which gather across rows cheaply
// but pay for every barrier.
const LANES: u32 = 16u;
const ROWS_PER_WG: u32 = 4u;
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn matvec_lanes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wid.y;
    if t >= min(step[1], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let lane = lid.x % LANES;
    let r = wid.x * ROWS_PER_WG + lid.x / LANES;
    var acc = 0.0;
    if r < p.rows {
        let xb = t * p.in_cols;
        let wb = r * p.in_cols;
        let epw = elems_per_word(p.wt);
        let whole = p.in_cols % epw == 0u && p.block % epw == 0u;
        for (var b = 0u; b < p.nblocks; b++) {
            var part = 0.0;
            let c0 = b * p.block;
            if whole {
                part = dot_words((wb + c0) / epw, xb + c0, p.block / epw, lane, LANES);
            } else {
                for (var c = c0 + lane; c < c0 + p.block; c += LANES) {
                    let e = wb + c;
                    part += decode(w[word_of(e, p.wt)], e, p.wt) * x[xb + c];
                }
            }
            acc += part * wscale(r, c0);
        }
    }
    partial[lid.x] = acc;
    workgroupBarrier();
    if lane == 0u && r < p.rows {
        var sum = 0.0;
        for (var i = 0u; i < LANES; i++) {
            sum += partial[lid.x + i];
        }
        let o = p.row_base + r;
        if p.has_bias != 0u {
            sum += bias[o];
        }
        store(t * p.out_cols + o, sum);
    }
}

// matmul tiles: a workgroup of 8x8 invocations computes a block of 32 rows
// x 32 tokens, each invocation 4x4 outputs (rows lid.x + 8j, tokens
// lid.y + 8i), stepping through k 16 at a time with the activations and the
// dequantized weights of the step staged in workgroup memory. Many outputs
// per invocation keep the barriers few, which matters most on CPU drivers
// such as lavapipe.
const TM: u32 = 32u; // tokens and rows per workgroup
const TK: u32 = 16u; // k per step
var<workgroup> xs: array<array<f32, 16>, 32>; // [token][k]
var<workgroup> ws: array<array<f32, 16>, 32>; // [row][k]

@compute @workgroup_size(8, 8)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let n = min(step[1], p.nrows);
    let t0 = wid.y * TM;
    if t0 >= n {
        return; // the whole block is past T: uniform across the workgroup
    }
    let r0 = wid.x * TM;
    var acc: array<array<f32, 4>, 4>; // [token i][row j], zero-initialized
    for (var k0 = 0u; k0 < p.in_cols; k0 += TK) {
        // Stage 32x16 activations and 32x16 weights, 8 of each per invocation.
        for (var m = 0u; m < 8u; m++) {
            let idx = li + 64u * m;
            let row = idx / TK;
            let k = k0 + idx % TK;
            var xv = 0.0;
            if k < p.in_cols && t0 + row < n {
                xv = x[(t0 + row) * p.in_cols + k];
            }
            xs[row][idx % TK] = xv;
            var wv = 0.0;
            if k < p.in_cols && r0 + row < p.rows {
                let e = (r0 + row) * p.in_cols + k;
                wv = decode(w[word_of(e, p.wt)], e, p.wt) * wscale(r0 + row, k);
            }
            ws[row][idx % TK] = wv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            var xr: array<f32, 4>;
            var wr: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                xr[i] = xs[lid.y + 8u * i][kk];
                wr[i] = ws[lid.x + 8u * i][kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += xr[i] * wr[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + lid.y + 8u * i;
        for (var j = 0u; j < 4u; j++) {
            let r = r0 + lid.x + 8u * j;
            if t < n && r < p.rows {
                let o = p.row_base + r;
                var v = acc[i][j];
                if p.has_bias != 0u {
                    v += bias[o];
                }
                store(t * p.out_cols + o, v);
            }
        }
    }
}

// The activations of elementwise.wgsl's glu, repeated here (WGSL has no
// includes; keeping them out of common.wgsl leaves the other families'
// modules unchanged). The conformance cases hold both copies to gpu/cpu.

// erf_approx: Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7.
fn erf_approx(x: f32) -> f32 {
    let z = abs(x);
    let k = 1.0 / (1.0 + 0.3275911 * z);
    let poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// gelu_tanh: llama.cpp's fp16 table form (see fusion.GLU).
fn gelu_tanh(v: f32) -> f32 {
    if v <= -10.0 {
        return 0.0;
    }
    if v >= 10.0 {
        return v;
    }
    let x = to_f16(v);
    // 0.7978845608 = sqrt(2/pi)
    let g = 0.5 * x * (1.0 + tanh_safe(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
    return to_f16(g);
}

// apply_act: 0 silu, 1 gelu_tanh, 2 gelu (erf), 3 relu (the host's actCodes).
fn apply_act(act: u32, v: f32) -> f32 {
    var r = 0.0;
    switch act {
        case 0u: { r = v / (1.0 + exp(-v)); }
        case 1u: { r = gelu_tanh(v); }
        case 2u: { r = 0.5 * v * (1.0 + erf_approx(v * 0.7071067812)); }
        default: { r = max(v, 0.0); }
    }
    return r;
}

// glu_result combines a gate and an up dot product with their bias.
fn glu_result(o: u32, gate: f32, up: f32) -> f32 {
    var g = gate;
    var u = up;
    if p.has_bias != 0u {
        g += bias[o];
    }
    if p.has_bias2 != 0u {
        u += bias[o];
    }
    return apply_act(p.act, g) * u;
}

// dot_words2 is dot_words for the gate (w) and up (w2) rows at once: each
// activation is loaded once for both products.
fn dot_words2(w0: u32, xi: u32, n: u32, first: u32, stride: u32) -> vec2<f32> {
    var acc = vec2<f32>(0.0);
    switch p.wt {
        case 1u: {
            for (var i = first; i < n; i += stride) {
                let xv = vec2<f32>(x[xi + 2u * i], x[xi + 2u * i + 1u]);
                acc += vec2<f32>(dot(unpack2x16float(w[w0 + i]), xv), dot(unpack2x16float(w2[w0 + i]), xv));
            }
        }
        case 2u: {
            for (var i = first; i < n; i += stride) {
                let xv = vec2<f32>(x[xi + 2u * i], x[xi + 2u * i + 1u]);
                let a = w[w0 + i];
                let b = w2[w0 + i];
                acc += vec2<f32>(dot(vec2<f32>(bitcast<f32>(a << 16u), bitcast<f32>(a & 0xffff0000u)), xv),
                                 dot(vec2<f32>(bitcast<f32>(b << 16u), bitcast<f32>(b & 0xffff0000u)), xv));
            }
        }
        case 3u: {
            let up = vec4<u32>(24u, 16u, 8u, 0u);
            for (var i = first; i < n; i += stride) {
                let xv = x4(xi + 4u * i);
                let a = (vec4<i32>(bitcast<i32>(w[w0 + i])) << up) >> vec4<u32>(24u);
                let b = (vec4<i32>(bitcast<i32>(w2[w0 + i])) << up) >> vec4<u32>(24u);
                acc += vec2<f32>(dot(vec4<f32>(a), xv), dot(vec4<f32>(b), xv));
            }
        }
        case 4u: {
            let lo = vec4<u32>(28u, 24u, 20u, 16u);
            let hi = vec4<u32>(12u, 8u, 4u, 0u);
            for (var i = first; i < n; i += stride) {
                let xa = x4(xi + 8u * i);
                let xb = x4(xi + 8u * i + 4u);
                let a = vec4<i32>(bitcast<i32>(w[w0 + i]));
                let b = vec4<i32>(bitcast<i32>(w2[w0 + i]));
                acc += vec2<f32>(dot(vec4<f32>((a << lo) >> vec4<u32>(28u)), xa) + dot(vec4<f32>((a << hi) >> vec4<u32>(28u)), xb),
                                 dot(vec4<f32>((b << lo) >> vec4<u32>(28u)), xa) + dot(vec4<f32>((b << hi) >> vec4<u32>(28u)), xb));
            }
        }
        default: {
            for (var i = first; i < n; i += stride) {
                let xv = x[xi + i];
                acc += vec2<f32>(bitcast<f32>(w[w0 + i]) * xv, bitcast<f32>(w2[w0 + i]) * xv);
            }
        }
    }
    return acc;
}

// matvec_glu: matvec for MatMulGLU, one invocation per output row and token.
@compute @workgroup_size(64)
fn matvec_glu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t = gid.y;
    if r >= p.rows || t >= min(step[1], p.nrows) {
        return;
    }
    let xb = t * p.in_cols;
    let wb = r * p.in_cols;
    let epw = elems_per_word(p.wt);
    let whole = p.in_cols % epw == 0u && p.block % epw == 0u;
    var acc = vec2<f32>(0.0);
    for (var b = 0u; b < p.nblocks; b++) {
        var part = vec2<f32>(0.0);
        let c0 = b * p.block;
        if whole {
            part = dot_words2((wb + c0) / epw, xb + c0, p.block / epw, 0u, 1u);
        } else {
            for (var c = c0; c < c0 + p.block; c++) {
                let e = wb + c;
                let i = word_of(e, p.wt);
                part += vec2<f32>(decode(w[i], e, p.wt), decode(w2[i], e, p.wt)) * x[xb + c];
            }
        }
        acc += part * vec2<f32>(wscale(r, c0), wscale2(r, c0));
    }
    let o = p.row_base + r;
    store(t * p.out_cols + o, glu_result(o, acc.x, acc.y));
}

// matvec_glu_lanes: matvec_lanes for MatMulGLU.
var<workgroup> partial2: array<f32, 64>;

@compute @workgroup_size(64)
fn matvec_glu_lanes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wid.y;
    if t >= min(step[1], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let lane = lid.x % LANES;
    let r = wid.x * ROWS_PER_WG + lid.x / LANES;
    var acc = vec2<f32>(0.0);
    if r < p.rows {
        let xb = t * p.in_cols;
        let wb = r * p.in_cols;
        let epw = elems_per_word(p.wt);
        let whole = p.in_cols % epw == 0u && p.block % epw == 0u;
        for (var b = 0u; b < p.nblocks; b++) {
            var part = vec2<f32>(0.0);
            let c0 = b * p.block;
            if whole {
                part = dot_words2((wb + c0) / epw, xb + c0, p.block / epw, lane, LANES);
            } else {
                for (var c = c0 + lane; c < c0 + p.block; c += LANES) {
                    let e = wb + c;
                    let i = word_of(e, p.wt);
                    part += vec2<f32>(decode(w[i], e, p.wt), decode(w2[i], e, p.wt)) * x[xb + c];
                }
            }
            acc += part * vec2<f32>(wscale(r, c0), wscale2(r, c0));
        }
    }
    partial[lid.x] = acc.x;
    partial2[lid.x] = acc.y;
    workgroupBarrier();
    if lane == 0u && r < p.rows {
        var sum = vec2<f32>(0.0);
        for (var i = 0u; i < LANES; i++) {
            sum += vec2<f32>(partial[lid.x + i], partial2[lid.x + i]);
        }
        let o = p.row_base + r;
        store(t * p.out_cols + o, glu_result(o, sum.x, sum.y));
    }
}

// matmul_glu: matmul for MatMulGLU, staging the up weights beside the gate's.
var<workgroup> ws2: array<array<f32, 16>, 32>; // [row][k]

@compute @workgroup_size(8, 8)
fn matmul_glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let n = min(step[1], p.nrows);
    let t0 = wid.y * TM;
    if t0 >= n {
        return;
    }
    let r0 = wid.x * TM;
    var acc: array<array<f32, 4>, 4>;  // gate [token i][row j]
    var acc2: array<array<f32, 4>, 4>; // up
    for (var k0 = 0u; k0 < p.in_cols; k0 += TK) {
        for (var m = 0u; m < 8u; m++) {
            let idx = li + 64u * m;
            let row = idx / TK;
            let k = k0 + idx % TK;
            var xv = 0.0;
            if k < p.in_cols && t0 + row < n {
                xv = x[(t0 + row) * p.in_cols + k];
            }
            xs[row][idx % TK] = xv;
            var wv = 0.0;
            var wv2 = 0.0;
            if k < p.in_cols && r0 + row < p.rows {
                let e = (r0 + row) * p.in_cols + k;
                let i = word_of(e, p.wt);
                wv = decode(w[i], e, p.wt) * wscale(r0 + row, k);
                wv2 = decode(w2[i], e, p.wt) * wscale2(r0 + row, k);
            }
            ws[row][idx % TK] = wv;
            ws2[row][idx % TK] = wv2;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            var xr: array<f32, 4>;
            var wr: array<f32, 4>;
            var wr2: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                xr[i] = xs[lid.y + 8u * i][kk];
                wr[i] = ws[lid.x + 8u * i][kk];
                wr2[i] = ws2[lid.x + 8u * i][kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += xr[i] * wr[j];
                    acc2[i][j] += xr[i] * wr2[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + lid.y + 8u * i;
        for (var j = 0u; j < 4u; j++) {
            let r = r0 + lid.x + 8u * j;
            if t < n && r < p.rows {
                let o = p.row_base + r;
                store(t * p.out_cols + o, glu_result(o, acc[i][j], acc2[i][j]));
            }
        }
    }
}
