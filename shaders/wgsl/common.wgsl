// common.wgsl is prepended to every kernel family before compilation (WGSL
// has no includes). It holds the weight decoding and the activations shared
// by the kernels.
//
// Weights and scales are bound as arrays of u32 words so one source serves
// every stored type without the f16 extension (wgpu-native's naga 0.19 lacks
// it): f16 via unpack2x16float, bf16 by shifting the half into the high bits,
// int8/int4 by sign-extending bit extraction.

// The weight and scale type codes (WT_*, ST_*) are generated from
// shaders/codes.go and prepended before this file.

// word_of is the index of the u32 word holding element e.
fn word_of(e: u32, wt: u32) -> u32 {
    if wt == WT_F16 || wt == WT_BF16 {
        return e >> 1u;
    }
    if wt == WT_I8 {
        return e >> 2u;
    }
    if wt == WT_I4 {
        return e >> 3u;
    }
    return e;
}

// decode extracts element e from its word.
fn decode(word: u32, e: u32, wt: u32) -> f32 {
    if wt == WT_F16 {
        let h = unpack2x16float(word);
        return select(h.x, h.y, (e & 1u) == 1u);
    }
    if wt == WT_BF16 {
        return bitcast<f32>((word >> ((e & 1u) * 16u)) << 16u);
    }
    if wt == WT_I8 {
        return f32(extractBits(bitcast<i32>(word), (e & 3u) * 8u, 8u));
    }
    if wt == WT_I4 {
        return f32(extractBits(bitcast<i32>(word), (e & 7u) * 4u, 4u));
    }
    return bitcast<f32>(word);
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

// erf_approx: Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7.
fn erf_approx(x: f32) -> f32 {
    let z = abs(x);
    let k = 1.0 / (1.0 + 0.3275911 * z);
    let poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// to_f16 rounds to the nearest binary16 value.
fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// half_at is element i of packed binary16 activations (element i is the
// low half of word i/2 when i is even, the high half when odd), w being
// that word.
fn half_at(w: u32, i: u32) -> f32 {
    let h = unpack2x16float(w);
    return select(h.x, h.y, (i & 1u) == 1u);
}

// act_value is element i of an activation from the word w holding it:
// with h (an f16 activation) the half of w i's parity picks, else w's f32
// bits. Kernels load one word, at i or, with h, i/2, and pick here with a
// select: one load whatever the policy, and both conversions cost less
// than a branch would save.
fn act_value(w: u32, i: u32, h: bool) -> f32 {
    return select(bitcast<f32>(w), half_at(w, i), h);
}

// half_bits is v stored as element i of packed binary16 activations (an
// f16 activation, fusion.BufInfo.F16): v rounded to binary16, saturating
// at +-65504 first (pack2x16float leaves values past the largest finite
// half indeterminate; the f16 KV cache saturates the same way), shifted to
// i's half of the word. WGSL lets the rounding go to either neighbour;
// lavapipe and SwiftShader round to the nearest (ties to even), as the CPU
// reference does.
fn half_bits(v: f32, i: u32) -> u32 {
    let h = pack2x16float(vec2<f32>(clamp(v, -65504.0, 65504.0), 0.0)) & 0xffffu;
    return h << ((i & 1u) * 16u);
}

// gelu_tanh is the tanh approximation of GELU as llama.cpp's CPU backend (and
// so the CPU reference, internal/backend/cpu) evaluates it: the input rounded to binary16,
// the f32 formula, the result rounded to binary16; inputs <= -10 give 0 and
// inputs >= 10 pass through.
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

// apply_act applies activation act (an ACT_* code).
fn apply_act(act: u32, v: f32) -> f32 {
    if act == ACT_SILU {
        return v / (1.0 + exp(-v));
    }
    if act == ACT_GELU_TANH {
        return gelu_tanh(v);
    }
    if act == ACT_GELU {
        return 0.5 * v * (1.0 + erf_approx(v * 0.7071067812));
    }
    return max(v, 0.0); // ACT_RELU
}
