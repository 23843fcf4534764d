enable subgroups;

// Kernels using subgroup operations, appended to wgsl/matmul.wgsl in the
// "_sg" variants (shaders.MatMulVariant.Subgroups), for Vulkan and the
// browsers' WebGPU (wgpu-native's naga has no subgroup builtins). naga 30
// (go generate) accepts them but refuses the `enable` line WGSL asks for,
// which spirvgen.ForNaga removes.

// matvec_sg: matvec_lanes (same dispatch and lane groups) with the partial
// sums reduced through subgroupShuffleXor, written for whatever subgroup
// size the device runs: a group of lanes <= subgroup size reduces in
// registers with no barrier; a larger group reduces within each subgroup,
// then adds its subgroups' sums through workgroup memory (one barrier).
// Invocations are numbered by subgroup (vi = subgroup id * size + lane in
// the subgroup), so every lane group lies within one subgroup or spans
// whole subgroups, whatever order the driver packs invocations in.
// Takes any shape (lanes_part's element-wise path; with SG_NORM, as
// matvec_lanes_norm, whole chunks only); needs a subgroup size
// from 4 to 64 (the host checks): one that divides LV_WG or holds the whole
// workgroup.
@compute @workgroup_size(LV_WG)
fn matvec_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) sgi: u32,
             @builtin(subgroup_size) sgs: u32, @builtin(subgroup_id) sgid: u32) {
    let t = wid.x; // as matvec_lanes (lanes_mv): one row of the step
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let g = sg_group(wid, sgi, sgs, sgid);
    var hi = vec4<f32>(0.0);
    var ss = vec4<f32>(0.0);
    let lo = lanes_part(t, g.x, g.y, g.z, SG_NORM, &ss, &hi);
    sg_finish(t, g, lo, hi, (ss.x + ss.y) + (ss.z + ss.w), sgi, sgs, sgid);
}

// sg_group is the (first row, lane, lanes) of invocation sgi of subgroup
// sgid (of size sgs) in workgroup wid.
fn sg_group(wid: vec3<u32>, sgi: u32, sgs: u32, sgid: u32) -> vec3<u32> {
    let vi = sgid * sgs + sgi;
    let lanes = p.lanes;
    let r0 = (wid.y * (LV_WG / lanes) + vi / lanes) * LV_ROWS;
    return vec3<u32>(r0, vi & (lanes - 1u), lanes);
}

// sg_finish adds the partial sums of lane group g (sg_group), part and
// (GLU) part_hi, and writes its rows of token t; a lane group larger than
// a subgroup adds its subgroups' sums through red[subgroup] (and red_hi).
// With SG_NORM (the module's matvec_sg takes the norm prologue, as
// matvec_lanes_norm) it adds the lanes' sums of squares ss the same way
// (red_ss) and scales the rows by the reciprocal RMS.
fn sg_finish(t: u32, g: vec3<u32>, part: vec4<f32>, part_hi: vec4<f32>, ss: f32, sgi: u32, sgs: u32, sgid: u32) {
    let lane = g.y;
    // p.lanes, not g.z (the same value): WGSL's uniformity analysis takes
    // g, built from the invocation's ids, as non-uniform, and the barrier
    // below needs a uniform condition.
    let lanes = p.lanes;
    var v = part;
    var vh = part_hi;
    var s = ss;
    let inner = min(lanes, sgs);
    for (var h = inner / 2u; h > 0u; h = h / 2u) {
        v += subgroupShuffleXor(v, h);
        if GLU {
            vh += subgroupShuffleXor(vh, h);
        }
        if SG_NORM {
            s += subgroupShuffleXor(s, h);
        }
    }
    if lanes > sgs {
        // Each subgroup's sum is in its first lane; lane group g spans
        // subgroups [g * lanes / sgs, (g + 1) * lanes / sgs).
        if sgi == 0u {
            red[sgid] = v;
            if GLU {
                red_hi[sgid] = vh;
            }
            if SG_NORM {
                red_ss[sgid] = s;
            }
        }
        workgroupBarrier();
        if lane == 0u {
            let per = lanes / sgs;
            var sum = vec4<f32>(0.0);
            var sum_hi = vec4<f32>(0.0);
            var sum_ss = 0.0;
            for (var k = 0u; k < per; k++) {
                sum += red[sgid + k];
                if GLU {
                    sum_hi += red_hi[sgid + k];
                }
                if SG_NORM {
                    sum_ss += red_ss[sgid + k];
                }
            }
            v = sum;
            vh = sum_hi;
            s = sum_ss;
        }
    }
    if lane == 0u {
        if SG_NORM {
            let r = 1.0 / sqrt(s / f32(p.in_cols) + p.norm_eps);
            v *= r;
            vh *= r;
        }
        lanes_finish(t, g.x, v, vh);
    }
}
