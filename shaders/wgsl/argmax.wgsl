// argmax: out[0] = the index of the largest of the first n values of x, as
// an f32 (exact below 2^24), the lowest index on ties as a host loop
// scanning upward would pick; NaNs are never picked, and when every value is
// NaN (or n is 0) out[0] is 0, as internal/sampler.Greedy answers. -inf can
// win. One workgroup; dispatch (1, 1, 1). This is fusion.Argmax: greedy
// sampling on the device, so only the token id is read back. With no rows
// to run (step word 1 is 0: a step of a multi-step submission that its
// advance kernel turned into a no-op after a stop id, wgsl/step.wgsl) it
// returns at once and leaves out as it was, as the sample kernel does.
// The tokens the program's mask rules out (lib/token_mask.wgsl) read as
// -inf. With p.advance set (a decode program's step tensor, a
// shaders.DecodeStep), invocation 0 then advances the step as wgsl/step.wgsl
// does (lib/step_advance.wgsl): a multi-step submission needs no advance
// dispatch after it.

struct ArgmaxParams {
    n: u32,
    advance: u32, // 1: advance the step tensor (a DecodeStep) after the pick
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: ArgmaxParams;
@group(0) @binding(1) var<storage, read_write> step: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;

// include: token_mask
// include: step_advance

const WG: u32 = 64u;
// NONE marks "no candidate yet": every real index is below it.
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

// better: a candidate v at index i (i != NONE, v not NaN) beats bv at bi.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return bi == NONE || v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(64)
fn argmax(@builtin(local_invocation_id) lid: vec3<u32>) {
    let l = lid.x;
    if step_word_uniform(l, STEP_ROWS) == 0u {
        return; // uniform: no row to scan
    }
    load_mask();
    var bv = 0.0;
    var bi = NONE;
    for (var i = l; i < p.n; i += WG) {
        let v = logit(i);
        // v == v is false only for NaN.
        if v == v && better(v, i, bv, bi) {
            bv = v;
            bi = i;
        }
    }
    best_v[l] = bv;
    best_i[l] = bi;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if l < h {
            let oi = best_i[l + h];
            if oi != NONE && better(best_v[l + h], oi, best_v[l], best_i[l]) {
                best_v[l] = best_v[l + h];
                best_i[l] = oi;
            }
        }
        workgroupBarrier();
    }
    if l == 0u {
        var id = best_i[0];
        if id == NONE {
            id = 0u;
        }
        out[0] = f32(id);
        advance_step(id);
    }
}
