// Library snippet, not a family: a family's line "// include: kv_quant"
// is replaced by what follows (shaders.expandIncludes). The arithmetic of
// quantized caches (fusion.KVType: every block type): the
// Walsh-Hadamard rotation, the blocks and their dot products, with the
// same float32 operations as the CPU backend (internal/backend/cpu
// kvquant.go), so a store gives the CPU's blocks bit for bit.
//
// A quantized cache row (one head's keys, or values, at one slot) is
// kvq_words(type, head_dim) words: the quants of every block in ggml's
// byte order (kvq_block_words: q8_0's int8 element j in byte j%4 of word
// j/4; the others' nibbles, byte j of 16 holding element j low and j+16
// high, then the 5-bit types' high bits), then the scales: each block's
// binary16 d, two to a word (block b in half b%2 of word b/2), or for
// q4_1 and q5_1 a word per block of d and m. p.kv_quant packs the
// cache's types and rotations (shaders.KVQuant).

const KVQ_MAX: u32 = 256u; // the largest head dim of a quantized cache (the planner refuses more)

// The quantized kernels (attention_q, store_kv_q, store_kv_rope_q) read
// p.kv_quant once per workgroup through workgroup memory (kvq_begin, at
// the top of the entry point: every invocation calls it) and branch on
// that copy. The float kernels hold no quantized path at all: a software
// driver runs every path of a kernel (llvmpipe masks both sides of each
// branch), so a float-cache dispatch would pay for the block decoders
// (shaders/README.md).
var<workgroup> kvq_code_wg: u32;
var<private> kvq_code: u32;

// (It returns the code too: a value uniform to Tint's analysis, which a
// private variable is not, for branches around barriers.)
fn kvq_begin(i: u32) -> u32 {
    if i == 0u {
        kvq_code_wg = p.kv_quant;
    }
    let c = workgroupUniformLoad(&kvq_code_wg);
    kvq_code = c;
    return c;
}

fn kvq_ktype() -> u32 {
    return kvq_code & 15u;
}

fn kvq_vtype() -> u32 {
    return (kvq_code >> 4u) & 15u;
}

fn kvq_krot() -> u32 {
    return (kvq_code >> 8u) & 0xfffu;
}

fn kvq_vrot() -> u32 {
    return kvq_code >> 24u;
}

// kvq_half: the cache's float side (keys or values not quantized) holds
// binary16 pairs (fusion.KVSpec.F16), as in store_kv_f16's layout.
fn kvq_half() -> bool {
    return ((kvq_code >> 20u) & 1u) == 1u;
}

const KVQ_Q8_0: u32 = 1u; // fusion.KVQ8_0
const KVQ_Q4_0: u32 = 2u; // fusion.KVQ4_0
const KVQ_Q4_1: u32 = 3u; // fusion.KVQ4_1
const KVQ_Q5_0: u32 = 4u; // fusion.KVQ5_0
const KVQ_Q5_1: u32 = 5u; // fusion.KVQ5_1
const KVQ_IQ4NL: u32 = 6u; // fusion.KVIQ4NL

// The 16 levels of IQ4_NL (llama.cpp's kvalues_iq4nl).
const KVQ_IQ4NL_LEVELS = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// kvq_nl is IQ4_NL's level i (a local copy: wgpu's naga indexes no const
// array dynamically).
fn kvq_nl(i: u32) -> i32 {
    var lv = KVQ_IQ4NL_LEVELS;
    return lv[i];
}

// kvq_block_words is the quant words of one block of type ty: 8 int8
// words (q8_0), or 4 words of nibbles (byte j: element j low, j+16 high)
// and for the 5-bit types their u32 of high bits (bit j: element j's).
fn kvq_block_words(ty: u32) -> u32 {
    if ty == KVQ_Q8_0 {
        return 8u;
    }
    return select(4u, 5u, ty == KVQ_Q5_0 || ty == KVQ_Q5_1);
}

// kvq_min reports whether ty's blocks carry a minimum m (d*q + m): then
// each block's scales are one word (d low, m high), else two blocks' d
// share a word.
fn kvq_min(ty: u32) -> bool {
    return ty == KVQ_Q4_1 || ty == KVQ_Q5_1;
}

// kvq_words is the words of one row of hd values of type ty.
fn kvq_words(ty: u32, hd: u32) -> u32 {
    let nb = hd / 32u;
    return nb * kvq_block_words(ty) + select((nb + 1u) / 2u, nb, kvq_min(ty));
}

// kvq_scales is block b's (d, m) from the scale words of a row, sw being
// the word holding b's (kvq_scale_word).
fn kvq_scales(ty: u32, sw: u32, b: u32) -> vec2<f32> {
    let h = unpack2x16float(sw);
    if kvq_min(ty) {
        return h;
    }
    return vec2<f32>(h[b & 1u], 0.0);
}

// kvq_scale_word is the index within a row of hd values of block b's
// scale word.
fn kvq_scale_word(ty: u32, hd: u32, b: u32) -> u32 {
    return hd / 32u * kvq_block_words(ty) + select(b / 2u, b, kvq_min(ty));
}

// kvq_level is the level of element j (0..31) of a 4- or 5-bit block,
// nw being the nibble word holding byte j%16 and qh the high bits: the
// nibble (or 5 bits) less 8 (q4_0) or 16 (q5_0), as is for the _1 types,
// IQ4_NL's level of the nibble for iq4_nl.
fn kvq_level(ty: u32, nw: u32, qh: u32, j: u32) -> i32 {
    var n = (nw >> (8u * (j % 4u) + 4u * (j / 16u))) & 15u;
    if ty == KVQ_Q5_0 || ty == KVQ_Q5_1 {
        n |= ((qh >> j) & 1u) << 4u;
    }
    if ty == KVQ_Q4_0 {
        return i32(n) - 8;
    }
    if ty == KVQ_IQ4NL {
        return kvq_nl(n);
    }
    if ty == KVQ_Q5_0 {
        return i32(n) - 16;
    }
    return i32(n);
}

// kvq_quant quantizes block b of x to type ty (kvq_quant8, kvq_quant4,
// kvq_quant_min, kvq_quant_nl), its quants into q, its scale bits returned (d; with a
// minimum d | m << 16).
fn kvq_quant(ty: u32, x: ptr<function, array<f32, 256>>, b: u32, q: ptr<function, array<u32, 8>>) -> u32 {
    if ty == KVQ_Q8_0 {
        return kvq_quant8(x, b, q);
    }
    if kvq_min(ty) {
        return kvq_quant_min(ty, x, b, q);
    }
    if ty == KVQ_IQ4NL {
        return kvq_quant_nl(x, b, q);
    }
    return kvq_quant4(ty, x, b, q);
}

// kvq_quant_min quantizes block b of x to q4_1 or q5_1 as llama.cpp's
// quantize_row_q4_1_ref / q5_1_ref: lo and hi its extremes, d = (hi -
// lo)/15 (31), q = trunc((x - lo)/d + 0.5) (q4_1: at most 15), the
// divisions exact.
fn kvq_quant_min(ty: u32, x: ptr<function, array<f32, 256>>, b: u32, q: ptr<function, array<u32, 8>>) -> u32 {
    var lo = 3.4028234e38;
    var hi = -3.4028234e38;
    for (var j = 0u; j < 32u; j++) {
        lo = min(lo, (*x)[32u * b + j]);
        hi = max(hi, (*x)[32u * b + j]);
    }
    let five = ty == KVQ_Q5_1;
    var d = 0.0;
    var id = 0.0;
    if hi - lo > 0.0 {
        d = kvq_div(hi - lo, select(15.0, 31.0, five));
        id = kvq_div(1.0, d);
    }
    var qh = 0u;
    for (var w = 0u; w < 4u; w++) {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * w + k;
            var a = u32(i32(((*x)[32u * b + j] - lo) * id + 0.5));
            var c = u32(i32(((*x)[32u * b + j + 16u] - lo) * id + 0.5));
            if five {
                a = a & 0xffu;
                c = c & 0xffu;
                qh |= (((a >> 4u) & 1u) << j) | (((c >> 4u) & 1u) << (j + 16u));
            } else {
                a = min(15u, a);
                c = min(15u, c);
            }
            word |= ((a & 15u) | ((c & 15u) << 4u)) << (8u * k);
        }
        (*q)[w] = word;
    }
    (*q)[4] = qh;
    return pack2x16float(vec2<f32>(d, lo));
}

// kvq_sdiv is a / b for nonzero b, either sign, as kvq_div.
fn kvq_sdiv(a: f32, b: f32) -> f32 {
    if a == 0.0 {
        return a / b;
    }
    let q = kvq_div(abs(a), abs(b));
    return select(q, -q, (a < 0.0) != (b < 0.0));
}

// kvq_best_nl is llama.cpp's best_index_int8 over the IQ4_NL levels: the
// nearest level's index (a binary search, then the nearer neighbour).
fn kvq_best_nl(x: f32) -> u32 {
    if x <= f32(kvq_nl(0u)) {
        return 0u;
    }
    if x >= f32(kvq_nl(15u)) {
        return 15u;
    }
    var ml = 0u;
    var mu = 15u;
    while mu - ml > 1u {
        let mav = (ml + mu) / 2u;
        if x < f32(kvq_nl(mav)) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - f32(kvq_nl(mu - 1u)) < f32(kvq_nl(mu)) - x {
        return mu - 1u;
    }
    return mu;
}

// kvq_quant_nl quantizes block b of x to iq4_nl as llama.cpp's
// quantize_row_iq4_nl_ref (one block, no importance weights): the levels
// nearest x/d for d = mx/-127, then the scale refit by least squares
// weighted by x² (sumqx/sumq2), the divisions exact.
fn kvq_quant_nl(x: ptr<function, array<f32, 256>>, b: u32, q: ptr<function, array<u32, 8>>) -> u32 {
    var amax = 0.0;
    var mx = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[32u * b + j];
        if abs(v) > amax {
            amax = abs(v);
            mx = v;
        }
    }
    var l: array<u32, 32>;
    var scale = 0.0;
    if amax >= 1e-15 {
        let d = kvq_sdiv(mx, -127.0);
        let id = kvq_sdiv(1.0, d);
        var sumqx = 0.0;
        var sumq2 = 0.0;
        for (var j = 0u; j < 32u; j++) {
            let v = (*x)[32u * b + j];
            let k = kvq_best_nl(id * v);
            l[j] = k;
            let lv = f32(kvq_nl(k));
            let w = v * v;
            sumqx += w * lv * v;
            sumq2 += w * lv * lv;
        }
        if sumq2 > 0.0 {
            scale = kvq_sdiv(sumqx, sumq2);
        }
    }
    for (var w = 0u; w < 4u; w++) {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * w + k;
            word |= (l[j] | (l[j + 16u] << 4u)) << (8u * k);
        }
        (*q)[w] = word;
    }
    return pack2x16float(vec2<f32>(scale, 0.0)) & 0xffffu;
}

// kvq_quant4 quantizes block b of x to q4_0 or q5_0 as llama.cpp's
// quantize_row_q4_0_ref / q5_0_ref: mx the value of largest magnitude
// (the first), d = mx/-8 (-16), q = min(15, trunc(x/d + 8.5)) (31, 16.5)
// with 1/d exact, elements j and j+16 in the low and high nibbles of byte
// j (the first 4 words of q), q5_0's fifth bits in word 4.
fn kvq_quant4(ty: u32, x: ptr<function, array<f32, 256>>, b: u32, q: ptr<function, array<u32, 8>>) -> u32 {
    var amax = 0.0;
    var mx = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[32u * b + j];
        if amax < abs(v) {
            amax = abs(v);
            mx = v;
        }
    }
    let five = ty == KVQ_Q5_0;
    let d = mx * select(-0.125, -0.0625, five); // mx / -8 or -16, exact
    let top = select(15, 31, five);
    let half = select(8.5, 16.5, five);
    var id = 0.0;
    if d != 0.0 {
        id = kvq_div(1.0, abs(d));
        if d < 0.0 {
            id = -id;
        }
    }
    var qh = 0u;
    for (var w = 0u; w < 4u; w++) {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * w + k;
            let a = u32(min(top, i32((*x)[32u * b + j] * id + half)));
            let c = u32(min(top, i32((*x)[32u * b + j + 16u] * id + half)));
            qh |= (((a >> 4u) & 1u) << j) | (((c >> 4u) & 1u) << (j + 16u));
            word |= ((a & 15u) | ((c & 15u) << 4u)) << (8u * k);
        }
        (*q)[w] = word;
    }
    (*q)[4] = qh;
    return pack2x16float(vec2<f32>(d, 0.0)) & 0xffffu;
}

// kvq_div is a / b (positive normal floats) correctly rounded, as the
// CPU's division is (WGSL's may be 2.5 ulps off): the quotient of the
// significands by long division, rounded half to even. A quotient out of
// the normal range takes the device's division.
fn kvq_div(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = ua >> 23u;
    let eb = ub >> 23u;
    if ea == 0u || eb == 0u || ea == 255u || eb == 255u {
        return a / b;
    }
    let mb = (ub & 0x7fffffu) | 0x800000u;
    var r = (ua & 0x7fffffu) | 0x800000u;
    var e = i32(ea) - i32(eb) + 127;
    if r < mb {
        r = r << 1u;
        e -= 1;
    }
    var q = 0u;
    for (var i = 0u; i < 25u; i++) {
        q = q << 1u;
        if r >= mb {
            r -= mb;
            q |= 1u;
        }
        r = r << 1u;
    }
    let guard = q & 1u;
    q = q >> 1u;
    if guard == 1u && (r != 0u || (q & 1u) == 1u) {
        q += 1u;
    }
    if q == 0x1000000u {
        q = q >> 1u;
        e += 1;
    }
    if e <= 0 || e >= 255 {
        return a / b;
    }
    return bitcast<f32>((u32(e) << 23u) | (q & 0x7fffffu));
}

// kvq_rotate multiplies every run of n values of x[0:len] (n a power of
// two) by H_n/sqrt(n), as the CPU's hadamard: each value scaled by
// float32(1/sqrt(n)) first (exact for the powers of two n takes: 2^-k/2,
// or f32(1/sqrt 2) times one), then the butterflies (a+b, a-b) over
// strides 1, 2, 4, ...
fn kvq_rotate(x: ptr<function, array<f32, 256>>, len: u32, n: u32) {
    let k = countTrailingZeros(n);
    var scale = ldexp(1.0, -i32(k / 2u));
    if (k & 1u) == 1u {
        scale *= bitcast<f32>(0x3f3504f3u); // f32(1/sqrt 2)
    }
    for (var i = 0u; i < len; i++) {
        (*x)[i] *= scale;
    }
    for (var r = 0u; r < len; r += n) {
        for (var h = 1u; h < n; h *= 2u) {
            for (var i = 0u; i < n; i += 2u * h) {
                for (var j = r + i; j < r + i + h; j++) {
                    let a = (*x)[j];
                    let b = (*x)[j + h];
                    (*x)[j] = a + b;
                    (*x)[j + h] = a - b;
                }
            }
        }
    }
}

// kvq_quant8 quantizes block b of x (values 32b..32b+31) to q8_0 as the
// CPU's stores and query quantization do (llama.cpp's x86
// quantize_row_q8_0): d = f16(amax/127), q = round-half-even(x*127/amax)
// (0 for an all-zero block), the quants into q (four to a word), d's
// binary16 bits returned.
fn kvq_quant8(x: ptr<function, array<f32, 256>>, b: u32, q: ptr<function, array<u32, 8>>) -> u32 {
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs((*x)[32u * b + j]));
    }
    var id = 0.0;
    var dbits = 0u;
    if amax != 0.0 {
        id = kvq_div(127.0, amax);
        dbits = pack2x16float(vec2<f32>(kvq_div(amax, 127.0), 0.0)) & 0xffffu;
    }
    for (var w = 0u; w < 8u; w++) {
        var word = 0u;
        for (var j = 0u; j < 4u; j++) {
            let v = i32(round((*x)[32u * b + 4u * w + j] * id));
            word |= (u32(v) & 0xffu) << (8u * j);
        }
        (*q)[w] = word;
    }
    return dbits;
}

// kvq_dot4 is the dot product of the four int8 values of word a with
// those of word b.
fn kvq_dot4(a: u32, b: u32) -> i32 {
    var s = 0;
    for (var j = 0u; j < 4u; j++) {
        s += (bitcast<i32>(a << (24u - 8u * j)) >> 24u) * (bitcast<i32>(b << (24u - 8u * j)) >> 24u);
    }
    return s;
}

// kvq_i8 is int8 j of word w.
fn kvq_i8(w: u32, j: u32) -> f32 {
    return f32(bitcast<i32>(w << (24u - 8u * j)) >> 24u);
}
