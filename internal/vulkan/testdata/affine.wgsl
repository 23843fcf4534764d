// Test kernel: dst[i] = src[i] * params.scale + params.shift for i < params.n.
// Regenerate affine.spv with `go generate ./internal/vulkan`.

struct Params {
    n: u32,
    scale: f32,
    shift: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        dst[i] = src[i] * params.scale + params.shift;
    }
}
