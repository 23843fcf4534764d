// Rope, in place: rotate the first rope_dims dims of each head of row t by
// angle (pos+t) * freq[i] for pair i, with cos and sin multiplied by scale
// (fusion.RopeParams.Scale; the host passes 1 for none). freq holds
// RopeBase^(-2i/RopeDims) / Factors[i], computed on the host in float64.
// style ROPE_PAIRS pairs (2i, 2i+1) (interleaved), ROPE_HALVES (i, i + rope_dims/2)
// (halves).
// Dispatch: (ceil(heads*rope_dims/2 / 64), Tokens, 1).

struct RopeParams {
    heads: u32,
    head_dim: u32,
    rope_dims: u32,
    style: u32,
    cols: u32,
    pos_at: u32, // 0: row t at position step[STEP_POS]+t; else at step[pos_at+t] (batched steps)
    out_f16: u32, // 1: x is an f16 activation (packed halves)
    scale: f32,   // cos and sin multiplier
}

@group(0) @binding(0) var<uniform> p: RopeParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> freq: array<f32>;
@group(0) @binding(3) var<storage, read_write> x_w: array<atomic<u32>>;

// activations: x(out_f16)

// include: sincos

@compute @workgroup_size(64)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.rope_dims / 2u;
    let t = gid.y;
    if gid.x >= p.heads * half || t >= step[STEP_ROWS] {
        return;
    }
    var pos = step[STEP_POS] + t;
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
    if p.style == ROPE_HALVES {
        a = i;
        b = i + half;
    }
    let base = t * p.cols + h * p.head_dim;
    let angle = f32(pos) * freq[i];
    let sc = sincos(angle);
    let sn = sc.x * p.scale;
    let cs = sc.y * p.scale;
    let x0 = x_at(base + a);
    let x1 = x_at(base + b);
    x_set(base + a, x0 * cs - x1 * sn);
    x_set(base + b, x0 * sn + x1 * cs);
}
