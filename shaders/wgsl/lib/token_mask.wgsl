// Library snippet, not a family: a family's line "// include: token_mask"
// is replaced by what follows (shaders.expandIncludes). The family binds
// the logits row as x and the program's token mask as mask.
//
// The token mask (gpu.TokenMasker; layout: shaders.TokenMaskWords): word 0
// is 1 while a mask is set, word 1 the bits of -inf, and from word 2 on bit
// i % 32 of word 2 + i / 32 allows token i. Without a mask every token is
// allowed; with one, a token it does not allow reads as -inf, as the host
// sets the logits of the tokens a grammar rules out (pipeline/constrain).

var<private> masked: bool;
var<private> neg_inf: f32;

// load_mask reads the mask's header; the kernel calls it before logit.
fn load_mask() {
    masked = mask[0] != 0u;
    neg_inf = bitcast<f32>(mask[1]);
}

// logit is x[i], or -inf where the mask rules token i out.
fn logit(i: u32) -> f32 {
    if masked && (mask[2u + (i >> 5u)] & (1u << (i & 31u))) == 0u {
        return neg_inf;
    }
    return x[i];
}
