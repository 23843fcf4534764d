// Mixture of experts (fusion.MoEOp) after its router product: the planner
// computes the router logits [rows, experts] with the matmul kernels into a
// buffer of its own, then these kernels run on the device with no host
// round trip between them. A slot is one (row t, k-th selected expert)
// pair, numbered t * used + k.
//
//   moe_route: per row t, with gating 0 (fusion.GatingSoftmax) softmax
//     over the experts' logits (x), the `used` most probable experts in
//     decreasing probability (the lower index first on ties) and their
//     probabilities; with gating 1 (GatingSoftmaxWeight) the `used`
//     largest logits and the softmax of those alone; the weights
//     renormalized to sum 1 when norm_topk is set, into route[t] =
//     (expert, weight bits) pairs. With grouped set it then lists each
//     expert's slots (offs_at, list_at). One workgroup; dispatch (1, 1, 1).
//   moe_glu: hidden[slot][r] = act(g) * u, g = G_e[r]·x[t] (+ gate bias),
//     u = U_e[r]·x[t] (+ up bias), or swiglu_oai(g, u) with oai set, for
//     the slot's expert e: one workgroup per row r and slot, its 64
//     invocations over the columns, so each workgroup reads only its
//     expert's two rows. Dispatch (hidden, used, nrows); grouped (prefill):
//     one workgroup per row r and expert running all of that expert's
//     slots, so each expert row is read from memory once per step, and an
//     expert no row selected costs one empty workgroup per row.
//     Dispatch (hidden, experts, 1).
//   moe_down: out[t][j] = sum over k in order of weight_k * (D_e[j]·
//     hidden[slot] (+ down bias)): one workgroup per (j, t). Dispatch
//     (cols, nrows, 1).
//     Grouped: one workgroup per (j, expert) writing each of its slots'
//     unweighted product (with its bias) to out = y[slot][j]; dispatch
//     (cols, experts, 1).
//   moe_sum (grouped only): out[t][j] = sum over k in order of weight_k *
//     y[slot][j], the per-token moe_down's sum. Dispatch (ceil(cols/64),
//     nrows, 1).
//
// The expert weights are 3-D tensors [experts, rows, in] uploaded as one
// matrix of experts*rows rows (expert e's rows start at row e*rows), of any
// type common.wgsl decodes (f32, f16, bf16, int8 and int4 with scales),
// read element by element with word_of/decode as embed does, or of one of
// llama.cpp's block types (K-quants, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4: mq_value): each family
// module holds one decoding path per weight type only where a kernel is
// bandwidth-bound on a dense matrix (matmul.wgsl); here the kernels read
// used/experts of the expert bytes, and a plain family keeps the kernel set
// at 4 entry points and 4 pipelines (shaders.TestKernelBudget) instead of
// one module per weight type.
//
// The router bias is the router product's (the matmul kernels'). The
// expert biases are f32 [experts, n] (expert e's is row e), read at
// bindings the kernels leave free: moe_down's down bias at w2; moe_glu's
// gate bias at s and up bias at s2 when the experts have no scales, else
// both in s2 after the up scales (bias_s2 set: the planner copies them
// there once), at word offsets gb_off and ub_off.
//
// One kernel per step of the op, each for its reason: the selection needs
// every logit of a row before any expert is known (moe_route), the down
// product needs the whole hidden row of each selected expert (moe_glu
// before moe_down), and a down product per selected expert summed in slot
// order gives the CPU reference's order of the weighted sum; grouped, the
// products of different experts for one row come from different
// workgroups, and WGSL has no float atomics to sum them there, so moe_sum
// adds them in that order.

struct MoEParams {
    cols: u32,      // columns of x (moe_glu) and of out (moe_down)
    hidden: u32,    // rows per expert of gate and up, columns of down
    experts: u32,
    used: u32,      // experts per row (route holds 2*used words per row)
    nrows: u32,     // rows of x and out (Tokens, or 1 after LastRow)
    wt: u32,        // weight type of the bound expert weights (gate and up share it)
    st: u32,        // their scale type
    block: u32,     // elements per scale (0: unquantized)
    nblocks: u32,   // scales per row
    act: u32,       // moe_glu: activation code
    norm_topk: u32, // moe_route: 1: renormalize the selected probabilities
    x_f16: u32,     // 1: x is an f16 activation (packed halves)
    out_f16: u32,   // 1: out is an f16 activation (packed halves)
    grouped: u32,   // 1: the rows' slots grouped by expert (prefill), see above
    qt: u32,        // block type (QT_*) of the bound expert weights, 0: none (then wt, st)
    gating: u32,    // moe_route: 0 softmax, 1 softmax_weight (see above)
    bias: u32,      // bits: MOE_BIAS_* (shaders/codes.go)
    gb_off: u32,    // moe_glu: word offset of the gate bias in s (s2 with MOE_BIAS_S2)
    ub_off: u32,    // moe_glu: word offset of the up bias in s2
    oai: u32,       // moe_glu: 1: swiglu_oai(g, u) of alpha and limit in place of act(g) * u
    alpha: f32,
    limit: f32,
    pad3: u32,
    pad4: u32,
}

@group(0) @binding(0) var<uniform> p: MoEParams;
@group(0) @binding(1) var<storage, read> step: array<u32>; // [pos, T, tokens...]
@group(0) @binding(2) var<storage, read> x_w: array<u32>;   // moe_route: router logits; moe_glu: the op's input; moe_down: hidden
@group(0) @binding(3) var<storage, read> w: array<u32>;     // gate (moe_glu) or down (moe_down) experts
@group(0) @binding(4) var<storage, read> s: array<u32>;     // their scales, or (moe_glu, unscaled) the gate bias
@group(0) @binding(5) var<storage, read> w2: array<u32>;    // up experts (moe_glu); the down bias (moe_down)
@group(0) @binding(6) var<storage, read> s2: array<u32>;    // their scales and/or the up (and gate) bias
@group(0) @binding(7) var<storage, read_write> route: array<u32>; // [nrows][used] (expert, weight bits)
@group(0) @binding(8) var<storage, read_write> out_w: array<atomic<u32>>; // moe_glu: hidden; moe_down: the op's output

// activations: x, out

const WG: u32 = 64u;
var<workgroup> red: array<f32, 128>;

// live reports whether row t runs in this step.
fn live(t: u32) -> bool {
    return t < min(step[STEP_ROWS], p.nrows);
}

// expert_at is W[row][c] of a stacked expert matrix whose rows are n
// elements long: the first bound weight (w, s), or the second (w2, s2)
// when second is set.
fn expert_at(second: bool, row: u32, c: u32, n: u32) -> f32 {
    let e = row * n + c;
    let i = word_of(e, p.wt);
    // Branches, not selects: a kernel binding only w reads nothing of w2.
    var word = 0u;
    if second {
        word = w2[i];
    } else {
        word = w[i];
    }
    var v = decode(word, e, p.wt);
    if p.block > 0u {
        let si = row * p.nblocks + c / p.block;
        let j = scale_word(si, p.st);
        var sw = 0u;
        if second {
            sw = s2[j];
        } else {
            sw = s[j];
        }
        v = v * decode_scale(sw, si, p.st);
    }
    return v;
}

// Block-type experts (p.qt != 0): the rows in llama.cpp's blocks, kept
// bit for bit as GGUF stores them (tensors/blocks.go; expert e's row r
// starts at block (e*rows + r) * n/block), each element dequantized with
// the f32 operations of tensors.DecodeBlocks, as qblocks.wgsl's qvalue
// does, so every weight equals the CPU reference's. Every word is read
// through mq_word, bounds-checked against the bound array: the Vulkan
// backend runs its SPIR-V without robust buffer access.

// mq_word is word i of the first bound weight (w) or, with second, of
// the second (w2); 0 past its end.
fn mq_word(second: bool, i: u32) -> u32 {
    var v = 0u;
    if second {
        if i < arrayLength(&w2) {
            v = w2[i];
        }
    } else if i < arrayLength(&w) {
        v = w[i];
    }
    return v;
}

fn mq_byte(second: bool, b: u32) -> u32 {
    return (mq_word(second, b >> 2u) >> ((b & 3u) * 8u)) & 0xffu;
}

// mq_half is the f16 at byte b (even in every block layout).
fn mq_half(second: bool, b: u32) -> f32 {
    return unpack2x16float(mq_word(second, b >> 2u) >> ((b & 2u) * 8u)).x;
}

// include: qblock_size

// mq_nibble is element i (< 32) of the 16 bytes of nibbles at byte q: the
// low nibbles are elements 0..15, the high ones 16..31.
fn mq_nibble(second: bool, q: u32, i: u32) -> u32 {
    return (mq_byte(second, q + (i & 15u)) >> ((i >> 4u) * 4u)) & 15u;
}

// mq_e8m0_half is half the scale of the E8M0 byte e, 2^(e-128), with the
// CPU's bits (tensors.MXFP4Half): exponent field e-1, or the subnormals
// 2^-128 and 2^-127 for e < 2.
fn mq_e8m0_half(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

// mq_fp4 is the doubled E2M1 value of the code c (< 16): sign bit 3,
// exponent bits 1..2, mantissa bit 0 (llama.cpp's kvalues_mxfp4: 0, 1, 2,
// 3, 4, 6, 8, 12, then the same negated; code 8 is 0).
fn mq_fp4(c: u32) -> f32 {
    let m = c & 1u;
    let e = (c >> 1u) & 3u;
    let v = i32(select(((2u + m) << e) >> 1u, m, e == 0u));
    return f32(select(v, -v, (c & 8u) != 0u));
}

// mq_iq4nl is the non-linear IQ4_NL value of the code c (< 16): llama.cpp's
// kvalues_iq4nl, held as bytes in the words IQ4NL_W0..3.
fn mq_iq4nl(c: u32) -> f32 {
    let k = c >> 2u;
    let wd = select(select(IQ4NL_W0, IQ4NL_W1, k == 1u), select(IQ4NL_W2, IQ4NL_W3, k == 3u), k >= 2u);
    return f32(bitcast<i32>(wd << ((3u - (c & 3u)) * 8u)) >> 24u);
}

// mq_scale_min is the 6-bit scale and min of sub-block j (< 8) of a Q4_K
// or Q5_K block whose 12 bytes of scales start at byte s.
fn mq_scale_min(second: bool, s: u32, j: u32) -> vec2<f32> {
    if j < 4u {
        return vec2<f32>(f32(mq_byte(second, s + j) & 63u), f32(mq_byte(second, s + j + 4u) & 63u));
    }
    let b = mq_byte(second, s + j + 4u);
    return vec2<f32>(f32((b & 15u) | ((mq_byte(second, s + j - 4u) >> 6u) << 4u)),
                     f32((b >> 4u) | ((mq_byte(second, s + j) >> 6u) << 4u)));
}

// mq_value is element i of the block of type qt at byte b.
fn mq_value(second: bool, qt: u32, b: u32, i: u32) -> f32 {
    var v = 0.0;
    switch qt {
        case QT_Q4_1: {
            v = f32(mq_nibble(second, b + 4u, i)) * mq_half(second, b) + mq_half(second, b + 2u);
        }
        case QT_Q5_0: {
            let hb = (mq_byte(second, b + 2u + (i >> 3u)) >> (i & 7u)) & 1u;
            v = f32(i32(mq_nibble(second, b + 6u, i) | (hb << 4u)) - 16) * mq_half(second, b);
        }
        case QT_Q5_1: {
            let hb = (mq_byte(second, b + 4u + (i >> 3u)) >> (i & 7u)) & 1u;
            v = f32(mq_nibble(second, b + 8u, i) | (hb << 4u)) * mq_half(second, b) + mq_half(second, b + 2u);
        }
        case QT_Q8_0: {
            v = f32(extractBits(bitcast<i32>(mq_byte(second, b + 2u + i)), 0u, 8u)) * mq_half(second, b);
        }
        case QT_MXFP4: {
            v = mq_fp4(mq_nibble(second, b + 1u, i)) * mq_e8m0_half(mq_byte(second, b));
        }
        case QT_NVFP4: { // 4 UE4M3 scales, 4 sub-blocks of 16
            let s = i >> 4u;
            let j = i & 15u;
            let c = (mq_byte(second, b + 4u + 8u * s + (j & 7u)) >> (4u * (j >> 3u))) & 15u;
            v = mq_fp4(c) * ue4m3_half(mq_byte(second, b + s));
        }
        case QT_TQ1_0: { // qs[48], qh[4] of base-3 digits, d (see qblocks.wgsl's qtq1_at)
            var off = 48u + (i & 3u);
            var n = (i - 240u) >> 2u;
            if i < 160u {
                off = i & 31u;
                n = i >> 5u;
            } else if i < 240u {
                off = 32u + ((i - 160u) & 15u);
                n = (i - 160u) >> 4u;
            }
            let p = select(select(select(select(81u, 27u, n == 3u), 9u, n == 2u), 3u, n == 1u), 1u, n == 0u);
            let digit = (((mq_byte(second, b + off) * p) & 255u) * 3u) >> 8u;
            v = f32(i32(digit) - 1) * mq_half(second, b + 52u);
        }
        case QT_TQ2_0: { // element 128h + 32l + m is bits 2l of qs[32h + m]; d
            let q = (mq_byte(second, b + 32u * (i >> 7u) + (i & 31u)) >> (2u * ((i >> 5u) & 3u))) & 3u;
            v = f32(i32(q) - 1) * mq_half(second, b + 64u);
        }
        case QT_IQ4NL: { // d, 16 bytes of codes
            v = mq_half(second, b) * mq_iq4nl(mq_nibble(second, b + 2u, i));
        }
        case QT_IQ4XS: { // d, scales_h, scales_l[4], 8 sub-blocks of IQ4_NL codes: d*(ls-32)*kvalues[q]
            let j = i >> 5u;
            let sh = mq_byte(second, b + 2u) | (mq_byte(second, b + 3u) << 8u);
            let ls = ((mq_byte(second, b + 4u + (j >> 1u)) >> (4u * (j & 1u))) & 15u) | (((sh >> (2u * j)) & 3u) << 4u);
            v = (mq_half(second, b) * f32(i32(ls) - 32)) * mq_iq4nl(mq_nibble(second, b + 8u + 16u * j, i & 31u));
        }
        case QT_Q4K, QT_Q5K: { // 8 sub-blocks of 32, each with a 6-bit scale and min
            let j = i >> 5u;
            let l = i & 31u;
            let sm = mq_scale_min(second, b + 4u, j);
            let qs = select(b + 16u, b + 48u, qt == QT_Q5K);
            var q = (mq_byte(second, qs + 32u * (j >> 1u) + l) >> ((j & 1u) * 4u)) & 15u;
            if qt == QT_Q5K {
                q |= ((mq_byte(second, b + 16u + l) >> j) & 1u) << 4u;
            }
            let d1 = mq_half(second, b) * sm.x;
            let m1 = mq_half(second, b + 2u) * sm.y;
            v = d1 * f32(q) - m1;
        }
        case QT_Q2K, QT_Q3K: { // element l of sub-block 8h + 2j + u (16 each)
            let h = i >> 7u;
            let j = (i >> 5u) & 3u;
            let u = (i >> 4u) & 1u;
            let l = i & 15u;
            let s = 8u * h + 2u * j + u;
            if qt == QT_Q2K {
                let q = (mq_byte(second, b + 16u + 32u * h + 16u * u + l) >> (2u * j)) & 3u;
                let sc = mq_byte(second, b + s);
                let dl = mq_half(second, b + 80u) * f32(sc & 15u);
                let ml = mq_half(second, b + 82u) * f32(sc >> 4u);
                v = dl * f32(q) - ml;
            } else {
                var q = i32((mq_byte(second, b + 32u + 32u * h + 16u * u + l) >> (2u * j)) & 3u);
                if ((mq_byte(second, b + 16u * u + l) >> (4u * h + j)) & 1u) == 0u {
                    q -= 4;
                }
                let lo = (mq_byte(second, b + 96u + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
                let hi = (mq_byte(second, b + 104u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
                v = mq_half(second, b + 108u) * f32(i32(lo | (hi << 4u)) - 32) * f32(q);
            }
        }
        default: { // Q6_K: 16 sub-blocks of 16 with signed 8-bit scales
            let h = i >> 7u;
            let k = (i >> 5u) & 3u;
            let l = i & 31u;
            let lo = (mq_byte(second, b + 64u * h + l + 32u * (k & 1u)) >> ((k >> 1u) * 4u)) & 15u;
            let hi = (mq_byte(second, b + 128u + 32u * h + l) >> (2u * k)) & 3u;
            let sc = f32(extractBits(bitcast<i32>(mq_byte(second, b + 192u + 8u * h + 2u * k + (l >> 4u))), 0u, 8u));
            v = mq_half(second, b + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);
        }
    }
    return v;
}

// mq_dot32 is the dot product of the 32 weights of sub-block j of the
// block of type qt at byte b with x[xi ..]: each weight computed as
// mq_value computes it, the block's constants read once.
fn mq_dot32(second: bool, qt: u32, b: u32, j: u32, xi: u32) -> f32 {
    var acc = 0.0;
    switch qt {
        case QT_Q4K, QT_Q5K: { // blocks of 144 and 176 bytes: whole words
            let sm = mq_scale_min(second, b + 4u, j);
            let d1 = mq_half(second, b) * sm.x;
            let m1 = mq_half(second, b + 2u) * sm.y;
            let qw = (select(b + 16u, b + 48u, qt == QT_Q5K) + 32u * (j >> 1u)) >> 2u;
            let sh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>((j & 1u) * 4u);
            let hsh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(j);
            for (var k = 0u; k < 8u; k++) {
                var q = (vec4<u32>(mq_word(second, qw + k)) >> sh) & vec4<u32>(15u);
                if qt == QT_Q5K {
                    q |= ((vec4<u32>(mq_word(second, ((b + 16u) >> 2u) + k)) >> hsh) & vec4<u32>(1u)) << vec4<u32>(4u);
                }
                let v = d1 * vec4<f32>(q) - m1;
                let i = xi + 4u * k;
                acc += dot(v, vec4<f32>(x_at(i), x_at(i + 1u), x_at(i + 2u), x_at(i + 3u)));
            }
        }
        case QT_Q6K: { // elements l of sub-block (h, k): two 16-element scales
            let d = mq_half(second, b + 208u);
            let h = j >> 2u;
            let k = j & 3u;
            for (var half = 0u; half < 2u; half++) {
                let ds = d * f32(extractBits(bitcast<i32>(mq_byte(second, b + 192u + 8u * h + 2u * k + half)), 0u, 8u));
                for (var l = 16u * half; l < 16u * half + 16u; l++) {
                    let lo = (mq_byte(second, b + 64u * h + l + 32u * (k & 1u)) >> ((k >> 1u) * 4u)) & 15u;
                    let hi = (mq_byte(second, b + 128u + 32u * h + l) >> (2u * k)) & 3u;
                    acc += ds * f32(i32(lo | (hi << 4u)) - 32) * x_at(xi + l);
                }
            }
        }
        case QT_Q2K, QT_Q3K, QT_IQ4NL, QT_IQ4XS, QT_NVFP4, QT_TQ1_0, QT_TQ2_0: {
            for (var i = 0u; i < 32u; i++) {
                acc += mq_value(second, qt, b, 32u * j + i) * x_at(xi + i);
            }
        }
        case QT_Q8_0: { // d, 32 int8 (34-byte blocks: b is even)
            let d = mq_half(second, b);
            for (var i = 0u; i < 32u; i++) {
                acc += f32(extractBits(bitcast<i32>(mq_byte(second, b + 2u + i)), 0u, 8u)) * d * x_at(xi + i);
            }
        }
        case QT_MXFP4: { // e, 16 bytes of E2M1 codes (17-byte blocks: any b)
            let h = mq_e8m0_half(mq_byte(second, b));
            for (var l = 0u; l < 16u; l++) {
                let c = mq_byte(second, b + 1u + l);
                acc += mq_fp4(c & 15u) * h * x_at(xi + l);
                acc += mq_fp4(c >> 4u) * h * x_at(xi + l + 16u);
            }
        }
        default: { // Q4_1, Q5_0, Q5_1: one block of 32
            let d = mq_half(second, b);
            var m = 0.0;
            var qh = 0u;
            var qs = b + 4u;
            if qt == QT_Q5_0 {
                for (var i = 0u; i < 4u; i++) {
                    qh |= mq_byte(second, b + 2u + i) << (8u * i);
                }
                qs = b + 6u;
            } else if qt == QT_Q5_1 {
                m = mq_half(second, b + 2u);
                qh = mq_word(second, (b + 4u) >> 2u); // 24-byte blocks: b + 4 is a word
                qs = b + 8u;
            } else {
                m = mq_half(second, b + 2u);
            }
            for (var l = 0u; l < 16u; l++) {
                let c = mq_byte(second, qs + l);
                var lo = c & 15u;
                var hi = c >> 4u;
                if qt == QT_Q5_0 {
                    lo |= ((qh >> l) & 1u) << 4u;
                    hi |= ((qh >> (l + 16u)) & 1u) << 4u;
                    acc += f32(i32(lo) - 16) * d * x_at(xi + l) + f32(i32(hi) - 16) * d * x_at(xi + l + 16u);
                } else {
                    if qt == QT_Q5_1 {
                        lo |= ((qh >> l) & 1u) << 4u;
                        hi |= ((qh >> (l + 16u)) & 1u) << 4u;
                    }
                    acc += (f32(lo) * d + m) * x_at(xi + l) + (f32(hi) * d + m) * x_at(xi + l + 16u);
                }
            }
        }
    }
    return acc;
}

// mq_row_dot is this invocation's part of W[row]·x[xi ..] for a
// block-type expert matrix of n columns: the 32-element sub-blocks
// l, l + WG, ... (the workgroup's sum is the row's dot product).
fn mq_row_dot(second: bool, row: u32, n: u32, xi: u32, l: u32) -> f32 {
    let bl = qblock_len(p.qt);
    let bb = qblock_bytes(p.qt);
    let nb = n / bl;
    let per = bl / 32u;
    var acc = 0.0;
    for (var sb = l; sb < n / 32u; sb += WG) {
        let blk = sb / per;
        acc += mq_dot32(second, p.qt, (row * nb + blk) * bb, sb % per, xi + 32u * sb);
    }
    return acc;
}

// chosen reports whether expert e is among the first k selected of row t.
fn chosen(t: u32, k: u32, e: u32) -> bool {
    for (var j = 0u; j < k; j++) {
        if route[(t * p.used + j) * 2u] == e {
            return true;
        }
    }
    return false;
}

// route_row selects row t's experts into route[t] (see moe_route).
fn route_row(t: u32) {
    let base = t * p.experts;
    var mx = 0.0;
    var inv = 1.0;
    if p.gating == 0u {
        mx = x_at(base);
        for (var e = 1u; e < p.experts; e++) {
            mx = max(mx, x_at(base + e));
        }
        var sum = 0.0;
        for (var e = 0u; e < p.experts; e++) {
            sum += exp(x_at(base + e) - mx);
        }
        inv = 1.0 / sum;
    }
    let r0 = t * p.used * 2u; // route[r0 + 2k]: expert k, route[r0 + 2k + 1]: its weight
    var total = 0.0;
    for (var k = 0u; k < p.used; k++) {
        var best = 0xffffffffu;
        var bv = 0.0;
        for (var e = 0u; e < p.experts; e++) {
            if chosen(t, k, e) {
                continue;
            }
            var v = x_at(base + e);
            if p.gating == 0u {
                v = exp(v - mx) * inv;
            }
            if best == 0xffffffffu || v > bv {
                best = e;
                bv = v;
            }
        }
        route[r0 + 2u * k] = best;
        route[r0 + 2u * k + 1u] = bitcast<u32>(bv);
        total += bv;
    }
    if p.gating != 0u {
        // The softmax of the selected logits, the first their largest.
        let m = bitcast<f32>(route[r0 + 1u]);
        var sum = 0.0;
        for (var k = 0u; k < p.used; k++) {
            let v = exp(bitcast<f32>(route[r0 + 2u * k + 1u]) - m);
            route[r0 + 2u * k + 1u] = bitcast<u32>(v);
            sum += v;
        }
        let sinv = 1.0 / sum;
        total = 0.0;
        for (var k = 0u; k < p.used; k++) {
            let v = bitcast<f32>(route[r0 + 2u * k + 1u]) * sinv;
            route[r0 + 2u * k + 1u] = bitcast<u32>(v);
            total += v;
        }
    }
    if p.norm_topk != 0u {
        for (var k = 0u; k < p.used; k++) {
            let i = r0 + 2u * k + 1u;
            route[i] = bitcast<u32>(bitcast<f32>(route[i]) / total);
        }
    }
}

// The grouped lists follow the (expert, weight) pairs in route: offsets
// [experts + 1] (expert e's slots are list[offs[e] .. offs[e+1]]), then
// the list of slots (t * used + k), in increasing slot order per expert.
fn offs_at() -> u32 {
    return 2u * p.nrows * p.used;
}

fn list_at() -> u32 {
    return offs_at() + p.experts + 1u;
}

@compute @workgroup_size(64)
fn moe_route(@builtin(local_invocation_id) lid: vec3<u32>) {
    let l = lid.x;
    let rows = min(step[STEP_ROWS], p.nrows);
    for (var t = l; t < rows; t += WG) {
        route_row(t);
    }
    if p.grouped == 0u {
        return; // uniform
    }
    // Group the slots by expert: counts, their prefix sums (one
    // invocation: experts are few), then each expert's slots in order.
    storageBarrier();
    let slots = rows * p.used;
    let offs = offs_at();
    for (var e = l; e < p.experts; e += WG) {
        var n = 0u;
        for (var s = 0u; s < slots; s++) {
            n += select(0u, 1u, route[2u * s] == e);
        }
        route[offs + e + 1u] = n;
    }
    storageBarrier();
    if l == 0u {
        route[offs] = 0u;
        for (var e = 0u; e < p.experts; e++) {
            route[offs + e + 1u] += route[offs + e];
        }
    }
    storageBarrier();
    let list = list_at();
    for (var e = l; e < p.experts; e += WG) {
        var at = route[offs + e];
        for (var s = 0u; s < slots; s++) {
            if route[2u * s] == e {
                route[list + at] = s;
                at++;
            }
        }
    }
}

// wg_first and wg_n are the slots of a workgroup of moe_glu or moe_down
// (pairs): one slot per token mode, an expert's list when grouped.
var<workgroup> wg_first: u32;
var<workgroup> wg_n: u32;

// pairs returns how many slots the workgroup runs, uniformly, with their
// first position in wg_first: the slot (k, t) alone, or with grouped the
// list of expert g's slots (positions in the list).
fn pairs(l: u32, k: u32, t: u32, g: u32) -> u32 {
    if p.grouped == 0u {
        if !live(t) {
            return 0u;
        }
        if l == 0u {
            wg_first = t * p.used + k;
        }
        return 1u;
    }
    if l == 0u {
        let offs = offs_at();
        wg_first = list_at() + route[offs + g];
        wg_n = route[offs + g + 1u] - route[offs + g];
    }
    return workgroupUniformLoad(&wg_n);
}

// slot_at is the i-th slot of the workgroup.
fn slot_at(i: u32) -> u32 {
    if p.grouped == 0u {
        return wg_first;
    }
    return route[wg_first + i];
}

// reduce2 sums a and b over the workgroup: red[0] and red[WG] hold the
// sums after it returns (to every invocation).
fn reduce2(l: u32, a: f32, b: f32) {
    red[l] = a;
    red[WG + l] = b;
    workgroupBarrier();
    for (var n = WG / 2u; n > 0u; n >>= 1u) {
        if l < n {
            red[l] += red[l + n];
            red[WG + l] += red[WG + l + n];
        }
        workgroupBarrier();
    }
}

// glu_unit is the gated unit of gate product g and up product u of
// (expert-major) hidden row i: its biases added, then act(g) * u or
// swiglu_oai, as llama.cpp's CPU evaluates it: x = min(g, limit), y =
// clamp(u, -limit, limit), x / (1 + exp(alpha * -x)) * (y + 1).
fn glu_unit(i: u32, g0: f32, u0: f32) -> f32 {
    var g = g0;
    var u = u0;
    if (p.bias & MOE_BIAS_GATE) != 0u {
        if (p.bias & MOE_BIAS_S2) != 0u {
            g += bitcast<f32>(s2[p.gb_off + i]);
        } else {
            g += bitcast<f32>(s[p.gb_off + i]);
        }
    }
    if (p.bias & MOE_BIAS_UP) != 0u {
        u += bitcast<f32>(s2[p.ub_off + i]);
    }
    if p.oai != 0u {
        let x = min(g, p.limit);
        let y = clamp(u, -p.limit, p.limit);
        return x / (1.0 + exp(p.alpha * -x)) * (y + 1.0);
    }
    return apply_act(p.act, g) * u;
}

@compute @workgroup_size(64)
fn moe_glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wid.x;
    let l = lid.x;
    if r >= p.hidden {
        return; // uniform: the workgroup's row
    }
    let n = pairs(l, wid.y, wid.z, wid.y);
    workgroupBarrier(); // wg_first
    for (var i = 0u; i < n; i++) {
        let slot = slot_at(i);
        let t = slot / p.used;
        let row = route[slot * 2u] * p.hidden + r;
        var g = 0.0;
        var u = 0.0;
        if p.qt != 0u {
            g = mq_row_dot(false, row, p.cols, t * p.cols, l);
            u = mq_row_dot(true, row, p.cols, t * p.cols, l);
        } else {
            for (var c = l; c < p.cols; c += WG) {
                let xv = x_at(t * p.cols + c);
                g += expert_at(false, row, c, p.cols) * xv;
                u += expert_at(true, row, c, p.cols) * xv;
            }
        }
        reduce2(l, g, u);
        if l == 0u {
            out_set(slot * p.hidden + r, glu_unit(route[slot * 2u] * p.hidden + r, red[0], red[WG]));
        }
        workgroupBarrier(); // red is written again by the next slot's reduce2
    }
}

@compute @workgroup_size(64)
fn moe_down(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let j = wid.x;
    let l = lid.x;
    if j >= p.cols {
        return; // uniform: the workgroup's column
    }
    if p.grouped != 0u {
        // Expert wid.y's slots: out holds one row per slot, its
        // unweighted product (moe_sum weighs and sums them).
        let n = pairs(l, 0u, 0u, wid.y);
        workgroupBarrier();
        for (var i = 0u; i < n; i++) {
            let slot = slot_at(i);
            let d = down_dot(l, slot, j);
            if l == 0u {
                out_set(slot * p.cols + j, d);
            }
            workgroupBarrier();
        }
        return;
    }
    let t = wid.y;
    if !live(t) {
        return; // uniform: the workgroup's token
    }
    var acc = 0.0;
    for (var k = 0u; k < p.used; k++) {
        let slot = t * p.used + k;
        acc += bitcast<f32>(route[slot * 2u + 1u]) * down_dot(l, slot, j);
        workgroupBarrier(); // red is written again by the next slot's reduce2
    }
    if l == 0u {
        out_set(t * p.cols + j, acc);
    }
}

// down_dot is D_e[j]·hidden[slot] (+ the down bias, its row e) for the
// slot's expert e, to every invocation of the workgroup.
fn down_dot(l: u32, slot: u32, j: u32) -> f32 {
    let row = route[slot * 2u] * p.cols + j;
    var d = 0.0;
    if p.qt != 0u {
        d = mq_row_dot(false, row, p.hidden, slot * p.hidden, l);
    } else {
        for (var c = l; c < p.hidden; c += WG) {
            d += expert_at(false, row, c, p.hidden) * x_at(slot * p.hidden + c);
        }
    }
    reduce2(l, d, 0.0);
    if (p.bias & MOE_BIAS_DOWN) != 0u {
        return red[0] + bitcast<f32>(w2[row]);
    }
    return red[0];
}

// moe_sum (grouped mode's last step): out[t][j] = sum over k in order of
// weight_k * y[t][k][j], y (bound at x) being moe_down's per-slot
// products: the order and operations of moe_down's per-token sum.
// Dispatch (ceil(cols/64), nrows, 1).
@compute @workgroup_size(64)
fn moe_sum(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let t = gid.y;
    if j >= p.cols || !live(t) {
        return;
    }
    var acc = 0.0;
    for (var k = 0u; k < p.used; k++) {
        let slot = t * p.used + k;
        acc += bitcast<f32>(route[slot * 2u + 1u]) * x_at(slot * p.cols + j);
    }
    out_set(t * p.cols + j, acc);
}
