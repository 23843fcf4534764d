// argmax: out[0] = the index of the largest of the first n values of x (the
// lowest index on ties, as a host loop scanning upward would pick), out[1] its
// f32 bits. One workgroup; dispatch (1, 1, 1). NaNs are never picked (when
// all n values are NaN, out[0] is 0xffffffff).

struct ArgmaxParams {
    n: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: ArgmaxParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const WG: u32 = 64u;
var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

// better: v at index i beats bv at bi.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(64)
fn argmax(@builtin(local_invocation_id) lid: vec3<u32>) {
    let l = lid.x;
    var bv = -3.4e38;
    var bi = 0xffffffffu;
    for (var i = l; i < p.n; i += WG) {
        let v = x[i];
        if better(v, i, bv, bi) {
            bv = v;
            bi = i;
        }
    }
    best_v[l] = bv;
    best_i[l] = bi;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if l < h && better(best_v[l + h], best_i[l + h], best_v[l], best_i[l]) {
            best_v[l] = best_v[l + h];
            best_i[l] = best_i[l + h];
        }
        workgroupBarrier();
    }
    if l == 0u {
        out[0] = best_i[0];
        out[1] = bitcast<u32>(best_v[0]);
    }
}
