// Attention over the KV cache for one (head, token) per workgroup, as a
// streaming softmax over chunks of 64 positions: each invocation scores one
// position of the chunk into workgroup memory, then every invocation folds
// the chunk into its running max and sum (the same values everywhere) and
// into the output dims it owns (head_dim <= 256).
// No scratch buffer is needed, whatever the cache length.
//
// The cache is bound as u32 words in either layout of kv.wgsl: attention
// reads f32 bit patterns, attention_f16 binary16 halves packed two per word
// along head_dim. With f32 words invocation i owns dims i, i+64, i+128 and
// i+192; with packed words it owns the pairs of words i and i+64, so each
// value word it reads serves two dims (acc[2b] and acc[2b+1] are dims
// 2(i+64b) and 2(i+64b)+1) and consecutive positions stay contiguous.
// Dispatch: (heads, Tokens, 1).

struct AttnParams {
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    max_len: u32,
    scale: f32,
    cap: f32,    // 0: no soft cap
    window: u32, // 0: no sliding window
    pad0: u32,
}

@group(0) @binding(0) var<uniform> p: AttnParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<u32>;
@group(0) @binding(4) var<storage, read> vc: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 64u;
var<workgroup> sc: array<f32, 64>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, wid.y, lid.x, false);
}

@compute @workgroup_size(64)
fn attention_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, wid.y, lid.x, true);
}

// key_dot is Q row qb times the key at word kr of the cache.
fn key_dot(qb: u32, kr: u32, packed: bool) -> f32 {
    var s = 0.0;
    if packed {
        let pairs = p.head_dim / 2u;
        for (var w = 0u; w < pairs; w++) {
            s += dot(vec2<f32>(q[qb + 2u * w], q[qb + 2u * w + 1u]), unpack2x16float(kc[kr + w]));
        }
        if (p.head_dim & 1u) == 1u {
            s += q[qb + p.head_dim - 1u] * unpack2x16float(kc[kr + pairs]).x;
        }
    } else {
        for (var d = 0u; d < p.head_dim; d++) {
            s += q[qb + d] * bitcast<f32>(kc[kr + d]);
        }
    }
    return s;
}

// out_dim is the output dim accumulator a of invocation i holds.
fn out_dim(i: u32, a: u32, packed: bool) -> u32 {
    if packed {
        return 2u * (i + (a >> 1u) * WG) + (a & 1u);
    }
    return i + a * WG;
}

fn attend(h: u32, t: u32, i: u32, packed: bool) {
    if t >= step[1] {
        return; // uniform across the workgroup
    }
    let qp = min(step[0] + t, p.max_len - 1u);
    var lo = 0u;
    if p.window > 0u && qp + 1u > p.window {
        lo = qp + 1u - p.window;
    }
    // width: words per key, and rows of values per kv head.
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    let kvh = h / (p.heads / p.kv_heads);
    let qb = (t * p.heads + h) * p.head_dim;
    let kb = kvh * p.max_len * width;
    let vb = kvh * width * p.max_len;

    var m = -3.0e38;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c0 = lo; c0 <= qp; c0 += WG) {
        let pi = c0 + i;
        var s = -3.0e38;
        if pi <= qp {
            s = key_dot(qb, kb + pi * width, packed) * p.scale;
            if p.cap > 0.0 {
                s = p.cap * tanh_safe(s / p.cap);
            }
        }
        sc[i] = s;
        workgroupBarrier();
        let n = min(WG, qp + 1u - c0);
        var cm = m;
        for (var j = 0u; j < n; j++) {
            cm = max(cm, sc[j]);
        }
        let rescale = exp(m - cm);
        l *= rescale;
        for (var a = 0u; a < 4u; a++) {
            acc[a] *= rescale;
        }
        for (var j = 0u; j < n; j++) {
            let e = exp(sc[j] - cm);
            l += e;
            let pos = c0 + j;
            if packed {
                for (var b = 0u; b < 2u; b++) {
                    let w = i + b * WG;
                    if w < width {
                        let v2 = unpack2x16float(vc[vb + w * p.max_len + pos]);
                        acc[2u * b] += e * v2.x;
                        acc[2u * b + 1u] += e * v2.y;
                    }
                }
            } else {
                for (var a = 0u; a < 4u; a++) {
                    let d = i + a * WG;
                    if d < p.head_dim {
                        acc[a] += e * bitcast<f32>(vc[vb + d * p.max_len + pos]);
                    }
                }
            }
        }
        m = cm;
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        let d = out_dim(i, a, packed);
        if d < p.head_dim {
            out[qb + d] = acc[a] / l;
        }
    }
}
