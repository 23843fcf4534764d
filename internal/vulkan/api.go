package vulkan

// The part of the package's API that does not need cgo: the types and names
// the commands and the module root use, shared by the Vulkan build and the
// stub (nocgo.go) that a build without cgo gets.

import (
	"time"

	"github.com/gpurun/gpurun/gpu"
)

// DeviceInfo is gpu.Info and gpu.Caps plus the Vulkan details `gpurun
// devices` prints.
type DeviceInfo struct {
	gpu.Info
	gpu.Caps

	Index      int    // position in vkEnumeratePhysicalDevices order
	VendorID   uint32 // PCI vendor
	DeviceID   uint32
	APIVersion string // device API version, "1.3.230"

	// DriverName and DriverInfo come from VkPhysicalDeviceDriverProperties
	// (Vulkan 1.2); empty on older drivers. DriverVersion is the raw
	// driverVersion decoded with the vendor's convention.
	DriverName    string
	DriverInfo    string
	DriverVersion string

	// Optional features as reported by vkGetPhysicalDeviceFeatures2 (all
	// false when the device or loader predates Vulkan 1.1). Open enables
	// every one that is reported.
	ShaderFloat16 bool // f16 arithmetic
	ShaderInt8    bool
	ShaderInt16   bool
	ShaderInt64   bool
	Storage16Bit  bool // 16-bit values in storage buffers
	Storage8Bit   bool

	// SubgroupSize and SubgroupOps (basic, vote, arithmetic, ballot, shuffle,
	// shuffle_relative, clustered, quad) are from Vulkan 1.1 subgroup
	// properties; 0 and nil when unknown or not available in compute.
	SubgroupSize int
	SubgroupOps  []string

	TimestampPeriod float64 // nanoseconds per timestamp tick
	TimestampBits   int     // valid bits of the compute queue's timestamps

	// UnifiedMemory: buffers live in host-mapped device memory (no staging).
	UnifiedMemory bool

	MaxUniformBinding int64
	MaxWorkgroupCount [3]int
	MaxWorkgroupSize  [3]int
}

// PipelineCacheEnv names the environment variable that sets where the
// persistent pipeline cache lives: a directory, or "off" to keep pipelines
// in memory only. Unset, the cache is os.UserCacheDir()/gpurun/vulkan
// ($XDG_CACHE_HOME/gpurun/vulkan or ~/.cache/gpurun/vulkan on Linux).
const PipelineCacheEnv = "GPURUN_PIPELINE_CACHE"

// PipelineCacheStats says what the device's pipeline cache did.
type PipelineCacheStats struct {
	// Path is the cache file ("" when the cache is off).
	Path string
	// LoadedBytes is the size of the Vulkan data read from the file when the
	// device opened (0: none, the cache started cold).
	LoadedBytes int
	// Pipelines counts the compute pipelines created; WarmPipelines those
	// created while the cache held loaded data (each a potential hit: the
	// driver may skip compiling it).
	Pipelines, WarmPipelines int
	// Feedback: the driver reports pipeline creation feedback (Vulkan
	// 1.3), and Hits counts the pipelines it reported as found in the
	// application's pipeline cache (0 without feedback): loaded from the
	// file, or created earlier in this process from the same shader
	// (SwiftShader reports those too).
	Feedback bool
	Hits     int
	// CompileTime is the time spent in vkCreateComputePipelines.
	CompileTime time.Duration
	// SavedBytes is the size of the Vulkan data last written to the file.
	SavedBytes int
	// DriverEmpty: the driver's cache data held nothing past its header
	// when the device closed (Mesa 22's lavapipe and SwiftShader keep no
	// pipelines in a VkPipelineCache), so no file was written.
	DriverEmpty bool
	// Warning says why a cache file was ignored or could not be written.
	Warning string
}
