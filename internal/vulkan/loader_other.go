//go:build cgo && !windows && !darwin

package vulkan

// loaderHint names the Vulkan loader vkext.c looks for and where it comes
// from, for the error when it is missing.
const loaderHint = "libvulkan.so.1 (install the Vulkan loader and a driver such as mesa-vulkan-drivers)"

// driverHint says where a Vulkan driver comes from, for the error when the
// loader finds none.
const driverHint = "install mesa-vulkan-drivers for lavapipe"
