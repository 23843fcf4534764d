// StoreKV: write row t of K and V into the cache at position pos+t.
// K cache is [kv_heads][max_len][head_dim] (keys of a head contiguous per
// position, read like weight rows by the score loop); V cache is
// [kv_heads][head_dim][max_len] (values of one dim contiguous over
// positions, read like weight rows by the weighted sum).
//
// Both caches are bound as u32 words so one family serves both storage
// types: store_kv writes f32 bit patterns; store_kv_f16 writes binary16
// halves packed two per word along head_dim, so K is
// [kv_heads][max_len][hw] and V [kv_heads][hw][max_len] words with
// hw = ceil(head_dim/2) (an odd head_dim leaves the last word's high half
// zero). A word then belongs to exactly one (head, position): one
// invocation writes it whole, and no two invocations, tokens or steps ever
// share it, so the store needs neither atomics nor read-modify-write.
// Dispatch: store_kv (ceil(kv_cols/64), Tokens, 1); store_kv_f16
// (ceil(kv_heads*hw/64), Tokens, 1).
//
// A sliding-window layer's cache may be a ring (p.ring = R > 0, the CPU
// backend's layout): R positions kept in 2R slots per head, position pos
// stored at slot pos % R and again at pos % R + R, so slots stand in for
// max_len as the per-head length of both layouts. max_len stays the
// sequence's bound on positions.

struct KVParams {
    kv_cols: u32,
    head_dim: u32,
    max_len: u32,
    pos_at: u32, // 0: row t at position step[0]+t; else at step[pos_at+t] (batched steps)
    row0: u32,   // first row of the dispatch (batched steps: one dispatch per row)
    k_f16: u32, // 1: k is an f16 activation (packed halves)
    v_f16: u32, // 1: v is an f16 activation
    ring: u32,  // 0: slot = position; else a mirrored ring (see kv_slots)
    kv_quant: u32, // 0: float caches; else the types and rotations (kv_quant)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: KVParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> k_w: array<u32>;
@group(0) @binding(3) var<storage, read> v_w: array<u32>;
@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;

// activations: k, v

// include: row_pos

// include: kv_ring

// include: kv_store

// include: kv_quant

// include: kv_quant_store

// store_kv_q is store_kv for a quantized cache (p.kv_quant != 0): the
// float side, if any, packed halves where the code says (kvq_half).
@compute @workgroup_size(64)
fn store_kv_q(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    _ = kvq_begin(li);
    store_row(gid, kvq_half());
}

// store_row is a quantized cache's store (see above): the other
// invocations return.
fn store_row(gid: vec3<u32>, half: bool) {
    let h = gid.x;
    let t = p.row0 + gid.y;
    let pos = row_pos(t);
    if h >= p.kv_cols / p.head_dim || t >= step[STEP_ROWS] || pos >= p.max_len {
        return;
    }
    var x: array<f32, 256>;
    let e = t * p.kv_cols + h * p.head_dim;
    for (var d = 0u; d < p.head_dim; d++) {
        x[d] = k_at(e + d);
    }
    kvq_put(false, h, pos, &x, kvq_ktype(), kvq_krot(), half);
    for (var d = 0u; d < p.head_dim; d++) {
        x[d] = v_at(e + d);
    }
    kvq_put(true, h, pos, &x, kvq_vtype(), kvq_vrot(), half);
}

@compute @workgroup_size(64)
fn store_kv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = p.row0 + gid.y;
    let pos = row_pos(t);
    if i >= p.kv_cols || t >= step[STEP_ROWS] || pos >= p.max_len {
        return;
    }
    let h = i / p.head_dim;
    let d = i % p.head_dim;
    let kw = bitcast<u32>(k_at(t * p.kv_cols + i));
    let vw = bitcast<u32>(v_at(t * p.kv_cols + i));
    kv_store(h, d, p.head_dim, pos, kw, vw);
}

// include: pack_pair

@compute @workgroup_size(64)
fn store_kv_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = p.row0 + gid.y;
    let pos = row_pos(t);
    let hw = (p.head_dim + 1u) / 2u;
    let kv_heads = p.kv_cols / p.head_dim;
    if i >= kv_heads * hw || t >= step[STEP_ROWS] || pos >= p.max_len {
        return;
    }
    let h = i / hw;
    let w = i % hw;
    let e = t * p.kv_cols + h * p.head_dim + 2u * w;
    var k1 = 0.0;
    var v1 = 0.0;
    if 2u * w + 1u < p.head_dim {
        k1 = k_at(e + 1u);
        v1 = v_at(e + 1u);
    }
    let kw = pack_pair(k_at(e), k1);
    let vw = pack_pair(v_at(e), v1);
    kv_store(h, w, hw, pos, kw, vw);
}
