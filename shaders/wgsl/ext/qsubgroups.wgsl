enable subgroups;

// qmatvec with subgroup operations, appended to wgsl/qblocks.wgsl in the
// "_sg" variants (shaders.QBlockVariant.Subgroups), as subgroups.wgsl is to
// matmul.wgsl (Vulkan and the browsers' WebGPU).

// qmatvec_sg: qmatvec (same dispatch and lane groups) with each lane
// group's partial sums (a vec4: its QV_ROWS rows) added through
// subgroupShuffleXor in registers; a group of lanes larger than the
// subgroup adds its subgroups' sums through qred (one barrier). Invocations are numbered by subgroup (vi = subgroup id *
// size + lane in the subgroup), so every lane group lies within one
// subgroup or spans whole subgroups. Needs a subgroup size from 4 to 64
// (the host checks): one that divides QV_WG or holds the whole workgroup.
@compute @workgroup_size(QV_WG)
fn qmatvec_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) sgi: u32,
              @builtin(subgroup_size) sgs: u32, @builtin(subgroup_id) sgid: u32) {
    let t = wid.x;
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let vi = sgid * sgs + sgi;
    let lanes = p.lanes;
    let lane = vi & (lanes - 1u);
    let r0 = (wid.y * (QV_WG / lanes) + vi / lanes) * QV_ROWS;
    var v = vec4<f32>(0.0);
    if r0 < p.rows {
        v = qrows_part(t, r0, lane, lanes);
    }
    for (var h = min(lanes, sgs) / 2u; h > 0u; h = h / 2u) {
        v += subgroupShuffleXor(v, h);
    }
    if lanes > sgs {
        // Lane group spans subgroups [sgid - lane / sgs, ... + lanes / sgs).
        if sgi == 0u {
            qred[sgid] = v;
        }
        workgroupBarrier();
        if lane == 0u {
            var sum = vec4<f32>(0.0);
            for (var k = 0u; k < lanes / sgs; k++) {
                sum += qred[sgid + k];
            }
            v = sum;
        }
    }
    if lane == 0u {
        qrows_finish(t, r0, v);
    }
}
