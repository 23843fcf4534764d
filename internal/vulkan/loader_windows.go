//go:build cgo

package vulkan

// loaderHint names the Vulkan loader vkext.c looks for and where it comes
// from, for the error when it is missing.
const loaderHint = "vulkan-1.dll (the Vulkan loader, installed with the GPU's driver or the Vulkan runtime)"

// driverHint says where a Vulkan driver comes from, for the error when the
// loader finds none.
const driverHint = "install the GPU vendor's driver, or use --backend webgpu (D3D12) or cpu"
