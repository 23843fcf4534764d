package shaders

// BindingKind is how a kernel reads a binding.
type BindingKind uint8

const (
	StorageRead BindingKind = iota // read-only storage buffer
	StorageRW                      // read-write storage buffer
	Uniform                        // uniform buffer (small parameters)
)

// KernelSpec describes a compute kernel. WGSL feeds WebGPU, SPIRV feeds
// Vulkan; both come from this package.
type KernelSpec struct {
	Name     string
	WGSL     string
	SPIRV    []byte
	Entry    string        // entry point, "main" if empty
	Bindings []BindingKind // group 0, binding i
}
