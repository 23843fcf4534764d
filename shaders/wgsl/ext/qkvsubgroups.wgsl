enable subgroups;

// lanes_rope_kv_sg: lanes_rope_kv (same dispatch, units and lane groups)
// with the lanes' sums and sums of squares reduced through
// subgroupShuffleXor, as matvec_sg reduces matvec_lanes': appended to
// wgsl/qkv.wgsl in the "_sg" variants (shaders.MatMulVariant.RopeKVVariant
// with Subgroups), for Vulkan and the browsers' WebGPU. A lane group no
// larger than a subgroup reduces in registers with no barrier; a larger
// one adds its subgroups' sums through red and red_ss (one barrier).
// Invocations are numbered by subgroup (vi = subgroup id * size + lane in
// the subgroup), so each lane group lies within one subgroup or spans
// whole subgroups. Needs a subgroup size from 4 to 64 that divides LV_WG
// or holds the whole workgroup (the host checks).
@compute @workgroup_size(LV_WG)
fn lanes_rope_kv_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) sgi: u32,
                    @builtin(subgroup_size) sgs: u32, @builtin(subgroup_id) sgid: u32) {
    let t = wid.y;
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    // p.lanes, not a value built from the invocation's ids: the barrier
    // below needs a uniform condition.
    let lanes = p.lanes;
    let vi = sgid * sgs + sgi;
    let lane = vi & (lanes - 1u);
    let u = rope_unit(wid.x * (LV_WG / lanes) + vi / lanes);
    var ss4 = vec4<f32>(0.0);
    var v = unit_part(u, t, lane, lanes, &ss4);
    var ss = (ss4.x + ss4.y) + (ss4.z + ss4.w);
    for (var h = min(lanes, sgs) / 2u; h > 0u; h = h / 2u) {
        v += subgroupShuffleXor(v, h);
        ss += subgroupShuffleXor(ss, h);
    }
    if lanes > sgs {
        // Each subgroup's sums are in its first lane; the lane group
        // spans subgroups [sgid, sgid + lanes / sgs) from its lane 0's.
        if sgi == 0u {
            red[sgid] = v;
            red_ss[sgid] = ss;
        }
        workgroupBarrier();
        if lane == 0u {
            var sum = vec4<f32>(0.0);
            var sum_ss = 0.0;
            for (var k = 0u; k < lanes / sgs; k++) {
                sum += red[sgid + k];
                sum_ss += red_ss[sgid + k];
            }
            v = sum;
            ss = sum_ss;
        }
    }
    finish_unit(u, t, v, ss, lane == 0u);
}
