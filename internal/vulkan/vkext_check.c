//go:build cgo

// Layout guard for vkext.c: when the Vulkan headers are installed, compare
// the hand-written structure shapes with the real ones at compile time, so a
// mismatch breaks the build instead of corrupting a driver call.

#if defined(__has_include)
#if __has_include(<vulkan/vulkan_core.h>)
#include <stddef.h>
#include <vulkan/vulkan_core.h>

#include "vkext_types.h"

#define GR_SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), #a " size")
#define GR_SAME_FIELD(a, fa, b, fb) _Static_assert(offsetof(a, fa) == offsetof(b, fb), #a "." #fa " offset")

_Static_assert(sizeof(VkPhysicalDeviceFeatures) == GR_CORE_FEATURES * sizeof(VkBool32), "VkPhysicalDeviceFeatures size");
_Static_assert(offsetof(VkPhysicalDeviceFeatures, robustBufferAccess) == gr_feature_robust_buffer_access * sizeof(VkBool32), "robustBufferAccess index");
_Static_assert(offsetof(VkPhysicalDeviceFeatures, shaderInt64) == gr_feature_shader_int64 * sizeof(VkBool32), "shaderInt64 index");
_Static_assert(offsetof(VkPhysicalDeviceFeatures, shaderInt16) == gr_feature_shader_int16 * sizeof(VkBool32), "shaderInt16 index");
GR_SAME_SIZE(gr_features2, VkPhysicalDeviceFeatures2);
GR_SAME_FIELD(gr_features2, features, VkPhysicalDeviceFeatures2, features);
GR_SAME_SIZE(gr_16bit_storage, VkPhysicalDevice16BitStorageFeatures);
GR_SAME_FIELD(gr_16bit_storage, storageInputOutput16, VkPhysicalDevice16BitStorageFeatures, storageInputOutput16);
GR_SAME_SIZE(gr_f16_int8, VkPhysicalDeviceShaderFloat16Int8Features);
GR_SAME_FIELD(gr_f16_int8, shaderInt8, VkPhysicalDeviceShaderFloat16Int8Features, shaderInt8);
GR_SAME_SIZE(gr_8bit_storage, VkPhysicalDevice8BitStorageFeatures);
GR_SAME_FIELD(gr_8bit_storage, storagePushConstant8, VkPhysicalDevice8BitStorageFeatures, storagePushConstant8);
_Static_assert(sizeof(VkPhysicalDeviceProperties) <= sizeof(((gr_properties2*)0)->properties), "properties blob too small");
GR_SAME_FIELD(gr_properties2, properties, VkPhysicalDeviceProperties2, properties);
GR_SAME_SIZE(gr_subgroup_props, VkPhysicalDeviceSubgroupProperties);
GR_SAME_FIELD(gr_subgroup_props, quadOperationsInAllStages, VkPhysicalDeviceSubgroupProperties, quadOperationsInAllStages);
GR_SAME_SIZE(gr_driver_props, VkPhysicalDeviceDriverProperties);
GR_SAME_FIELD(gr_driver_props, driverInfo, VkPhysicalDeviceDriverProperties, driverInfo);
GR_SAME_SIZE(gr_maintenance3_props, VkPhysicalDeviceMaintenance3Properties);
GR_SAME_FIELD(gr_maintenance3_props, maxMemoryAllocationSize, VkPhysicalDeviceMaintenance3Properties, maxMemoryAllocationSize);
GR_SAME_SIZE(gr_device_queue_create_info, VkDeviceQueueCreateInfo);
GR_SAME_FIELD(gr_device_queue_create_info, pQueuePriorities, VkDeviceQueueCreateInfo, pQueuePriorities);
GR_SAME_SIZE(gr_device_create_info, VkDeviceCreateInfo);
GR_SAME_FIELD(gr_device_create_info, pEnabledFeatures, VkDeviceCreateInfo, pEnabledFeatures);
GR_SAME_SIZE(gr_creation_feedback, VkPipelineCreationFeedback);
GR_SAME_FIELD(gr_creation_feedback, duration, VkPipelineCreationFeedback, duration);
GR_SAME_SIZE(gr_creation_feedback_info, VkPipelineCreationFeedbackCreateInfo);
GR_SAME_FIELD(gr_creation_feedback_info, pPipelineStageCreationFeedbacks, VkPipelineCreationFeedbackCreateInfo, pPipelineStageCreationFeedbacks);
_Static_assert((int)gr_st_creation_feedback_info == (int)VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO, "sType");
_Static_assert((int)gr_creation_feedback_valid == (int)VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT, "valid bit");
_Static_assert((int)gr_creation_feedback_cache_hit == (int)VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT, "cache hit bit");
_Static_assert((int)gr_st_features2 == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "sType");
_Static_assert((int)gr_st_properties2 == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "sType");
_Static_assert((int)gr_st_16bit_storage == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, "sType");
_Static_assert((int)gr_st_f16_int8 == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, "sType");
_Static_assert((int)gr_st_8bit_storage == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, "sType");
_Static_assert((int)gr_st_subgroup_props == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, "sType");
_Static_assert((int)gr_st_driver_props == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, "sType");
_Static_assert((int)gr_st_maintenance3_props == (int)VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, "sType");
_Static_assert((int)gr_st_device_create_info == (int)VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "sType");
_Static_assert((int)gr_st_device_queue_create_info == (int)VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, "sType");
#endif
#endif
