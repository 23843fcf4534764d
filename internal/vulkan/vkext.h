// vkext.h declares the few Vulkan 1.1/1.2 structures and entry points that the
// Vulkan 1.0 Go binding cannot reach: the features/properties "2" queries and
// device creation with a features chain. The layouts mirror the Vulkan
// headers; vkext_check.c asserts that they match whenever the system headers
// are installed. Names carry a gr_ prefix so both can coexist.

#ifndef GPURUN_VKEXT_H
#define GPURUN_VKEXT_H

#include <stdint.h>

typedef uint32_t gr_bool32;

// Handles are opaque pointers to the driver; the Go side converts its own
// binding's handle types through unsafe.Pointer.
typedef void* gr_instance;
typedef void* gr_physical_device;
typedef void* gr_device;

// gr_caps is everything the Go side learns from the chained queries, flat so
// that cgo can read it without following pointers.
typedef struct {
	int32_t has_props2;    // vkGetPhysicalDeviceProperties2 was callable
	int32_t has_driver;    // driver name/info below are valid (Vulkan 1.2)
	int32_t driver_id;
	char driver_name[256];
	char driver_info[256];
	uint32_t subgroup_size;
	uint32_t subgroup_stages;
	uint32_t subgroup_ops;
	uint64_t max_memory_allocation; // 0 when unknown

	gr_bool32 shader_float16;
	gr_bool32 shader_int8;
	gr_bool32 storage_buffer16;
	gr_bool32 uniform_storage16;
	gr_bool32 storage_buffer8;
	gr_bool32 uniform_storage8;
	gr_bool32 shader_int16;
	gr_bool32 shader_int64;
} gr_caps;

// gr_load opens the Vulkan loader (libvulkan.so.1, then libvulkan.so) and
// returns its vkGetInstanceProcAddr, or NULL when there is none.
void* gr_load(void);

// gr_instance_version returns the loader's instance version, 1.0 when the
// loader predates vkEnumerateInstanceVersion.
uint32_t gr_instance_version(void);

// gr_query fills caps for a physical device whose apiVersion is api.
void gr_query(gr_instance inst, gr_physical_device phys, uint32_t api, gr_caps* caps);

// gr_create_device creates a logical device with one compute queue from
// queue_family, enabling every optional feature gr_query reports (16-bit and
// 8-bit storage, f16/int8 arithmetic, int16/int64) so shaders may use them,
// and VK_KHR_portability_subset where the device offers it (MoltenVK).
// It returns the VkResult.
int32_t gr_create_device(gr_instance inst, gr_physical_device phys, uint32_t api, uint32_t queue_family, gr_device* out);

// gr_feedback is a pipeline's creation feedback (Vulkan 1.3) in C memory,
// for the pNext of a VkComputePipelineCreateInfo: gr_feedback_new links
// info to pipeline and stage; free it with free.
enum { gr_creation_feedback_valid = 1, gr_creation_feedback_cache_hit = 2 };
typedef struct gr_feedback gr_feedback;
gr_feedback* gr_feedback_new(void);
// gr_feedback_info is the chain link (a VkPipelineCreationFeedbackCreateInfo).
void* gr_feedback_info(gr_feedback* f);
// gr_feedback_flags is the pipeline's VkPipelineCreationFeedbackFlags.
uint32_t gr_feedback_flags(gr_feedback* f);

#endif
