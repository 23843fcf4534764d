// Gated DeltaNet's recurrence (fusion.DeltaNetOp, second half), on the
// rows delta_conv (deltaconv.wgsl) left in xs: [T][C], C = (2K+V)·D, each
// row [q (K heads) | k (K heads) | v (V heads)] of D values, q and k of
// unit norm. For value head h, with key head i = h mod K, per row t:
//
//   beta = sigmoid(beta_in[t][h]);  g = softplus(alpha[t][h] + dt_bias[h]) * a[h]
//   S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  out[t][h] = S^T q / sqrt(D)
//
// S is the layer state's matrix of head h, [D (key)][D (value)] row-major,
// after the convolution window (C·(W-1) values) in state; zero when the
// step starts at position 0. One workgroup per value head (dispatch (V, 1,
// 1)), each invocation owning value columns lid, lid+64, ... (D <= 256):
// a column of S is read and written by one invocation.
//
// delta_rule runs the rows one at a time (the recurrent form: decode).
// delta_chunk runs them in chunks of up to CHUNK rows (the chunked form:
// prefill), with G_t the sum of g over the chunk's rows up to t:
//
//   delta_t = beta_t (v_t - exp(G_t) S0^T k_t - sum_{s<t} exp(G_t-G_s) (k_t.k_s) delta_s)
//   o_t     = (exp(G_t) S0^T q_t + sum_{s<=t} exp(G_t-G_s) (q_t.k_s) delta_s) / sqrt(D)
//   S      <- exp(G_L) S0 + sum_s exp(G_L-G_s) k_s delta_s^T
//
// so the state is read for all rows of a chunk at once (S0^T k, S0^T q)
// and written once per chunk; S0^T k_t, S0^T q_t and delta_t live in xs
// after its T rows (3·CHUNK·D values per value head).
//
// An unbatched step runs its step[STEP_ROWS] rows from position
// step[STEP_POS] on; a batched step (pos_at != 0) runs delta_rule once per
// row, row0 binding that row's sequence's state, and an unused row
// (position 0xffffffff) does nothing (step_span).

struct DeltaParams {
    key_heads: u32,
    value_heads: u32,
    head_dim: u32,
    width: u32,   // convolution taps W
    nrows: u32,   // rows of the buffers (Tokens)
    eps: f32,     // the L2 norms' floor
    qkv_f16: u32, // 1: qkv is an f16 activation (packed halves)
    beta_f16: u32,
    alpha_f16: u32,
    out_f16: u32,
    row0: u32,    // a batched step's row of this dispatch (0 unbatched)
    pos_at: u32,  // row_pos: 0 unbatched, else the word of row 0's position
    wt: u32,      // a WeightType (f32, f16, bf16) of the taps conv
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: DeltaParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> beta_w: array<u32>;
@group(0) @binding(3) var<storage, read> alpha_w: array<u32>;
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read> a: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> xs: array<f32>;
@group(0) @binding(8) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: beta, alpha, out
// include: row_pos
// include: step_span

const WG: u32 = 64u;
const COLS: u32 = 4u;   // value columns per invocation: head dims up to 256
const CHUNK: u32 = 32u; // rows per chunk of delta_chunk

// Per chunk: G (the cumulative log decays), beta, and the decayed dot
// products of the rows' keys with earlier keys (kk) and with queries (qk).
var<workgroup> cum: array<f32, 32>;
var<workgroup> betas: array<f32, 32>;
var<workgroup> kk: array<f32, 1024>;
var<workgroup> qk: array<f32, 1024>;

// gates returns (beta, g) of row t, value head h.
fn gates(t: u32, h: u32) -> vec2<f32> {
    let i = t * p.value_heads + h;
    let x = alpha_at(i) + dt_bias[h];
    var sp = x;
    if x <= 20.0 {
        sp = log(1.0 + exp(x));
    }
    return vec2<f32>(1.0 / (1.0 + exp(-beta_at(i))), sp * a[h]);
}

// head_at is the index in xs of row t's head n (q heads 0..K-1, k heads
// K..2K-1, v heads 2K..).
fn head_at(t: u32, n: u32) -> u32 {
    return (t * (2u * p.key_heads + p.value_heads) + n) * p.head_dim;
}

// matrix is the index of head h's state matrix in state.
fn matrix(h: u32) -> u32 {
    let ch = (2u * p.key_heads + p.value_heads) * p.head_dim;
    return ch * (p.width - 1u) + h * p.head_dim * p.head_dim;
}

// clear_fresh zeroes the columns of head h's matrix this invocation owns
// when the step's row t0 is at position 0.
fn clear_fresh(s0: u32, i: u32, t0: u32) {
    if row_pos(t0) != 0u {
        return;
    }
    let d = p.head_dim;
    for (var m = 0u; m < COLS; m++) {
        let j = i + m * WG;
        if j < d {
            for (var r = 0u; r < d; r++) {
                state[s0 + r * d + j] = 0.0;
            }
        }
    }
}

@compute @workgroup_size(64)
fn delta_rule(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let d = p.head_dim;
    let kh = h % p.key_heads;
    let s0 = matrix(h);
    let i = lid.x;
    let scale = 1.0 / sqrt(f32(d));
    let span = step_span();
    if span.y == 0u {
        return;
    }
    clear_fresh(s0, i, span.x);
    for (var t = span.x; t < span.x + span.y; t++) {
        let bg = gates(t, h);
        let gamma = exp(bg.y);
        let q = head_at(t, kh);
        let k = head_at(t, p.key_heads + kh);
        let v = head_at(t, 2u * p.key_heads + h);
        for (var m = 0u; m < COLS; m++) {
            let j = i + m * WG;
            if j >= d {
                break;
            }
            var u = 0.0;
            for (var r = 0u; r < d; r++) {
                u += state[s0 + r * d + j] * xs[k + r];
            }
            let delta = bg.x * (xs[v + j] - gamma * u);
            var o = 0.0;
            for (var r = 0u; r < d; r++) {
                let s = gamma * state[s0 + r * d + j] + xs[k + r] * delta;
                state[s0 + r * d + j] = s;
                o += s * xs[q + r];
            }
            out_set((t * p.value_heads + h) * d + j, o * scale);
        }
    }
}

// dot_rows is the dot product of the D values at xs[x] and xs[y].
fn dot_rows(x: u32, y: u32) -> f32 {
    var s = 0.0;
    for (var r = 0u; r < p.head_dim; r++) {
        s += xs[x + r] * xs[y + r];
    }
    return s;
}

@compute @workgroup_size(64)
fn delta_chunk(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let d = p.head_dim;
    let kh = h % p.key_heads;
    let s0 = matrix(h);
    let i = lid.x;
    let scale = 1.0 / sqrt(f32(d));
    // An unbatched step's rows (the planner runs batched steps with
    // delta_rule).
    let rows = step_span().y;
    if rows == 0u {
        return;
    }
    // This head's scratch after the T rows: S0^T k, S0^T q and delta, each
    // [CHUNK][D].
    let ks = (p.nrows * (2u * p.key_heads + p.value_heads) * d) + h * 3u * CHUNK * d;
    let qs = ks + CHUNK * d;
    let dl = qs + CHUNK * d;
    clear_fresh(s0, i, 0u);
    for (var t0 = 0u; t0 < rows; t0 += CHUNK) {
        let n = min(CHUNK, rows - t0);
        // The last chunk's readers of cum, betas, kk, qk and the scratch
        // are done.
        storageBarrier();
        workgroupBarrier();
        if i == 0u {
            var g = 0.0;
            for (var t = 0u; t < n; t++) {
                let bg = gates(t0 + t, h);
                g += bg.y;
                cum[t] = g;
                betas[t] = bg.x;
            }
        }
        // S0^T k_t and S0^T q_t for every (row, column), across the
        // workgroup: every column of S0 is settled (barrier below).
        storageBarrier();
        workgroupBarrier();
        for (var e = i; e < n * d; e += WG) {
            let t = e / d;
            let j = e % d;
            let k = head_at(t0 + t, p.key_heads + kh);
            let q = head_at(t0 + t, kh);
            var uk = 0.0;
            var uq = 0.0;
            for (var r = 0u; r < d; r++) {
                let s = state[s0 + r * d + j];
                uk += s * xs[k + r];
                uq += s * xs[q + r];
            }
            xs[ks + t * d + j] = uk;
            xs[qs + t * d + j] = uq;
        }
        // The decayed key-key and query-key products, s <= t.
        for (var e = i; e < n * n; e += WG) {
            let t = e / n;
            let s = e % n;
            var dk = 0.0;
            var dq = 0.0;
            if s <= t {
                let decay = exp(cum[t] - cum[s]);
                let kt = head_at(t0 + t, p.key_heads + kh);
                let kss = head_at(t0 + s, p.key_heads + kh);
                dq = decay * dot_rows(head_at(t0 + t, kh), kss);
                if s < t {
                    dk = decay * dot_rows(kt, kss);
                }
            }
            kk[t * CHUNK + s] = dk;
            qk[t * CHUNK + s] = dq;
        }
        storageBarrier();
        workgroupBarrier();
        // Per owned column: the deltas forward, each row's output, then the
        // column of the state at the chunk's end.
        for (var m = 0u; m < COLS; m++) {
            let j = i + m * WG;
            if j >= d {
                break;
            }
            for (var t = 0u; t < n; t++) {
                let gt = exp(cum[t]);
                var acc = 0.0;
                for (var s = 0u; s < t; s++) {
                    acc += kk[t * CHUNK + s] * xs[dl + s * d + j];
                }
                let v = head_at(t0 + t, 2u * p.key_heads + h);
                let delta = betas[t] * (xs[v + j] - gt * xs[ks + t * d + j] - acc);
                xs[dl + t * d + j] = delta;
                var o = gt * xs[qs + t * d + j];
                for (var s = 0u; s <= t; s++) {
                    o += qk[t * CHUNK + s] * xs[dl + s * d + j];
                }
                out_set(((t0 + t) * p.value_heads + h) * d + j, o * scale);
            }
            let gl = exp(cum[n - 1u]);
            for (var r = 0u; r < d; r++) {
                var s = gl * state[s0 + r * d + j];
                for (var u = 0u; u < n; u++) {
                    s += exp(cum[n - 1u] - cum[u]) * xs[head_at(t0 + u, p.key_heads + kh) + r] * xs[dl + u * d + j];
                }
                state[s0 + r * d + j] = s;
            }
        }
    }
}
