// Package vulkan implements gpu.Device on raw Vulkan through
// github.com/vulkan-go/vulkan (Vulkan 1.0 entry points). The few 1.1/1.2
// queries the binding cannot reach (feature and property chains, device
// creation with 16-bit storage and f16 arithmetic enabled) go through a small
// C helper in vkext.c, which also opens the loader (libvulkan.so.1), so only
// the runtime library is needed, not the unversioned development symlink.
//
// Model of execution: one compute queue, submissions serialized by a mutex
// and tracked with fences. Every recorded dispatch or copy is preceded by a
// full compute/transfer memory barrier, so commands in a list (and across
// submissions) see each other's writes in order. Recorded command lists are
// re-submittable any number of times: descriptor sets are allocated and
// written at record time from pools owned by the list.
//
// Memory: when one memory type is device-local, host-visible and coherent
// and sits on the largest device-local heap (lavapipe, integrated GPUs,
// resizable BAR), buffers are persistently mapped and Write/Read copy
// directly. Otherwise buffers are device-local and Write/Read go through a
// host-visible staging buffer with transfer copies. Copies have no size or
// alignment restriction in either mode; kernels that address u32 words see
// buffers rounded up to a multiple of 4 bytes (the tail is zero).
//
// Pipeline cache: compute pipelines are created through a VkPipelineCache
// seeded from a file in os.UserCacheDir()/gpurun/vulkan (the directory
// GPURUN_PIPELINE_CACHE names instead; "off" keeps nothing on disk), one
// file per device, driver (vendor and device id, pipelineCacheUUID, driver
// version) and gpurun revision. Close writes the driver's cache data back
// when pipelines were created, under a temporary name renamed into place,
// so concurrent processes never read a partial file. A file that fails its
// checks (our magic, length and SHA-256, then the Vulkan header's length,
// version, vendor, device and UUID) is ignored with a warning on stderr
// and replaced. Drivers that keep nothing in a pipeline cache (Mesa 22's
// lavapipe, SwiftShader return only the header) get no file.
// Device.PipelineCacheStats counts what was loaded and created warm.
package vulkan
