// Rope, in place: rotate the first rope_dims dims of each head of row t by
// angle (pos+t) * freq[i] for pair i. freq holds RopeBase^(-2i/RopeDims),
// computed on the host in float64. style 0 pairs (2i, 2i+1) (interleaved),
// style 1 pairs (i, i + rope_dims/2) (halves).
// Dispatch: (ceil(heads*rope_dims/2 / 64), Tokens, 1).

struct RopeParams {
    heads: u32,
    head_dim: u32,
    rope_dims: u32,
    style: u32,
    cols: u32,
    pos_at: u32, // 0: row t at position step[0]+t; else at step[pos_at+t] (batched steps)
    out_f16: u32, // 1: x is an f16 activation (packed halves)
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: RopeParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> freq: array<f32>;
@group(0) @binding(3) var<storage, read_write> x_w: array<atomic<u32>>;

// x_at and x_set read and write activation x[i]: with out_f16
// set an f16 activation, binary16 halves packed two per word (written with
// two atomics, so neighbouring invocations may write the word's other
// half at once), else f32 words.
fn x_at(i: u32) -> f32 {
    let h = p.out_f16 != 0u;
    return act_value(atomicLoad(&x_w[select(i, i >> 1u, h)]), i, h);
}

fn x_set(i: u32, v: f32) {
    let h = p.out_f16 != 0u;
    let j = select(i, i >> 1u, h);
    atomicAnd(&x_w[j], select(0u, ~(0xffffu << ((i & 1u) * 16u)), h));
    atomicOr(&x_w[j], select(bitcast<u32>(v), half_bits(v, i), h));
}

// sincos is (sin x, cos x) to a few ulps for |x| < 8192, whatever the
// driver's sin and cos: Vulkan lets those err by 2^-11 (absolute) and only
// promises that much within [-pi, pi], and SwiftShader uses the latitude
// (rope angles reach the cache length in radians). x is reduced by
// multiples k of pi/2 split in three parts (Cody-Waite; the first two
// have few enough bits that k times them is exact), then Taylor series on
// [-pi/4, pi/4] and the quadrant of k pick signs and order.
fn sincos(x: f32) -> vec2<f32> {
    let k = round(x * 0.6366197723675814);
    let r = ((x - k * 1.5703125) - k * 0.0004837512969970703) - k * 7.549790126404332e-08;
    let r2 = r * r;
    let s = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0))));
    let c = 1.0 - 0.5 * r2 + r2 * r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0))));
    switch u32(i32(k) & 3) {
        case 1u: { return vec2<f32>(c, -s); }
        case 2u: { return vec2<f32>(-s, -c); }
        case 3u: { return vec2<f32>(-c, s); }
        default: { return vec2<f32>(s, c); }
    }
}

@compute @workgroup_size(64)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.rope_dims / 2u;
    let t = gid.y;
    if gid.x >= p.heads * half || t >= step[1] {
        return;
    }
    var pos = step[0] + t;
    if p.pos_at != 0u {
        pos = step[p.pos_at + t];
        if pos == 0xffffffffu {
            return; // an unused row of a batched step
        }
    }
    let h = gid.x / half;
    let i = gid.x % half;
    var a = 2u * i;
    var b = 2u * i + 1u;
    if p.style == 1u {
        a = i;
        b = i + half;
    }
    let base = t * p.cols + h * p.head_dim;
    let angle = f32(pos) * freq[i];
    let sc = sincos(angle);
    let sn = sc.x;
    let cs = sc.y;
    let x0 = x_at(base + a);
    let x1 = x_at(base + b);
    x_set(base + a, x0 * cs - x1 * sn);
    x_set(base + b, x0 * sn + x1 * cs);
}
