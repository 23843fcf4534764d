// vkext_types.h holds the hand-written shapes of the Vulkan 1.1/1.2
// structures vkext.c chains together; vkext_check.c compares them with the
// system headers when those are installed.

#ifndef GPURUN_VKEXT_TYPES_H
#define GPURUN_VKEXT_TYPES_H

#include <stdint.h>

#include "vkext.h"

enum {
	gr_st_device_queue_create_info = 2,
	gr_st_device_create_info = 3,
	gr_st_features2 = 1000059000,
	gr_st_properties2 = 1000059001,
	gr_st_16bit_storage = 1000083000,
	gr_st_f16_int8 = 1000082000,
	gr_st_8bit_storage = 1000177000,
	gr_st_subgroup_props = 1000094000,
	gr_st_driver_props = 1000196000,
	gr_st_maintenance3_props = 1000168000,
	gr_st_creation_feedback_info = 1000192000,
};

#define GR_API_1_1 ((1u << 22) | (1u << 12))
#define GR_API_1_2 ((1u << 22) | (2u << 12))
#define GR_API_1_3 ((1u << 22) | (3u << 12))

// Shapes of the Vulkan structures (see vkext_check.c for the layout guard).
typedef struct { int32_t sType; void* pNext; } gr_base;

// VkPhysicalDeviceFeatures is 55 VkBool32 flags in declaration order; the
// indices of the ones this package touches are gr_feature_*.
#define GR_CORE_FEATURES 55
enum { gr_feature_robust_buffer_access = 0, gr_feature_shader_int64 = 40, gr_feature_shader_int16 = 41 };
typedef struct { int32_t sType; void* pNext; gr_bool32 features[GR_CORE_FEATURES]; } gr_features2;

typedef struct { int32_t sType; void* pNext; gr_bool32 storageBuffer16BitAccess, uniformAndStorageBuffer16BitAccess, storagePushConstant16, storageInputOutput16; } gr_16bit_storage;
typedef struct { int32_t sType; void* pNext; gr_bool32 shaderFloat16, shaderInt8; } gr_f16_int8;
typedef struct { int32_t sType; void* pNext; gr_bool32 storageBuffer8BitAccess, uniformAndStorageBuffer8BitAccess, storagePushConstant8; } gr_8bit_storage;

// VkPhysicalDeviceProperties2 embeds the 1.0 properties, which the Go side
// reads through the 1.0 binding; a generously sized, 8-byte aligned blob
// receives them here (the real structure is 824 bytes on 64-bit targets).
typedef struct { int32_t sType; void* pNext; uint64_t properties[256]; } gr_properties2;
typedef struct { int32_t sType; void* pNext; uint32_t subgroupSize, supportedStages, supportedOperations; gr_bool32 quadOperationsInAllStages; } gr_subgroup_props;
typedef struct { int32_t sType; void* pNext; int32_t driverID; char driverName[256]; char driverInfo[256]; uint8_t conformance[4]; } gr_driver_props;
typedef struct { int32_t sType; void* pNext; uint32_t maxPerSetDescriptors; uint64_t maxMemoryAllocationSize; } gr_maintenance3_props;

typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; uint32_t queueFamilyIndex; uint32_t queueCount; const float* pQueuePriorities;
} gr_device_queue_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags;
	uint32_t queueCreateInfoCount; const gr_device_queue_create_info* pQueueCreateInfos;
	uint32_t enabledLayerCount; const char* const* ppEnabledLayerNames;
	uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames;
	const void* pEnabledFeatures;
} gr_device_create_info;

// Pipeline creation feedback (Vulkan 1.3): whether the pipeline came from
// the application's pipeline cache.
typedef struct { uint32_t flags; uint64_t duration; } gr_creation_feedback;
typedef struct {
	int32_t sType; const void* pNext; gr_creation_feedback* pPipelineCreationFeedback;
	uint32_t pipelineStageCreationFeedbackCount; gr_creation_feedback* pPipelineStageCreationFeedbacks;
} gr_creation_feedback_info;

#endif
