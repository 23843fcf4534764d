// Elementwise kernels over rows t < T of cols values each.
// glu: out = act(a) * b; act: out = act(a); add: out = a + b (add_inplace:
// out += b);
// softcap: out = cap * tanh(a / cap); last_row: out[0] = a[T-1].
// Dispatch: (ceil(cols/64), nrows, 1); last_row (ceil(cols/64), 1, 1).

struct EltParams {
    cols: u32,
    act: u32, // 0 silu, 1 gelu_tanh, 2 gelu (erf), 3 relu
    cap: f32,
    nrows: u32, // rows of the buffers (Tokens, or 1 after LastRow)
}

@group(0) @binding(0) var<uniform> p: EltParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

// erf_approx: Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7.
fn erf_approx(x: f32) -> f32 {
    let z = abs(x);
    let k = 1.0 / (1.0 + 0.3275911 * z);
    let poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// to_f16 rounds to the nearest binary16 value.
fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// gelu_tanh is the tanh approximation of GELU as llama.cpp's CPU backend (and
// so the CPU reference, gpu/cpu) evaluates it: the input rounded to binary16,
// the f32 formula, the result rounded to binary16; inputs <= -10 give 0 and
// inputs >= 10 pass through.
fn gelu_tanh(v: f32) -> f32 {
    if v <= -10.0 {
        return 0.0;
    }
    if v >= 10.0 {
        return v;
    }
    let x = to_f16(v);
    // 0.7978845608 = sqrt(2/pi)
    let g = 0.5 * x * (1.0 + tanh_safe(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
    return to_f16(g);
}

fn activate(v: f32) -> f32 {
    var r = 0.0;
    switch p.act {
        case 0u: { r = v / (1.0 + exp(-v)); }
        case 1u: { r = gelu_tanh(v); }
        case 2u: { r = 0.5 * v * (1.0 + erf_approx(v * 0.7071067812)); }
        default: { r = max(v, 0.0); }
    }
    return r;
}

// in_range reports whether (gid.x, gid.y) is a column and row < T to compute.
fn in_range(gid: vec3<u32>) -> bool {
    return gid.x < p.cols && gid.y < min(step[1], p.nrows);
}

@compute @workgroup_size(64)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out[i] = activate(a[i]) * b[i];
}

@compute @workgroup_size(64)
fn act(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out[i] = activate(a[i]);
}

@compute @workgroup_size(64)
fn add(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out[i] = a[i] + b[i];
}

// add_inplace: out += b, for residual adds whose output is their first
// input (binding a is unused), without copying out aside first.
@compute @workgroup_size(64)
fn add_inplace(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out[i] = out[i] + b[i];
}

@compute @workgroup_size(64)
fn softcap(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !in_range(gid) {
        return;
    }
    let i = gid.y * p.cols + gid.x;
    out[i] = p.cap * tanh_safe(a[i] / p.cap);
}

@compute @workgroup_size(64)
fn last_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = step[1];
    if gid.x >= p.cols || n == 0u {
        return;
    }
    out[gid.x] = a[(n - 1u) * p.cols + gid.x];
}
