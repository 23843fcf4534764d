// Elementwise kernels over rows t < T of cols values each.
// glu: out = act(a) * b; act: out = act(a); add: out = a + b;
// softcap: out = cap * tanh(a / cap); last_row: out[0] = a[T-1].
// Dispatch: (ceil(cols/64), Tokens, 1); last_row (ceil(cols/64), 1, 1).

struct EltParams {
    cols: u32,
    act: u32, // 0 silu, 1 gelu_tanh, 2 gelu (erf), 3 relu
    cap: f32,
    pad0: u32,
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

fn activate(v: f32) -> f32 {
    var r = 0.0;
    switch p.act {
        case 0u: { r = v / (1.0 + exp(-v)); }
        case 1u: {
            // 0.7978845608 = sqrt(2/pi)
            r = 0.5 * v * (1.0 + tanh_safe(0.7978845608 * (v + 0.044715 * v * v * v)));
        }
        case 2u: { r = 0.5 * v * (1.0 + erf_approx(v * 0.7071067812)); }
        default: { r = max(v, 0.0); }
    }
    return r;
}

// index returns the element of (gid.x, gid.y) or false when out of range.
fn in_range(gid: vec3<u32>) -> bool {
    return gid.x < p.cols && gid.y < step[1];
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
