//go:build cgo

package vulkan

// loaderHint names the Vulkan loader vkext.c looks for and where it comes
// from, for the error when it is missing.
const loaderHint = "libvulkan.1.dylib or libMoltenVK.dylib (install the Vulkan SDK, or Homebrew's molten-vk and vulkan-loader; the webgpu backend needs neither)"

// driverHint says where a Vulkan driver comes from, for the error when the
// loader finds none.
const driverHint = "install MoltenVK (the Vulkan SDK or Homebrew's molten-vk), or use --backend webgpu (Metal) or cpu"
