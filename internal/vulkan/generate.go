package vulkan

// The test kernels are committed as SPIR-V so tests need no shader compiler.
//go:generate naga --spirv-version 1.3 testdata/add.wgsl testdata/add.spv
//go:generate naga --spirv-version 1.3 testdata/affine.wgsl testdata/affine.spv
//go:generate glslc -O --target-env=vulkan1.2 -fshader-stage=compute testdata/half.comp -o testdata/half.spv
