// Package shaders holds the compute kernels of the GPU backends. The WGSL
// sources under wgsl/ are the single source of truth: WebGPU compiles them at
// run time, and the SPIR-V under spirv/ (for the Vulkan device) is generated
// from the same files by `go generate ./shaders` with naga.
//
// Kernels are grouped in families, one WGSL file each (wgsl/<family>.wgsl);
// every kernel is one entry point of its family and its name is the entry
// point's name. The type codes of codes.go (generated WGSL constants) and
// wgsl/common.wgsl are prepended to every family before it is compiled,
// because WGSL has no include mechanism.
//
// A specialized family (matmul) is compiled once per Variant: the variant's
// module-scope constants are prepended too, so each module holds one code
// path (one weight type, say) that the compilers fold at pipeline creation,
// instead of a switch per element. Its kernels are looked up with
// GetVariant.
package shaders

//go:generate go run ./internal/gen -out spirv

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpurun/gpurun/gpu"
)

//go:embed wgsl/*.wgsl
var wgslFS embed.FS

//go:embed spirv/*.spv
var spirvFS embed.FS

// ErrUnknown reports a kernel name no family defines.
var ErrUnknown = errors.New("shaders: unknown kernel")

// commonFile is prepended to every family.
const commonFile = "common"

// Family is one WGSL file: its complete source (common code included), the
// kernels (entry points) it defines and the bindings they share.
type Family struct {
	Name     string
	WGSL     string
	Kernels  []string
	Bindings []gpu.BindingKind
	// Variants lists the specializations of a specialized family (nil for
	// a plain one); WGSL then lacks the variant constants.
	Variants []Variant
}

// Variant is one specialization of a family: module-scope WGSL constants
// prepended to its source, one module (WGSL and SPIR-V) per variant.
type Variant struct {
	Key    string // module name suffix, e.g. "I4_F16_glu"
	Consts []Const
}

// Const is one WGSL module-scope constant of a variant.
type Const struct {
	Name, Type, Value string // e.g. "WT", "u32", "4u"
}

func (v Variant) wgsl() string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Variant %s.\n", v.Key)
	for _, c := range v.Consts {
		fmt.Fprintf(&b, "const %s: %s = %s;\n", c.Name, c.Type, c.Value)
	}
	return b.String()
}

// specialized lists the variants of each specialized family.
var specialized = map[string]func() []Variant{
	"matmul": func() []Variant {
		vs := MatMulVariants()
		out := make([]Variant, len(vs))
		for i, v := range vs {
			out[i] = v.Variant()
		}
		return out
	},
}

// Module is one compiled unit: a plain family or one variant of a
// specialized family, with its complete WGSL source.
type Module struct {
	Name string // family, or family.variant
	WGSL string
}

// Modules returns every module, sorted by name: what go generate compiles
// to SPIR-V.
func Modules() ([]Module, error) {
	fams, err := Families()
	if err != nil {
		return nil, err
	}
	var out []Module
	for _, f := range fams {
		if f.Variants == nil {
			out = append(out, Module{f.Name, f.WGSL})
			continue
		}
		for _, v := range f.Variants {
			out = append(out, Module{f.Name + "." + v.Key, v.wgsl() + f.WGSL})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type registry struct {
	families map[string]*Family // by family name
	kernels  map[string]*Family // by kernel (entry point) name
	err      error
}

var (
	regOnce sync.Once
	reg     registry
)

func load() *registry {
	regOnce.Do(func() { reg = build() })
	return &reg
}

func build() registry {
	r := registry{families: map[string]*Family{}, kernels: map[string]*Family{}}
	common, err := wgslFS.ReadFile("wgsl/" + commonFile + ".wgsl")
	if err != nil {
		r.err = fmt.Errorf("shaders: %w", err)
		return r
	}
	entries, err := wgslFS.ReadDir("wgsl")
	if err != nil {
		r.err = fmt.Errorf("shaders: %w", err)
		return r
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".wgsl")
		if name == commonFile {
			continue
		}
		src, err := wgslFS.ReadFile("wgsl/" + e.Name())
		if err != nil {
			r.err = fmt.Errorf("shaders: %w", err)
			return r
		}
		f, err := parseFamily(name, codesWGSL()+string(common)+"\n"+string(src))
		if err != nil {
			r.err = err
			return r
		}
		if vs, ok := specialized[name]; ok {
			f.Variants = vs()
		}
		r.families[name] = f
		for _, k := range f.Kernels {
			if other, dup := r.kernels[k]; dup {
				r.err = fmt.Errorf("shaders: kernel %q defined by %s and %s", k, other.Name, name)
				return r
			}
			r.kernels[k] = f
		}
	}
	return r
}

var (
	bindingRE = regexp.MustCompile(`@group\(0\)\s*@binding\((\d+)\)\s*var<\s*(uniform|storage\s*,\s*read_write|storage\s*,\s*read|storage)\s*>`)
	entryRE   = regexp.MustCompile(`@compute[^\n]*\n\s*fn\s+([A-Za-z_][A-Za-z0-9_]*)`)
)

// parseFamily reads the binding declarations and entry points of a source.
// Bindings must be numbered densely from 0 in group 0.
func parseFamily(name, src string) (*Family, error) {
	f := &Family{Name: name, WGSL: src}
	kinds := map[int]gpu.BindingKind{}
	for _, m := range bindingRE.FindAllStringSubmatch(src, -1) {
		i, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("shaders: %s: binding %q: %w", name, m[1], err)
		}
		k := gpu.StorageRead
		switch {
		case m[2] == "uniform":
			k = gpu.Uniform
		case strings.HasSuffix(m[2], "read_write"):
			k = gpu.StorageRW
		}
		if _, dup := kinds[i]; dup {
			return nil, fmt.Errorf("shaders: %s: binding %d declared twice", name, i)
		}
		kinds[i] = k
	}
	for i := 0; i < len(kinds); i++ {
		k, ok := kinds[i]
		if !ok {
			return nil, fmt.Errorf("shaders: %s: bindings are not dense (missing %d)", name, i)
		}
		f.Bindings = append(f.Bindings, k)
	}
	for _, m := range entryRE.FindAllStringSubmatch(src, -1) {
		f.Kernels = append(f.Kernels, m[1])
	}
	if len(f.Kernels) == 0 {
		return nil, fmt.Errorf("shaders: %s: no @compute entry point", name)
	}
	return f, nil
}

// Families returns the kernel families, sorted by name.
func Families() ([]*Family, error) {
	r := load()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]*Family, 0, len(r.families))
	for _, f := range r.families {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names returns every kernel name, sorted.
func Names() []string {
	r := load()
	out := make([]string, 0, len(r.kernels))
	for k := range r.kernels {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Get returns the kernel spec of a kernel: the WGSL source of its family, the
// family's SPIR-V module (all entry points; pick Entry), the entry point and
// the binding kinds of group 0 (binding i is Bindings[i]).
func Get(name string) (gpu.KernelSpec, error) {
	r := load()
	if r.err != nil {
		return gpu.KernelSpec{}, r.err
	}
	f, ok := r.kernels[name]
	if !ok {
		return gpu.KernelSpec{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	if f.Variants != nil {
		return gpu.KernelSpec{}, fmt.Errorf("%w: %q is specialized: use GetVariant", ErrUnknown, name)
	}
	return spec(name, f.Name, f.WGSL, f.Bindings)
}

// GetVariant is Get for a kernel of a specialized family, in variant v.
func GetVariant(name string, v Variant) (gpu.KernelSpec, error) {
	r := load()
	if r.err != nil {
		return gpu.KernelSpec{}, r.err
	}
	f, ok := r.kernels[name]
	if !ok {
		return gpu.KernelSpec{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	for _, fv := range f.Variants {
		if fv.Key == v.Key {
			s, err := spec(name, f.Name+"."+v.Key, fv.wgsl()+f.WGSL, f.Bindings)
			s.Name = name + "." + v.Key
			return s, err
		}
	}
	return gpu.KernelSpec{}, fmt.Errorf("%w: %q has no variant %q", ErrUnknown, name, v.Key)
}

func spec(name, module, wgsl string, bindings []gpu.BindingKind) (gpu.KernelSpec, error) {
	spv, err := SPIRV(module)
	if err != nil {
		return gpu.KernelSpec{}, err
	}
	return gpu.KernelSpec{
		Name:     name,
		WGSL:     wgsl,
		SPIRV:    spv,
		Entry:    name,
		Bindings: append([]gpu.BindingKind(nil), bindings...),
	}, nil
}

// SPIRV returns the committed SPIR-V of a module (see Modules).
func SPIRV(module string) ([]byte, error) {
	b, err := spirvFS.ReadFile("spirv/" + module + ".spv")
	if err != nil {
		return nil, fmt.Errorf("shaders: SPIR-V of %s: %w (run go generate ./shaders)", module, err)
	}
	return b, nil
}

// Specs returns the spec of every kernel in every variant, sorted by
// name: what a device test compiles to check it accepts them all.
func Specs() ([]gpu.KernelSpec, error) {
	fams, err := Families()
	if err != nil {
		return nil, err
	}
	var out []gpu.KernelSpec
	for _, f := range fams {
		for _, k := range f.Kernels {
			if f.Variants == nil {
				s, err := Get(k)
				if err != nil {
					return nil, err
				}
				out = append(out, s)
				continue
			}
			for _, v := range f.Variants {
				s, err := GetVariant(k, v)
				if err != nil {
					return nil, err
				}
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
