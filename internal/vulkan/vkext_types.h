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

// The structures of the calls in vkcalls.c (Vulkan 1.0). Non-dispatchable
// handles are uint64_t, dispatchable ones pointers; flags are uint32_t.
enum {
	gr_st_application_info = 0,
	gr_st_instance_create_info = 1,
	gr_st_submit_info = 4,
	gr_st_shader_module_create_info = 16,
	gr_st_pipeline_shader_stage_create_info = 18,
	gr_st_compute_pipeline_create_info = 29,
	gr_st_pipeline_layout_create_info = 30,
	gr_st_descriptor_set_layout_create_info = 32,
	gr_st_descriptor_pool_create_info = 33,
	gr_st_descriptor_set_allocate_info = 34,
	gr_st_write_descriptor_set = 35,
	gr_st_command_pool_create_info = 39,
	gr_st_command_buffer_allocate_info = 40,
	gr_st_command_buffer_begin_info = 42,
	gr_st_memory_barrier = 46,
};
enum {
	gr_shader_stage_compute = 0x20,
	gr_descriptor_uniform_buffer = 6,
	gr_descriptor_storage_buffer = 7,
};

typedef struct {
	int32_t sType; const void* pNext; const char* pApplicationName; uint32_t applicationVersion; const char* pEngineName;
	uint32_t engineVersion; uint32_t apiVersion;
} gr_application_info;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; const gr_application_info* pApplicationInfo;
	uint32_t enabledLayerCount; const char* const* ppEnabledLayerNames;
	uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames;
} gr_instance_create_info;
typedef struct { int32_t sType; const void* pNext; uint32_t flags; size_t codeSize; const uint32_t* pCode; } gr_shader_module_create_info;
typedef struct {
	uint32_t binding; int32_t descriptorType; uint32_t descriptorCount; uint32_t stageFlags; const uint64_t* pImmutableSamplers;
} gr_set_layout_binding;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; uint32_t bindingCount; const gr_set_layout_binding* pBindings;
} gr_set_layout_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; uint32_t setLayoutCount; const uint64_t* pSetLayouts;
	uint32_t pushConstantRangeCount; const void* pPushConstantRanges;
} gr_pipeline_layout_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; uint32_t stage; uint64_t module; const char* pName;
	const void* pSpecializationInfo;
} gr_shader_stage_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; gr_shader_stage_create_info stage; uint64_t layout;
	uint64_t basePipelineHandle; int32_t basePipelineIndex;
} gr_compute_pipeline_create_info;
typedef struct { int32_t type; uint32_t descriptorCount; } gr_pool_size;
typedef struct {
	int32_t sType; const void* pNext; uint32_t flags; uint32_t maxSets; uint32_t poolSizeCount; const gr_pool_size* pPoolSizes;
} gr_pool_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint64_t descriptorPool; uint32_t descriptorSetCount; const uint64_t* pSetLayouts;
} gr_set_allocate_info;
typedef struct { uint64_t buffer; uint64_t offset; uint64_t range; } gr_buffer_info;
typedef struct {
	int32_t sType; const void* pNext; uint64_t dstSet; uint32_t dstBinding; uint32_t dstArrayElement; uint32_t descriptorCount;
	int32_t descriptorType; const void* pImageInfo; const gr_buffer_info* pBufferInfo; const uint64_t* pTexelBufferView;
} gr_write_set;
typedef struct {
	int32_t sType; const void* pNext; uint32_t waitSemaphoreCount; const uint64_t* pWaitSemaphores;
	const uint32_t* pWaitDstStageMask; uint32_t commandBufferCount; void* const* pCommandBuffers;
	uint32_t signalSemaphoreCount; const uint64_t* pSignalSemaphores;
} gr_submit_info;
typedef struct { int32_t sType; const void* pNext; uint32_t srcAccessMask; uint32_t dstAccessMask; } gr_memory_barrier_info;
typedef struct { uint64_t srcOffset; uint64_t dstOffset; uint64_t size; } gr_buffer_copy;
typedef struct { int32_t sType; const void* pNext; uint32_t flags; const void* pInheritanceInfo; } gr_begin_info;
typedef struct { int32_t sType; const void* pNext; uint32_t flags; uint32_t queueFamilyIndex; } gr_command_pool_create_info;
typedef struct {
	int32_t sType; const void* pNext; uint64_t commandPool; int32_t level; uint32_t commandBufferCount;
} gr_command_buffer_allocate_info;

#endif
