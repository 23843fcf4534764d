// Library snippet, not a family: a family's line "// include: matvec" is
// replaced by what follows (shaders.expandIncludes). The matrix-vector
// core shared by matmul.wgsl and qkv.wgsl: the parameter block, the
// dequantization of a 16-byte weight chunk of the variant's type (the
// constants WT, ST, EPW, QUANT and GLU of shaders.MatMulVariant), its dot
// products with the activations (bindings x_w and, for the norm prologue,
// bias, which each including family declares) and the reduction arrays.

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
    lanes: u32,   // matvec_lanes: invocations per row group, a power of two <= LV_WG
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    norm_eps: f32, // the *_norm kernels' RMS-norm epsilon
    x_f16: u32,    // 1: x is an f16 activation (packed halves)
    row_set_at: u32, // not 0: matvec_lanes computes only the rows t whose
                     // step word row_set_at + t is row_set (RowLoRA)
    row_set: u32,
    pad0: u32,     // (the block is a multiple of 16 bytes)
    pad1: u32,
    pad2: u32,
}

const CW: u32 = 4u * EPW; // elements per chunk

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

// mvq_chunk is mvq summed over the EPW activation vec4s of one chunk
// (xi the first; token t's vec4s start at xb), each through xs (the norm
// prologue when nm), in order.
fn mvq_chunk(v0: vec4<u32>, v1: vec4<u32>, v2: vec4<u32>, v3: vec4<u32>, u0: vec4<u32>, u1: vec4<u32>, u2: vec4<u32>, u3: vec4<u32>,
             xi: u32, xb: u32, nm: bool, ss: ptr<function, vec4<f32>>) -> mat4x2<f32> {
    var m = mvq(v0, v1, v2, v3, u0, u1, u2, u3, 0u, xs(xi, xb, nm, ss));
    if EPW > 1u {
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 1u, xs(xi + 1u, xb, nm, ss));
    }
    if EPW > 2u {
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 2u, xs(xi + 2u, xb, nm, ss));
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 3u, xs(xi + 3u, xb, nm, ss));
    }
    if EPW > 4u {
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 4u, xs(xi + 4u, xb, nm, ss));
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 5u, xs(xi + 5u, xb, nm, ss));
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 6u, xs(xi + 6u, xb, nm, ss));
        m += mvq(v0, v1, v2, v3, u0, u1, u2, u3, 7u, xs(xi + 7u, xb, nm, ss));
    }
    return m;
}

// xs is activation vec4 i (token t's vec4s start at xb) times the norm
// scale (bound at bias) when nm (a constant in each caller), adding its
// squares to ss.
fn xs(i: u32, xb: u32, nm: bool, ss: ptr<function, vec4<f32>>) -> vec4<f32> {
    let v = xv4(i);
    if !nm {
        return v;
    }
    *ss += v * v;
    let g = 4u * (i - xb);
    return v * vec4<f32>(bias[g], bias[g + 1u], bias[g + 2u], bias[g + 3u]);
}

// xv4 is activation vec4 i.
fn xv4(i: u32) -> vec4<f32> {
    if p.x_f16 != 0u {
        let w = x_w[i >> 1u];
        let hw = select(w.xy, w.zw, (i & 1u) == 1u);
        return vec4<f32>(unpack2x16float(hw.x), unpack2x16float(hw.y));
    }
    return bitcast<vec4<f32>>(x_w[i]);
}

// red: the lane groups' partial sums (matvec_lanes and the kernels built
// like it), reduced as a tree.
var<workgroup> red: array<vec4<f32>, LV_WG>;

// red_ss: the lane groups' sums of squares (the norm prologue's kernels).
var<workgroup> red_ss: array<f32, LV_WG>;
