// Test kernel for the optional features Open enables: 16-bit storage and
// f16 arithmetic. dst[i] = src[i] * params.scale + src[i], all in f16.
// Regenerate half.spv with `go generate ./internal/vulkan`.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) uniform Params {
    uint n;
    float scale;
} params;
layout(set = 0, binding = 1) readonly buffer Src { float16_t src[]; };
layout(set = 0, binding = 2) buffer Dst { float16_t dst[]; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < params.n) {
        float16_t s = float16_t(params.scale);
        dst[i] = src[i] * s + src[i];
    }
}
