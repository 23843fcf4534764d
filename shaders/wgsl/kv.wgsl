// StoreKV: write row t of K and V into the cache at position pos+t.
// K cache is [kv_heads][max_len][head_dim] (keys of a head contiguous per
// position, read like weight rows by the score loop); V cache is
// [kv_heads][head_dim][max_len] (values of one dim contiguous over
// positions, read like weight rows by the weighted sum).
// Dispatch: (ceil(kv_cols/64), Tokens, 1).

struct KVParams {
    kv_cols: u32,
    head_dim: u32,
    max_len: u32,
    pad0: u32,
}

@group(0) @binding(0) var<uniform> p: KVParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> kc: array<f32>;
@group(0) @binding(5) var<storage, read_write> vc: array<f32>;

@compute @workgroup_size(64)
fn store_kv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    let pos = step[0] + t;
    if i >= p.kv_cols || t >= step[1] || pos >= p.max_len {
        return;
    }
    let h = i / p.head_dim;
    let d = i % p.head_dim;
    kc[(h * p.max_len + pos) * p.head_dim + d] = k[t * p.kv_cols + i];
    vc[(h * p.head_dim + d) * p.max_len + pos] = v[t * p.kv_cols + i];
}
