// common.wgsl is prepended to every kernel family before compilation (WGSL
// has no includes). It holds the weight decoding shared by all kernels.
//
// Weights and scales are bound as arrays of u32 words so one source serves
// every stored type without the f16 extension (wgpu-native's naga 0.19 lacks
// it): f16 via unpack2x16float, bf16 by shifting the half into the high bits,
// int8/int4 by sign-extending bit extraction.

// Weight element types; the host (gpu/kernels) uses the same codes.
const WT_F32: u32 = 0u;
const WT_F16: u32 = 1u;
const WT_BF16: u32 = 2u;
const WT_I8: u32 = 3u;
const WT_I4: u32 = 4u;

// Scale types.
const ST_F32: u32 = 0u;
const ST_F16: u32 = 1u;

// word_of is the index of the u32 word holding element e.
fn word_of(e: u32, wt: u32) -> u32 {
    var w = e;
    switch wt {
        case 1u, 2u: { w = e >> 1u; }
        case 3u: { w = e >> 2u; }
        case 4u: { w = e >> 3u; }
        default: {}
    }
    return w;
}

// decode extracts element e from its word.
fn decode(word: u32, e: u32, wt: u32) -> f32 {
    var v = 0.0;
    switch wt {
        case 1u: {
            let h = unpack2x16float(word);
            v = select(h.x, h.y, (e & 1u) == 1u);
        }
        case 2u: { v = bitcast<f32>((word >> ((e & 1u) * 16u)) << 16u); }
        case 3u: { v = f32(extractBits(bitcast<i32>(word), (e & 3u) * 8u, 8u)); }
        case 4u: { v = f32(extractBits(bitcast<i32>(word), (e & 7u) * 4u, 4u)); }
        default: { v = bitcast<f32>(word); }
    }
    return v;
}

// decode_scale reads scale i from a scale array word.
fn decode_scale(word: u32, i: u32, st: u32) -> f32 {
    if st == ST_F16 {
        let h = unpack2x16float(word);
        return select(h.x, h.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(word);
}

// scale_word is the index of the word holding scale i.
fn scale_word(i: u32, st: u32) -> u32 {
    return select(i, i >> 1u, st == ST_F16);
}

// tanh_safe avoids the inf/inf of exp-based tanh implementations for large
// arguments: |x| > 10 is +-1 in f32 anyway.
fn tanh_safe(x: f32) -> f32 {
    if abs(x) > 10.0 {
        return sign(x);
    }
    return tanh(x);
}
