// Elementwise kernels over rows t < T of cols values each.
// glu: out = act(a) * b (or sigmoid(a) * b: fusion.SigmoidGateOp); act:
// out = act(a); add: out = a + b (add_inplace: out += b);
// softcap: out = cap * tanh(a / cap); last_row: out[0] = a[T-1];
// scale: out[t][c] = a[t][a_off + c] * cap (times b's first value with
// has_b), Gemma 4's scalings (fusion.ScaleOp) and per-layer column runs
// (fusion.ColumnsOp: cap 1).
// Dispatch: (ceil(cols/64), nrows, 1); last_row (ceil(cols/64), 1, 1).

struct EltParams {
    cols: u32,
    act: u32, // an ACT_* code
    cap: f32,
    nrows: u32, // rows of the buffers (Tokens, or 1 after LastRow)
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    a_f16: u32,   // 1: a is an f16 activation (packed halves)
    b_f16: u32,   // 1: b is an f16 activation
    a_cols: u32,  // scale: the columns of a row of a; glu: 1 for a gate of one column
    a_off: u32,   // scale: the first column of a read
    has_b: u32,   // scale: 1 multiplies by b[0] (an f32 weight) too
    in_place: u32, // scale: 1 reads out (a unbound, a_cols = cols, a_off 0); glu: b is out
    sigmoid: u32, // glu: 1 gates with sigmoid(a) in place of act(a)
    pool_side: u32,   // scale: > 0 pools a's first pool_side² rows (a grid, row-major)
    pool_kernel: u32, // scale: cells per side of a pooled cell
    pad3: u32,
    pad4: u32,
}

@group(0) @binding(0) var<uniform> p: EltParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> a_w: array<u32>;
@group(0) @binding(3) var<storage, read> b_w: array<u32>;
@group(0) @binding(4) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: a, b, out

fn activate(v: f32) -> f32 {
    return apply_act(p.act, v);
}

// in_range reports whether (gid.x, gid.y) is a column and row < T to compute.
fn in_range(gid: vec3<u32>) -> bool {
    return gid.x < p.cols && gid.y < min(step[STEP_ROWS], p.nrows);
}

// glu also runs fusion.SigmoidGateOp (sigmoid 1, a the gate, b the
// input): with a_cols 1 a row's one gate value scales the whole row, and
// with in_place b is out itself (the gated attention output gated where
// it lies, no copy aside).
@compute @workgroup_size(64)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    var b: f32;
    if p.in_place != 0u {
        b = out_at(i);
    } else {
        b = b_at(i);
    }
    let a = a_at(select(i, gid.y, p.a_cols == 1u));
    var g: f32;
    if p.sigmoid != 0u {
        g = 1.0 / (1.0 + exp(-a));
    } else {
        g = activate(a);
    }
    out_set(i, g * b);
}

@compute @workgroup_size(64)
fn act(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out_set(i, activate(a_at(i)));
}

@compute @workgroup_size(64)
fn add(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out_set(i, a_at(i) + b_at(i));
}

// add_inplace: out += b, for residual adds whose output is their first
// input (binding a is unused), without copying out aside first.
@compute @workgroup_size(64)
fn add_inplace(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out_set(i, out_at(i) + b_at(i));
}

@compute @workgroup_size(64)
fn softcap(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out_set(i, p.cap * tanh_safe(a_at(i) / p.cap));
}

@compute @workgroup_size(64)
fn last_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = step[STEP_ROWS];
    if gid.x >= p.cols || n == 0u {
        return;
    }
    out_set(gid.x, a_at((n - 1u) * p.cols + gid.x));
}

// scale: out[t][c] = a[t][a_off + c] * s, s = cap * b[0] with has_b (a
// one-value weight: Gemma 4's layer_output_scale) or cap, the factor
// formed first as the CPU reference forms it; in_place reads out itself
// (a residual scaled where it lies, no copy aside). One kernel for
// fusion.ScaleOp (a_off 0) and fusion.ColumnsOp (cap 1: a run of each
// row's columns, exact for f32 and f16 activations alike); with pool_side
// > 0 the average pooling of fusion.AvgPoolOp (cap 1/kernel²).
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    var s = p.cap;
    if p.has_b != 0u {
        s = s * b_at(0u);
    }
    let i = gid.y * p.cols + gid.x;
    var v: f32;
    if p.pool_side > 0u {
        v = pooled(gid.y, gid.x);
    } else if p.in_place != 0u {
        v = out_at(i);
    } else {
        v = a_at(gid.y * p.a_cols + p.a_off + gid.x);
    }
    out_set(i, v * s);
}

// pooled is the sum of column c over the pool_kernel² cells of pooled cell
// t of a's grid (cell (r, c) at row r*pool_side + c), i outer, as the CPU
// reference sums them; 0 past the pooled grid (fusion.AvgPoolOp: the
// factor is 1/pool_kernel², applied after the sum).
fn pooled(t: u32, c: u32) -> f32 {
    let k = p.pool_kernel;
    let m = p.pool_side / k;
    if t >= m * m {
        return 0.0;
    }
    let r0 = t / m * k;
    let c0 = t % m * k;
    var sum = 0.0;
    for (var i = 0u; i < k; i++) {
        for (var j = 0u; j < k; j++) {
            sum += a_at(((r0 + i) * p.pool_side + c0 + j) * p.a_cols + p.a_off + c);
        }
    }
    return sum;
}
