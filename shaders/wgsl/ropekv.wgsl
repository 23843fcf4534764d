// RopeStoreKV (fusion.RopeStoreKV): Rope of q in place and of k, and
// StoreKV of the rotated k and of v, in one dispatch. Invocation i of row t
// rotates q pair i (i < heads*rope_dims/2, as rope.wgsl's rope does), or
// stores cache element (store_kv_rope) or word (store_kv_rope_f16)
// j = i - heads*rope_dims/2 of row t's keys and values, as kv.wgsl's
// store_kv and store_kv_f16 do; a key element is rotated on the way (its
// pair partner read from k, which is left unchanged), with the same
// arithmetic as rope (scale included). Row t is at position step[STEP_POS]+t (unbatched steps only).
// A quantized cache (p.kv_quant != 0) is stored by rows (store_kv_rope_q):
// invocation heads*rope_dims/2 + h writes head h's keys and values whole
// (rope_row).
// Dispatch: (ceil((heads*rope_dims/2 + n)/64), Tokens, 1), n = kv_heads *
// head_dim (f32 cache) or kv_heads * ceil(head_dim/2) (f16 cache).

struct RopeKVParams {
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    rope_dims: u32,
    style: u32, // 0: pairs (2i, 2i+1); 1: pairs (i, i + rope_dims/2)
    max_len: u32,
    out_f16: u32, // 1: q is an f16 activation (packed halves)
    k_f16: u32,   // 1: k is an f16 activation (packed halves)
    v_f16: u32,   // 1: v is an f16 activation
    scale: f32,   // cos and sin multiplier (fusion.RopeParams.Scale; 1 for none)
    ring: u32,    // 0: slot = position; else kv.wgsl's mirrored ring of 2*ring slots
    kv_quant: u32, // 0: float caches; else kv.wgsl's quantized cache (store_kv_rope_q only)
}

@group(0) @binding(0) var<uniform> p: RopeKVParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> freq: array<f32>;
@group(0) @binding(3) var<storage, read_write> q_w: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> k_w: array<u32>;
@group(0) @binding(5) var<storage, read> v_w: array<u32>;
@group(0) @binding(6) var<storage, read_write> kc: array<u32>;
@group(0) @binding(7) var<storage, read_write> vc: array<u32>;

// activations: q(out_f16), k, v

// include: sincos

// pair returns pair i's dims (a, b) per p.style.
fn pair(i: u32) -> vec2<u32> {
    let half = p.rope_dims / 2u;
    if p.style == ROPE_HALVES {
        return vec2<u32>(i, i + half);
    }
    return vec2<u32>(2u * i, 2u * i + 1u);
}

// rope_q rotates q pair i (of all heads' pairs) of row t in place.
fn rope_q(i: u32, t: u32, pos: u32) {
    let half = p.rope_dims / 2u;
    let h = i / half;
    let j = i % half;
    let ab = pair(j);
    let base = t * p.heads * p.head_dim + h * p.head_dim;
    let sc = sincos(f32(pos) * freq[j]);
    let sn = sc.x * p.scale;
    let cs = sc.y * p.scale;
    let x0 = q_at(base + ab.x);
    let x1 = q_at(base + ab.y);
    q_set(base + ab.x, x0 * cs - x1 * sn);
    q_set(base + ab.y, x0 * sn + x1 * cs);
}

// key is dim d of kv head h of row t of k, rotated at pos.
fn key(t: u32, h: u32, d: u32, pos: u32) -> f32 {
    let base = t * p.kv_heads * p.head_dim + h * p.head_dim;
    if d >= p.rope_dims {
        return k_at(base + d);
    }
    let half = p.rope_dims / 2u;
    var j = d / 2u;
    if p.style == ROPE_HALVES {
        j = d % half;
    }
    let ab = pair(j);
    let sc = sincos(f32(pos) * freq[j]);
    let sn = sc.x * p.scale;
    let cs = sc.y * p.scale;
    let x0 = k_at(base + ab.x);
    let x1 = k_at(base + ab.y);
    if d == ab.x {
        return x0 * cs - x1 * sn;
    }
    return x0 * sn + x1 * cs;
}

// rope_or_kv is the first part of every entry point: invocation gid.x <
// heads*rope_dims/2 of a row of the step rotates its pair of q (rope_q);
// it returns KV_DONE for those and for rows past the step, else the
// invocation's index among the keys and values, gid.x - heads*rope_dims/2.
const KV_DONE: u32 = 0xffffffffu;

fn rope_or_kv(gid: vec3<u32>) -> u32 {
    let t = gid.y;
    if t >= step[STEP_ROWS] {
        return KV_DONE;
    }
    let nq = p.heads * (p.rope_dims / 2u);
    if gid.x < nq {
        rope_q(gid.x, t, step[STEP_POS] + t);
        return KV_DONE;
    }
    return gid.x - nq;
}

@compute @workgroup_size(64)
fn store_kv_rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = rope_or_kv(gid);
    if i == KV_DONE {
        return;
    }
    let t = gid.y;
    let pos = step[STEP_POS] + t;
    let kv_cols = p.kv_heads * p.head_dim;
    if i >= kv_cols || pos >= p.max_len {
        return;
    }
    let h = i / p.head_dim;
    let d = i % p.head_dim;
    let kw = bitcast<u32>(key(t, h, d, pos));
    let vw = bitcast<u32>(v_at(t * kv_cols + i));
    kv_store(h, d, p.head_dim, pos, kw, vw);
}

// include: kv_ring

// include: kv_store

// include: kv_quant

// include: kv_quant_store

// store_kv_rope_q is store_kv_rope for a quantized cache (p.kv_quant !=
// 0): invocation heads*rope_dims/2 + h stores head h's row (rope_row), the float side,
// if any, packed halves where the code says (kvq_half).
@compute @workgroup_size(64)
fn store_kv_rope_q(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    _ = kvq_begin(li);
    let i = rope_or_kv(gid);
    if i == KV_DONE {
        return;
    }
    let t = gid.y;
    let pos = step[STEP_POS] + t;
    rope_row(i, t, pos, kvq_half());
}

// rope_row stores row t's rotated keys and values of head i (i <
// kv_heads) into a quantized cache (p.kv_quant != 0), as kv.wgsl's
// store_row does.
fn rope_row(i: u32, t: u32, pos: u32, half: bool) {
    if i >= p.kv_heads || pos >= p.max_len {
        return;
    }
    var x: array<f32, 256>;
    for (var d = 0u; d < p.head_dim; d++) {
        x[d] = key(t, i, d, pos);
    }
    kvq_put(false, i, pos, &x, kvq_ktype(), kvq_krot(), half);
    let e = (t * p.kv_heads + i) * p.head_dim;
    for (var d = 0u; d < p.head_dim; d++) {
        x[d] = v_at(e + d);
    }
    kvq_put(true, i, pos, &x, kvq_vtype(), kvq_vrot(), half);
}

// include: pack_pair

@compute @workgroup_size(64)
fn store_kv_rope_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = rope_or_kv(gid);
    if i == KV_DONE {
        return;
    }
    let t = gid.y;
    let pos = step[STEP_POS] + t;
    let hw = (p.head_dim + 1u) / 2u;
    if i >= p.kv_heads * hw || pos >= p.max_len {
        return;
    }
    let h = i / hw;
    let w = i % hw;
    let d = 2u * w;
    let e = t * p.kv_heads * p.head_dim + h * p.head_dim + d;
    var k1 = 0.0;
    var v1 = 0.0;
    if d + 1u < p.head_dim {
        k1 = key(t, h, d + 1u, pos);
        v1 = v_at(e + 1u);
    }
    let kw = pack_pair(key(t, h, d, pos), k1);
    let vw = pack_pair(v_at(e), v1);
    kv_store(h, w, hw, pos, kw, vw);
}
