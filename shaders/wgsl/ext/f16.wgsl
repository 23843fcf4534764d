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

// mvh is the dot products of vec4 q of chunks a, b, c and d (rows r0 ..
// r0+3 of one matrix) with activations xv, in f16, widened to f32; s
// holds their scales in that order.
fn mvh(a: vec4<u32>, b: vec4<u32>, c: vec4<u32>, d: vec4<u32>, q: u32, s: vec4<f16>, xv: vec4<f16>) -> vec4<f32> {
    return vec4<f32>(vec4<f16>(dot(dqh(a, q, s.x), xv), dot(dqh(b, q, s.y), xv), dot(dqh(c, q, s.z), xv), dot(dqh(d, q, s.w), xv)));
}

// mvh_chunk adds mvh of the EPW activation vec4s of one chunk (xi the
// first) to acc, one after another.
fn mvh_chunk(acc: ptr<function, vec4<f32>>, a: vec4<u32>, b: vec4<u32>, c: vec4<u32>, d: vec4<u32>, s: vec4<f16>, xi: u32) {
    // Unrolled with constant indices, as in lanes_part.
    *acc += mvh(a, b, c, d, 0u, s, x_h[xi]);
    if EPW > 1u {
        *acc += mvh(a, b, c, d, 1u, s, x_h[xi + 1u]);
    }
    if EPW > 2u {
        *acc += mvh(a, b, c, d, 2u, s, x_h[xi + 2u]);
        *acc += mvh(a, b, c, d, 3u, s, x_h[xi + 3u]);
    }
    if EPW > 4u {
        *acc += mvh(a, b, c, d, 4u, s, x_h[xi + 4u]);
        *acc += mvh(a, b, c, d, 5u, s, x_h[xi + 5u]);
        *acc += mvh(a, b, c, d, 6u, s, x_h[xi + 6u]);
        *acc += mvh(a, b, c, d, 7u, s, x_h[xi + 7u]);
    }
}

// lanes_partial_h is lanes_part (without the prologue) in f16 arithmetic: dequantization
// and the dot products of 4 elements in f16, their sums in f32.
fn lanes_partial_h(t: u32, r0: u32, lane: u32, lanes: u32, hi: ptr<function, vec4<f32>>) -> vec4<f32> {
    var acc = vec4<f32>(0.0); // as lanes_part's
    var acc2 = vec4<f32>(0.0);
    if r0 < p.rows {
        let last = p.rows - 1u;
        let r1 = min(r0 + 1u, last);
        let r2 = min(r0 + 2u, last);
        let r3 = min(r0 + 3u, last);
        let cpr = p.in_cols / CW;
        let xb = t * (p.in_cols / 4u);
        for (var j = lane; j < cpr; j += lanes) {
            let b = (j * CW) / p.block;
            let s0 = scales(r0 * p.nblocks + b);
            let s1 = scales(r1 * p.nblocks + b);
            let s2 = scales(r2 * p.nblocks + b);
            let s3 = scales(r3 * p.nblocks + b);
            let xi = xb + j * EPW;
            mvh_chunk(&acc, w[r0 * cpr + j], w[r1 * cpr + j], w[r2 * cpr + j], w[r3 * cpr + j],
                      vec4<f16>(vec4<f32>(s0.x, s1.x, s2.x, s3.x)), xi);
            if GLU {
                mvh_chunk(&acc2, w2[r0 * cpr + j], w2[r1 * cpr + j], w2[r2 * cpr + j], w2[r3 * cpr + j],
                          vec4<f16>(vec4<f32>(s0.y, s1.y, s2.y, s3.y)), xi);
            }
        }
    }
    *hi = acc2;
    return acc;
}

// matvec_sg_h: matvec_sg with lanes_partial_h.
@compute @workgroup_size(LV_WG)
fn matvec_sg_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) sgi: u32,
               @builtin(subgroup_size) sgs: u32, @builtin(subgroup_id) sgid: u32) {
    let t = wid.x; // as matvec_lanes (lanes_mv): one row of the step
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let g = sg_group(wid, sgi, sgs, sgid);
    var hi = vec4<f32>(0.0);
    let lo = lanes_partial_h(t, g.x, g.y, g.z, &hi);
    sg_finish(t, g, lo, hi, 0.0, sgi, sgs, sgid); // no norm prologue (SG_NORM false)
}
