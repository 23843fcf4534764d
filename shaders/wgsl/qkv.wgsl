// MatMulRopeKV (fusion.MatMulRopeKV) for decode steps: the Q, K and V
// projections (with the RMS-norm prologue when rq.has_norm), the rope of q
// and k and the store of k and v into the cache, in one dispatch. The
// matrix-vector core is matmul.wgsl's (lib/matvec.wgsl: parameters,
// dequantization, dot products, reduction arrays); the bindings are this
// family's own, 9 storage buffers, within the 10 a stage has in browsers
// (Chromium's adapters offer 10; WebGPU's default is 8 and the host asks
// for the adapter's limit): a quantized weight's scales follow its rows in
// its buffer (internal/backend/compute's chunk), from word rq.s_off_q,
// s_off_k or s_off_v of its binding, so Wq, Wk and Wv take one binding
// each.
//
// Weights: w (binding 3) Wq, w2 (6) Wk, wv (7) Wv, one chunk each, of one
// layout (the variant's type, scales and block); no biases (the host
// plans other shapes unfused); bias (4) holds the norm prologue's scale.
// The output rows are taken in rope pairs, so that the two rows a
// rotation mixes are computed by one lane group: pair j of a head is (j, j + rope_dims/2) for a "halves" rope
// pair of q or k, else (2j, 2j+1) (interleaved rope pairs, the dims past
// rope_dims, v). Work units (a lane group of 2 pairs) are laid out q
// first, then k from rq.k_first, then v from rq.v_first, each segment
// padded to whole workgroups, so a workgroup reads one weight.
// Then, per pair: q rotated into out (as rope.wgsl's rope), k rotated and
// v stored at position step[STEP_POS]+t as ropekv.wgsl's store_kv_rope(_f16)
// store them (an f16 cache packs dims (2w, 2w+1) in word w: for halves
// pairs of k the host needs head_dim and rope_dims multiples of 4, so that
// pairs j and j+1, j even, are in one unit and fill words j/2 and
// (j+half)/2).
//
// Dispatch: lanes_rope_kv (total units) / (LV_WG / p.lanes) workgroups of
// LV_WG; y: the step's rows.

// include: matvec

struct RopeQKV {
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    rope_dims: u32,
    style: u32,   // 0: pairs (2i, 2i+1); 1: pairs (i, i + rope_dims/2)
    max_len: u32,
    kv_f16: u32,  // 1: the cache holds binary16 pairs
    k_first: u32, // first work unit of k
    v_first: u32, // first work unit of v
    has_norm: u32, // 1: the norm prologue (in RopeQKV: MatParams has no room left for it)
    ring: u32,     // 0: slot = position; else kv.wgsl's mirrored ring of 2*ring slots
    s_off_q: u32,  // quantized weights: the first scale's word in w, w2, wv
    s_off_k: u32,
    s_off_v: u32,
    pad3: u32,
    pad4: u32,
    freq: array<vec4<f32>, 64>, // rope_base^(-2i/rope_dims), i < rope_dims/2
}

@group(0) @binding(0) var<uniform> p: MatParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x_w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out_w: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read> w2: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read_write> kc: array<u32>;
@group(0) @binding(9) var<storage, read_write> vc: array<u32>;
@group(0) @binding(10) var<uniform> rq: RopeQKV;

// activations: out

// include: sincos

// include: pack_pair

// act_round is y as the unfused ops leave it between them: rounded to
// binary16 where the step's activations are f16 (p.out_f16), so that a
// fused step and its unfused form (a batched step runs the latter) round
// q, k and v at the same points: after the product, and after the
// rotation.
fn act_round(y: vec2<f32>) -> vec2<f32> {
    if p.out_f16 == 0u {
        return y;
    }
    return unpack2x16float(pack_pair(y.x, y.y));
}

// wseg is chunk i of segment seg's weight (0: Wq, 1: Wk, 2: Wv).
fn wseg(seg: u32, i: u32) -> vec4<u32> {
    if seg == 1u {
        return w2[i];
    }
    if seg == 2u {
        return wv[i];
    }
    return w[i];
}

// sseg is scale i of segment seg's weight (1 unquantized), from the
// scales after its rows.
fn sseg(seg: u32, i: u32) -> f32 {
    if !QUANT {
        return 1.0;
    }
    var j = i;
    if ST == ST_F16 {
        j = i >> 1u;
    }
    // One word of the vec4 arrays (an access chain to the component, not
    // a load of the whole vec4).
    var word: u32;
    if seg == 1u {
        let k = rq.s_off_k + j;
        word = w2[k >> 2u][k & 3u];
    } else if seg == 2u {
        let k = rq.s_off_v + j;
        word = wv[k >> 2u][k & 3u];
    } else {
        let k = rq.s_off_q + j;
        word = w[k >> 2u][k & 3u];
    }
    if ST == ST_F16 {
        let h = unpack2x16float(word);
        return select(h.x, h.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(word);
}

// seg_of is (segment, unit within it) of work unit g.
fn seg_of(g: u32) -> vec2<u32> {
    if g >= rq.v_first {
        return vec2<u32>(2u, g - rq.v_first);
    }
    if g >= rq.k_first {
        return vec2<u32>(1u, g - rq.k_first);
    }
    return vec2<u32>(0u, g);
}

// seg_pairs is the number of row pairs of segment seg.
fn seg_pairs(seg: u32) -> u32 {
    return select(rq.kv_heads, rq.heads, seg == 0u) * (rq.head_dim / 2u);
}

// halves_pair reports whether pair j of a head of segment seg is a
// "halves" rope pair.
fn halves_pair(seg: u32, j: u32) -> bool {
    return seg < 2u && rq.style == ROPE_HALVES && j < rq.rope_dims / 2u;
}

// pair_dims is the dims of pair j of a head of segment seg.
fn pair_dims(seg: u32, j: u32) -> vec2<u32> {
    if halves_pair(seg, j) {
        return vec2<u32>(j, j + rq.rope_dims / 2u);
    }
    return vec2<u32>(2u * j, 2u * j + 1u);
}

// pair_rows is the weight rows of pair i (of all heads) of segment seg.
fn pair_rows(seg: u32, i: u32) -> vec2<u32> {
    let hp = rq.head_dim / 2u;
    return (i / hp) * rq.head_dim + pair_dims(seg, i % hp);
}

// finish_pair rotates pair i's values y (q and k rope pairs, at pos) and
// stores them; the f16 cache's halves pairs of k are left to
// store_halves.
fn finish_pair(seg: u32, t: u32, pos: u32, i: u32, y: vec2<f32>) {
    let hp = rq.head_dim / 2u;
    let h = i / hp;
    let j = i % hp;
    let d = pair_dims(seg, j);
    let r = act_round(rotated(seg, pos, i, y));
    if seg == 0u {
        let o = t * p.out_cols + h * rq.head_dim;
        out_set(o + d.x, r.x);
        out_set(o + d.y, r.y);
        return;
    }
    if pos >= rq.max_len {
        return;
    }
    let hd = rq.head_dim;
    let hw = hd / 2u;
    let n = kv_slots();
    for (var c = 0u; c < kv_copies(); c++) {
        let s = kv_slot(pos) + c * rq.ring;
        if rq.kv_f16 == 0u {
            if seg == 1u {
                let b = (h * n + s) * hd;
                kc[b + d.x] = bitcast<u32>(r.x);
                kc[b + d.y] = bitcast<u32>(r.y);
            } else {
                vc[(h * hd + d.x) * n + s] = bitcast<u32>(r.x);
                vc[(h * hd + d.y) * n + s] = bitcast<u32>(r.y);
            }
        } else if seg == 1u {
            if !halves_pair(seg, j) {
                kc[(h * n + s) * hw + j] = pack_pair(r.x, r.y);
            }
        } else {
            vc[(h * hw + j) * n + s] = pack_pair(r.x, r.y);
        }
    }
}

// kv_slots, kv_slot and kv_copies are kv.wgsl's: the ring layout.
fn kv_slots() -> u32 {
    return select(rq.max_len, 2u * rq.ring, rq.ring > 0u);
}

fn kv_slot(pos: u32) -> u32 {
    if rq.ring == 0u {
        return pos; // uniform: no modulo on full layers
    }
    return pos % rq.ring;
}

fn kv_copies() -> u32 {
    return select(1u, 2u, rq.ring > 0u);
}

// rotated is pair i's values y rotated at pos (rope.wgsl's arithmetic)
// when it is a rope pair of q or k.
fn rotated(seg: u32, pos: u32, i: u32, y: vec2<f32>) -> vec2<f32> {
    let j = i % (rq.head_dim / 2u);
    if seg == 2u || j >= rq.rope_dims / 2u {
        return y;
    }
    let sc = sincos(f32(pos) * rq.freq[j >> 2u][j & 3u]);
    return vec2<f32>(y.x * sc.y - y.y * sc.x, y.x * sc.x + y.y * sc.y);
}

// store_halves stores k's halves pairs i (even) and i+1 into an f16
// cache: dims (j, j+1) and (j+half, j+half+1), words j/2 and (j+half)/2.
fn store_halves(pos: u32, i: u32, y0: vec2<f32>, y1: vec2<f32>) {
    let hp = rq.head_dim / 2u;
    let h = i / hp;
    let j = i % hp;
    if pos >= rq.max_len || !halves_pair(1u, j) {
        return;
    }
    let a = rotated(1u, pos, i, y0);
    let b = rotated(1u, pos, i + 1u, y1);
    for (var c = 0u; c < kv_copies(); c++) {
        let base = (h * kv_slots() + kv_slot(pos) + c * rq.ring) * (rq.head_dim / 2u);
        kc[base + j / 2u] = pack_pair(a.x, b.x);
        kc[base + (j + rq.rope_dims / 2u) / 2u] = pack_pair(a.y, b.y);
    }
}

// RopeUnit is a lane group's work: 2 pairs of segment seg from pair i0
// (of the segment's np), n of them stored (0 for a padding unit, which
// computes the segment's last pairs again and stores nothing; it still
// takes part in the workgroup's barriers).
struct RopeUnit {
    seg: u32,
    i0: u32,
    np: u32,
    n: u32,
}

// rope_unit is work unit g's (units laid out q, k, v: seg_of).
fn rope_unit(g: u32) -> RopeUnit {
    let su = seg_of(g);
    let np = seg_pairs(su.x);
    return RopeUnit(su.x, min(2u * su.y, np - 1u), np, select(0u, 2u, 2u * su.y < np));
}

// unit_part is lane's share of unit u's rows of token t (rope_part), the
// lane's sum of squares of x in ss with the norm prologue.
fn unit_part(u: RopeUnit, t: u32, lane: u32, lanes: u32, ss: ptr<function, vec4<f32>>) -> vec4<f32> {
    return rope_part(u.seg, t, pair_rows(u.seg, u.i0), pair_rows(u.seg, min(u.i0 + 1u, u.np - 1u)), lane, lanes, ss);
}

// finish_unit takes unit u's reduced sums v (xy: pair i0, zw: i0+1) and
// sum of squares ss, scales them by the reciprocal RMS with the norm
// prologue, and, where store (the group's lane 0), rotates and stores
// its pairs.
fn finish_unit(u: RopeUnit, t: u32, v: vec4<f32>, ss: f32, store: bool) {
    if !store {
        return;
    }
    var y = v;
    if rq.has_norm != 0u {
        y *= 1.0 / sqrt(ss / f32(p.in_cols) + p.norm_eps);
    }
    let pos = step[STEP_POS] + t;
    // A variable: naga 0.19 indexes only those dynamically.
    var ys = array<vec2<f32>, 2>(act_round(y.xy), act_round(y.zw));
    for (var k = 0u; k < u.n; k++) {
        if u.i0 + k < u.np {
            finish_pair(u.seg, t, pos, u.i0 + k, ys[k]);
        }
    }
    if u.seg == 1u && rq.kv_f16 != 0u && rq.style == ROPE_HALVES && u.n == 2u && u.i0 + 1u < u.np {
        store_halves(pos, u.i0, ys[0], ys[1]);
    }
}

// rope_part is lane's share of the rows of pairs pa and pb of token t
// (xyzw: pa.x, pa.y, pb.x, pb.y): the activations times the norm scale
// with the prologue (their squares added to ss), as matvec_lanes_norm.
fn rope_part(seg: u32, t: u32, pa: vec2<u32>, pb: vec2<u32>, lane: u32, lanes: u32, ss: ptr<function, vec4<f32>>) -> vec4<f32> {
    let nm = rq.has_norm != 0u;
    let cpr = p.in_cols / CW;
    let xb = t * (p.in_cols / 4u);
    let nb = p.nblocks;
    var acc = vec4<f32>(0.0);
    for (var j = lane; j < cpr; j += lanes) {
        let v0 = wseg(seg, pa.x * cpr + j);
        let v1 = wseg(seg, pa.y * cpr + j);
        let v2 = wseg(seg, pb.x * cpr + j);
        let v3 = wseg(seg, pb.y * cpr + j);
        let xi = xb + j * EPW;
        let m = mvq_chunk(v0, v1, v2, v3, v0, v1, v2, v3, xi, xb, nm, ss);
        let b = (j * CW) / p.block;
        acc += vec4<f32>(m[0].x, m[1].x, m[2].x, m[3].x) *
               vec4<f32>(sseg(seg, pa.x * nb + b), sseg(seg, pa.y * nb + b), sseg(seg, pb.x * nb + b), sseg(seg, pb.y * nb + b));
    }
    return acc;
}

// lanes_rope_kv: as matvec_lanes, 2 pairs (4 rows) per group of p.lanes
// lanes, reduced in workgroup memory. Needs rows and blocks of whole
// chunks (the host checks). Every invocation writes its red and red_ss
// words before the barrier ahead of any read, so the Vulkan module goes
// without naga's zero-initialization of workgroup memory (a store and a
// barrier per workgroup, 10-20% of the kernel's time on lavapipe and
// SwiftShader); the marker line tells shaders/internal/spirvgen:
// spirvgen: no-workgroup-zero-init
@compute @workgroup_size(LV_WG)
fn lanes_rope_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wid.y;
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let u = rope_unit(wid.x * (LV_WG / lanes) + li / lanes);
    var ss = vec4<f32>(0.0);
    red[li] = unit_part(u, t, lane, lanes, &ss);
    red_ss[li] = (ss.x + ss.y) + (ss.z + ss.w);
    workgroupBarrier();
    for (var h = lanes / 2u; h > 0u; h = h / 2u) {
        if lane < h {
            red[li] += red[li + h];
            red_ss[li] += red_ss[li + h];
        }
        workgroupBarrier();
    }
    finish_unit(u, t, red[li], red_ss[li], lane == 0u);
}
