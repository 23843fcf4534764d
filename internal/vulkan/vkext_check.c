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
GR_SAME_SIZE(gr_application_info, VkApplicationInfo);
GR_SAME_FIELD(gr_application_info, apiVersion, VkApplicationInfo, apiVersion);
GR_SAME_SIZE(gr_instance_create_info, VkInstanceCreateInfo);
GR_SAME_FIELD(gr_instance_create_info, ppEnabledExtensionNames, VkInstanceCreateInfo, ppEnabledExtensionNames);
_Static_assert((int)gr_st_application_info == (int)VK_STRUCTURE_TYPE_APPLICATION_INFO, "sType");
_Static_assert((int)gr_st_instance_create_info == (int)VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, "sType");
GR_SAME_SIZE(gr_shader_module_create_info, VkShaderModuleCreateInfo);
GR_SAME_FIELD(gr_shader_module_create_info, pCode, VkShaderModuleCreateInfo, pCode);
GR_SAME_SIZE(gr_set_layout_binding, VkDescriptorSetLayoutBinding);
GR_SAME_FIELD(gr_set_layout_binding, pImmutableSamplers, VkDescriptorSetLayoutBinding, pImmutableSamplers);
GR_SAME_SIZE(gr_set_layout_create_info, VkDescriptorSetLayoutCreateInfo);
GR_SAME_FIELD(gr_set_layout_create_info, pBindings, VkDescriptorSetLayoutCreateInfo, pBindings);
GR_SAME_SIZE(gr_pipeline_layout_create_info, VkPipelineLayoutCreateInfo);
GR_SAME_FIELD(gr_pipeline_layout_create_info, pSetLayouts, VkPipelineLayoutCreateInfo, pSetLayouts);
GR_SAME_FIELD(gr_pipeline_layout_create_info, pPushConstantRanges, VkPipelineLayoutCreateInfo, pPushConstantRanges);
GR_SAME_SIZE(gr_shader_stage_create_info, VkPipelineShaderStageCreateInfo);
GR_SAME_FIELD(gr_shader_stage_create_info, module, VkPipelineShaderStageCreateInfo, module);
GR_SAME_FIELD(gr_shader_stage_create_info, pSpecializationInfo, VkPipelineShaderStageCreateInfo, pSpecializationInfo);
GR_SAME_SIZE(gr_compute_pipeline_create_info, VkComputePipelineCreateInfo);
GR_SAME_FIELD(gr_compute_pipeline_create_info, stage, VkComputePipelineCreateInfo, stage);
GR_SAME_FIELD(gr_compute_pipeline_create_info, layout, VkComputePipelineCreateInfo, layout);
GR_SAME_FIELD(gr_compute_pipeline_create_info, basePipelineIndex, VkComputePipelineCreateInfo, basePipelineIndex);
GR_SAME_SIZE(gr_pool_size, VkDescriptorPoolSize);
GR_SAME_SIZE(gr_pool_create_info, VkDescriptorPoolCreateInfo);
GR_SAME_FIELD(gr_pool_create_info, pPoolSizes, VkDescriptorPoolCreateInfo, pPoolSizes);
GR_SAME_SIZE(gr_set_allocate_info, VkDescriptorSetAllocateInfo);
GR_SAME_FIELD(gr_set_allocate_info, pSetLayouts, VkDescriptorSetAllocateInfo, pSetLayouts);
GR_SAME_SIZE(gr_buffer_info, VkDescriptorBufferInfo);
GR_SAME_SIZE(gr_write_set, VkWriteDescriptorSet);
GR_SAME_FIELD(gr_write_set, descriptorType, VkWriteDescriptorSet, descriptorType);
GR_SAME_FIELD(gr_write_set, pBufferInfo, VkWriteDescriptorSet, pBufferInfo);
GR_SAME_FIELD(gr_write_set, pTexelBufferView, VkWriteDescriptorSet, pTexelBufferView);
GR_SAME_SIZE(gr_submit_info, VkSubmitInfo);
GR_SAME_FIELD(gr_submit_info, pCommandBuffers, VkSubmitInfo, pCommandBuffers);
GR_SAME_FIELD(gr_submit_info, pSignalSemaphores, VkSubmitInfo, pSignalSemaphores);
GR_SAME_SIZE(gr_memory_barrier_info, VkMemoryBarrier);
GR_SAME_FIELD(gr_memory_barrier_info, dstAccessMask, VkMemoryBarrier, dstAccessMask);
GR_SAME_SIZE(gr_buffer_copy, VkBufferCopy);
GR_SAME_SIZE(gr_command_pool_create_info, VkCommandPoolCreateInfo);
GR_SAME_FIELD(gr_command_pool_create_info, queueFamilyIndex, VkCommandPoolCreateInfo, queueFamilyIndex);
GR_SAME_SIZE(gr_command_buffer_allocate_info, VkCommandBufferAllocateInfo);
GR_SAME_FIELD(gr_command_buffer_allocate_info, commandBufferCount, VkCommandBufferAllocateInfo, commandBufferCount);
_Static_assert((int)gr_st_command_pool_create_info == (int)VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, "sType");
_Static_assert((int)gr_st_command_buffer_allocate_info == (int)VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "sType");
GR_SAME_SIZE(gr_begin_info, VkCommandBufferBeginInfo);
GR_SAME_FIELD(gr_begin_info, pInheritanceInfo, VkCommandBufferBeginInfo, pInheritanceInfo);
_Static_assert((int)gr_st_submit_info == (int)VK_STRUCTURE_TYPE_SUBMIT_INFO, "sType");
_Static_assert((int)gr_st_shader_module_create_info == (int)VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, "sType");
_Static_assert((int)gr_st_pipeline_shader_stage_create_info == (int)VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "sType");
_Static_assert((int)gr_st_compute_pipeline_create_info == (int)VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, "sType");
_Static_assert((int)gr_st_pipeline_layout_create_info == (int)VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "sType");
_Static_assert((int)gr_st_descriptor_set_layout_create_info == (int)VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "sType");
_Static_assert((int)gr_st_descriptor_pool_create_info == (int)VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "sType");
_Static_assert((int)gr_st_descriptor_set_allocate_info == (int)VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "sType");
_Static_assert((int)gr_st_write_descriptor_set == (int)VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "sType");
_Static_assert((int)gr_st_command_buffer_begin_info == (int)VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "sType");
_Static_assert((int)gr_st_memory_barrier == (int)VK_STRUCTURE_TYPE_MEMORY_BARRIER, "sType");
_Static_assert((int)gr_shader_stage_compute == (int)VK_SHADER_STAGE_COMPUTE_BIT, "compute stage");
_Static_assert((int)gr_descriptor_uniform_buffer == (int)VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, "uniform buffer");
_Static_assert((int)gr_descriptor_storage_buffer == (int)VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "storage buffer");
#endif
#endif
