package vulkan

// The test kernels are committed as SPIR-V so tests need no shader compiler.
//go:generate naga --spirv-version 1.3 testdata/add.wgsl testdata/add.spv
//go:generate naga --spirv-version 1.3 testdata/affine.wgsl testdata/affine.spv
