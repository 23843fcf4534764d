// Library snippet, not a family: a family's line "// include: pack_pair"
// is replaced by what follows (shaders.expandIncludes). The f16 caches
// (kv.wgsl, ropekv.wgsl, qkv.wgsl) store binary16 pairs with it.

// HALF_MAX is the largest finite binary16. Packing a value beyond it is
// indeterminate in WGSL, so values saturate to it (the CPU backend does the
// same); within range pack2x16float rounds to a neighbouring half (to
// nearest even on every driver we know).
const HALF_MAX: f32 = 65504.0;

// pack_pair packs x into the low half and y into the high half of a word,
// saturated to the binary16 range.
fn pack_pair(x: f32, y: f32) -> u32 {
    return pack2x16float(clamp(vec2<f32>(x, y), vec2<f32>(-HALF_MAX), vec2<f32>(HALF_MAX)));
}
