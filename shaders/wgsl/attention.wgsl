// Attention over the KV cache for one (head, token) per workgroup, as a
// streaming softmax over chunks of 64 positions: each invocation scores one
// position of the chunk into workgroup memory, then every invocation folds
// the chunk into its running max and sum (the same values everywhere) and
// into the output dims it owns (d = lid, lid+64, ...; head_dim <= 256).
// No scratch buffer is needed, whatever the cache length.
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
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 64u;
var<workgroup> sc: array<f32, 64>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let t = wid.y;
    if t >= step[1] {
        return; // uniform across the workgroup
    }
    let i = lid.x;
    let qp = min(step[0] + t, p.max_len - 1u);
    var lo = 0u;
    if p.window > 0u && qp + 1u > p.window {
        lo = qp + 1u - p.window;
    }
    let kvh = h / (p.heads / p.kv_heads);
    let qb = (t * p.heads + h) * p.head_dim;
    let kb = kvh * p.max_len * p.head_dim;
    let vb = kvh * p.head_dim * p.max_len;

    var m = -3.0e38;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c0 = lo; c0 <= qp; c0 += WG) {
        let pi = c0 + i;
        var s = -3.0e38;
        if pi <= qp {
            var dot = 0.0;
            let kr = kb + pi * p.head_dim;
            for (var d = 0u; d < p.head_dim; d++) {
                dot += q[qb + d] * kc[kr + d];
            }
            s = dot * p.scale;
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
            for (var a = 0u; a < 4u; a++) {
                let d = i + a * WG;
                if d < p.head_dim {
                    acc[a] += e * vc[vb + d * p.max_len + c0 + j];
                }
            }
        }
        m = cm;
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        let d = i + a * WG;
        if d < p.head_dim {
            out[qb + d] = acc[a] / l;
        }
    }
}
