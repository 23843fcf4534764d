enable f16;

// f16 arithmetic for the decode matvec, appended after wgsl/ext/subgroups.wgsl
// in the Vulkan-only "_sg_h" variants (shaders.MatMulVariant.F16): the host
// picks them only on a device reporting shaderFloat16 (gpu.Info.F16), for
// f16 activations (the model's activation policy), and never on WebGPU,
// whose naga has no f16. naga's `enable f16;` modules declare
// StorageInputOutput16, which spirvgen's DropUnusedCapabilities removes.
// (naga 30 miscompiles bitcasts between u32 and vec2<f16>, so the halves
// are read through an f16 view of the binding, never bitcast.)

// x_h is matmul.wgsl's x (binding 2) seen as f16: x holds packed halves
// here, so activation vec4 i (elements 4i..4i+3) is x_h[i].
@group(0) @binding(2) var<storage, read> x_h: array<vec4<f16>>;

// dqh is vec4 q of chunk v in f16 times the scale sc: with the scale
// folded in, products and the sums of a chunk have the magnitude of the
// real weights' products, far from f16's limit (65504) where int8 codes
// times activations would not be.
fn dqh(v: vec4<u32>, q: u32, sc: f16) -> vec4<f16> {
    if WT == WT_I8 {
        return vec4<f16>(i8x4(v[q])) * sc;
    }
    if WT == WT_I4 {
        return vec4<f16>(i4x4(v, q)) * sc;
    }
    return vec4<f16>(dq(v, q)) * sc;
}

// mvh is the dot products of vec4 q of chunks v0, u0 (row r0's W, W2)
// and v1, u1 (row r1's) with activations xv, in f16, widened to f32:
// (r0 W, r0 W2, r1 W, r1 W2), W2's zero without GLU; s holds the scales
// in that order.
fn mvh(v0: vec4<u32>, u0: vec4<u32>, v1: vec4<u32>, u1: vec4<u32>, q: u32, s: vec4<f16>, xv: vec4<f16>) -> vec4<f32> {
    if GLU {
        return vec4<f32>(vec4<f16>(dot(dqh(v0, q, s.x), xv), dot(dqh(u0, q, s.y), xv), dot(dqh(v1, q, s.z), xv), dot(dqh(u1, q, s.w), xv)));
    }
    return vec4<f32>(f32(dot(dqh(v0, q, s.x), xv)), 0.0, f32(dot(dqh(v1, q, s.z), xv)), 0.0);
}

// lanes_partial_h is lanes_partial in f16 arithmetic: dequantization
// and the dot products of 4 elements in f16, their sums in f32.
fn lanes_partial_h(t: u32, r0: u32, lane: u32, lanes: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0); // (r0 W, r0 W2, r1 W, r1 W2)
    if r0 < p.rows {
        let r1 = min(r0 + 1u, p.rows - 1u);
        let cpr = p.in_cols / CW;
        let xb = t * (p.in_cols / 4u);
        for (var j = lane; j < cpr; j += lanes) {
            let b = (j * CW) / p.block;
            let s = vec4<f16>(vec4<f32>(scales(r0 * p.nblocks + b), scales(r1 * p.nblocks + b)));
            let v0 = w[r0 * cpr + j];
            let v1 = w[r1 * cpr + j];
            var u0 = v0;
            var u1 = v1;
            if GLU {
                u0 = w2[r0 * cpr + j];
                u1 = w2[r1 * cpr + j];
            }
            // Unrolled with constant indices, as in lanes_part.
            let xi = xb + j * EPW;
            acc += mvh(v0, u0, v1, u1, 0u, s, x_h[xi]);
            if EPW > 1u {
                acc += mvh(v0, u0, v1, u1, 1u, s, x_h[xi + 1u]);
            }
            if EPW > 2u {
                acc += mvh(v0, u0, v1, u1, 2u, s, x_h[xi + 2u]);
                acc += mvh(v0, u0, v1, u1, 3u, s, x_h[xi + 3u]);
            }
            if EPW > 4u {
                acc += mvh(v0, u0, v1, u1, 4u, s, x_h[xi + 4u]);
                acc += mvh(v0, u0, v1, u1, 5u, s, x_h[xi + 5u]);
                acc += mvh(v0, u0, v1, u1, 6u, s, x_h[xi + 6u]);
                acc += mvh(v0, u0, v1, u1, 7u, s, x_h[xi + 7u]);
            }
        }
    }
    return acc;
}

// matvec_sg_h: matvec_sg with lanes_partial_h.
@compute @workgroup_size(64)
fn matvec_sg_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) sgi: u32,
               @builtin(subgroup_size) sgs: u32, @builtin(subgroup_id) sgid: u32) {
    let t = wid.x; // as matvec_lanes (lanes_mv): one row of the step
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let g = sg_group(wid, sgi, sgs, sgid);
    sg_finish(t, g, lanes_partial_h(t, g.x, g.y, g.z), sgi, sgs, sgid);
}
