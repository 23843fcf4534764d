// Norm: out[t] = norm(x[t]) * w (+ bias). RMSNorm: x / sqrt(mean(x^2) + eps).
// LayerNorm: (x - mean) / sqrt(var + eps), with mean and variance in two
// passes for accuracy. One workgroup per row; dispatch (nrows, 1, 1). A
// per-head norm (fusion.NormOp.HeadDim) runs on rows of one head: cols is
// the head dim and each token has heads rows, of which step[STEP_ROWS]*heads are
// live.
// Norm weights and biases are f32 (the host widens these small vectors).

struct NormParams {
    cols: u32,
    layer: u32, // 0: RMSNorm, 1: LayerNorm
    eps: f32,
    has_bias: u32,
    nrows: u32, // rows of x and out (Tokens, or 1 after LastRow)
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    x_f16: u32,   // 1: x is an f16 activation (packed halves)
    heads: u32,   // rows per token: 1, or the heads of a per-head norm
}

@group(0) @binding(0) var<uniform> p: NormParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x_w: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: x, out

const WG: u32 = 64u;
var<workgroup> red: array<f32, 64>;

// reduce sums v over the workgroup; every invocation gets the total.
fn reduce(v: f32, i: u32) -> f32 {
    red[i] = v;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if i < h {
            red[i] += red[i + h];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(64)
fn norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wid.x;
    if t >= min(step[STEP_ROWS] * p.heads, p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let i = lid.x;
    let base = t * p.cols;
    let n = f32(p.cols);
    var mean = 0.0;
    if p.layer != 0u {
        var sum = 0.0;
        for (var c = i; c < p.cols; c += WG) {
            sum += x_at(base + c);
        }
        mean = reduce(sum, i) / n;
    }
    var sq = 0.0;
    for (var c = i; c < p.cols; c += WG) {
        let d = x_at(base + c) - mean;
        sq += d * d;
    }
    let inv = 1.0 / sqrt(reduce(sq, i) / n + p.eps);
    for (var c = i; c < p.cols; c += WG) {
        var v = (x_at(base + c) - mean) * inv * w[c];
        if p.has_bias != 0u {
            v += bias[c];
        }
        out_set(base + c, v);
    }
}
