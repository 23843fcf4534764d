// Test kernel: data[i] += params.add for i < params.n.
// Regenerate add.spv with `go generate ./internal/vulkan`.

struct Params {
    n: u32,
    add: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        data[i] = data[i] + params.add;
    }
}
