// Mixture of experts (fusion.MoEOp) after its router product: the planner
// computes the router logits [rows, experts] with the matmul kernels into a
// buffer of its own, then these three kernels run on the device with no
// host round trip between them:
//
//   moe_route: per row t, softmax over the experts' logits (x), the `used`
//     most probable experts in decreasing probability (the lower index
//     first on ties), their probabilities (renormalized to sum 1 when
//     norm_topk is set) into route[t] = (expert, weight bits) pairs.
//     One invocation per row; dispatch (ceil(nrows/64), 1, 1).
//   moe_glu: hidden[t][k][r] = act(G_e[r]·x[t]) * (U_e[r]·x[t]) for the
//     k-th selected expert e = route[t][k] of row t: one workgroup per
//     (r, k, t), its 64 invocations over the columns, so each workgroup
//     reads only its expert's two rows. Dispatch (hidden, used, nrows).
//   moe_down: out[t][j] = sum over k in order of weight_k * (D_e[j]·
//     hidden[t][k]): one workgroup per (j, t). Dispatch (cols, nrows, 1).
//
// The expert weights are 3-D tensors [experts, rows, in] uploaded as one
// matrix of experts*rows rows (expert e's rows start at row e*rows), of any
// type common.wgsl decodes (f32, f16, bf16, int8 and int4 with scales),
// read element by element with word_of/decode as embed does: each family
// module holds one decoding path per weight type only where a kernel is
// bandwidth-bound on a dense matrix (matmul.wgsl); here the kernels read
// used/experts of the expert bytes, and a plain family keeps the kernel set
// at 3 entry points and 3 pipelines (shaders.TestKernelBudget) instead of
// one module per weight type.
//
// One kernel per step of the op, each for its reason: the selection needs
// every logit of a row before any expert is known (moe_route), the down
// product needs the whole hidden row of each selected expert (moe_glu
// before moe_down), and a down product per selected expert summed in slot
// order gives the CPU reference's order of the weighted sum.

struct MoEParams {
    cols: u32,      // columns of x (moe_glu) and of out (moe_down)
    hidden: u32,    // rows per expert of gate and up, columns of down
    experts: u32,
    used: u32,      // experts per row (route holds 2*used words per row)
    nrows: u32,     // rows of x and out (Tokens, or 1 after LastRow)
    wt: u32,        // weight type of the bound expert weights (gate and up share it)
    st: u32,        // their scale type
    block: u32,     // elements per scale (0: unquantized)
    nblocks: u32,   // scales per row
    act: u32,       // moe_glu: activation code
    norm_topk: u32, // moe_route: 1: renormalize the selected probabilities
    x_f16: u32,     // 1: x is an f16 activation (packed halves)
    out_f16: u32,   // 1: out is an f16 activation (packed halves)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: MoEParams;
@group(0) @binding(1) var<storage, read> step: array<u32>; // [pos, T, tokens...]
@group(0) @binding(2) var<storage, read> x_w: array<u32>;   // moe_route: router logits; moe_glu: the op's input; moe_down: hidden
@group(0) @binding(3) var<storage, read> w: array<u32>;     // gate (moe_glu) or down (moe_down) experts
@group(0) @binding(4) var<storage, read> s: array<u32>;     // their scales
@group(0) @binding(5) var<storage, read> w2: array<u32>;    // up experts (moe_glu)
@group(0) @binding(6) var<storage, read> s2: array<u32>;    // their scales
@group(0) @binding(7) var<storage, read_write> route: array<u32>; // [nrows][used] (expert, weight bits)
@group(0) @binding(8) var<storage, read_write> out_w: array<atomic<u32>>; // moe_glu: hidden; moe_down: the op's output

// activations: x, out

const WG: u32 = 64u;
var<workgroup> red: array<f32, 128>;

// live reports whether row t runs in this step.
fn live(t: u32) -> bool {
    return t < min(step[1], p.nrows);
}

// expert_at is W[row][c] of a stacked expert matrix whose rows are n
// elements long: the first bound weight (w, s), or the second (w2, s2)
// when second is set.
fn expert_at(second: bool, row: u32, c: u32, n: u32) -> f32 {
    let e = row * n + c;
    let i = word_of(e, p.wt);
    // Branches, not selects: a kernel binding only w reads nothing of w2.
    var word = 0u;
    if second {
        word = w2[i];
    } else {
        word = w[i];
    }
    var v = decode(word, e, p.wt);
    if p.block > 0u {
        let si = row * p.nblocks + c / p.block;
        let j = scale_word(si, p.st);
        var sw = 0u;
        if second {
            sw = s2[j];
        } else {
            sw = s[j];
        }
        v = v * decode_scale(sw, si, p.st);
    }
    return v;
}

// chosen reports whether expert e is among the first k selected of row t.
fn chosen(t: u32, k: u32, e: u32) -> bool {
    for (var j = 0u; j < k; j++) {
        if route[(t * p.used + j) * 2u] == e {
            return true;
        }
    }
    return false;
}

@compute @workgroup_size(64)
fn moe_route(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if !live(t) {
        return;
    }
    let base = t * p.experts;
    var mx = x_at(base);
    for (var e = 1u; e < p.experts; e++) {
        mx = max(mx, x_at(base + e));
    }
    var sum = 0.0;
    for (var e = 0u; e < p.experts; e++) {
        sum += exp(x_at(base + e) - mx);
    }
    let inv = 1.0 / sum;
    var total = 0.0;
    for (var k = 0u; k < p.used; k++) {
        var best = 0xffffffffu;
        var bv = 0.0;
        for (var e = 0u; e < p.experts; e++) {
            if chosen(t, k, e) {
                continue;
            }
            let v = exp(x_at(base + e) - mx) * inv;
            if best == 0xffffffffu || v > bv {
                best = e;
                bv = v;
            }
        }
        route[(t * p.used + k) * 2u] = best;
        route[(t * p.used + k) * 2u + 1u] = bitcast<u32>(bv);
        total += bv;
    }
    if p.norm_topk != 0u {
        for (var k = 0u; k < p.used; k++) {
            let i = (t * p.used + k) * 2u + 1u;
            route[i] = bitcast<u32>(bitcast<f32>(route[i]) / total);
        }
    }
}

// reduce2 sums a and b over the workgroup: red[0] and red[WG] hold the
// sums after it returns (to every invocation).
fn reduce2(l: u32, a: f32, b: f32) {
    red[l] = a;
    red[WG + l] = b;
    workgroupBarrier();
    for (var n = WG / 2u; n > 0u; n >>= 1u) {
        if l < n {
            red[l] += red[l + n];
            red[WG + l] += red[WG + l + n];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(64)
fn moe_glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wid.x;
    let k = wid.y;
    let t = wid.z;
    if r >= p.hidden || !live(t) {
        return; // uniform: the workgroup's row and token
    }
    let l = lid.x;
    let slot = t * p.used + k;
    let row = route[slot * 2u] * p.hidden + r;
    var g = 0.0;
    var u = 0.0;
    for (var c = l; c < p.cols; c += WG) {
        let xv = x_at(t * p.cols + c);
        g += expert_at(false, row, c, p.cols) * xv;
        u += expert_at(true, row, c, p.cols) * xv;
    }
    reduce2(l, g, u);
    if l == 0u {
        out_set(slot * p.hidden + r, apply_act(p.act, red[0]) * red[WG]);
    }
}

@compute @workgroup_size(64)
fn moe_down(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let j = wid.x;
    let t = wid.y;
    if j >= p.cols || !live(t) {
        return; // uniform: the workgroup's column and token
    }
    let l = lid.x;
    var acc = 0.0;
    for (var k = 0u; k < p.used; k++) {
        let slot = t * p.used + k;
        let row = route[slot * 2u] * p.cols + j;
        var d = 0.0;
        for (var c = l; c < p.hidden; c += WG) {
            d += expert_at(false, row, c, p.hidden) * x_at(slot * p.hidden + c);
        }
        reduce2(l, d, 0.0);
        acc += bitcast<f32>(route[slot * 2u + 1u]) * red[0];
        workgroupBarrier(); // red is written again by the next slot's reduce2
    }
    if l == 0u {
        out_set(t * p.cols + j, acc);
    }
}
