// Package shaders holds the compute kernels of the GPU backend
// (internal/backend/compute), and imports nothing of the module. The WGSL
// sources under wgsl/ are the single source of truth: WebGPU compiles them at
// run time, and the SPIR-V under spirv/ (for the Vulkan device) is generated
// from the same files by `go generate ./shaders` with naga.
//
// Kernels are grouped in families, one WGSL file each (wgsl/<family>.wgsl);
// every kernel is one entry point of its family and its name is the entry
// point's name. The type and activation codes of codes.go and the step
// buffer's words of step.go (generated WGSL constants: kernels index the
// step buffer only as step[STEP_ROWS] and the like) and wgsl/common.wgsl
// are prepended to every family before it is compiled, because WGSL has no
// include mechanism. The registry also reports each family's binding
// names and uniform struct, from which the GPU backend generates its typed
// kernel contracts (internal/backend/compute).
//
// A specialized family (matmul, qblocks) is compiled once per Variant: the variant's
// module-scope constants are prepended too, so each module holds one code
// path (one weight type, say) that the compilers fold at pipeline creation,
// instead of a switch per element. Its kernels are looked up with
// GetVariant.
//
// A variant may also append extension files (wgsl/ext/<name>.wgsl) with
// kernels that use device features wgpu-native's WGSL compiler lacks
// (subgroup operations, f16 arithmetic): such a variant is compiled to a
// module holding only its Entry kernel and is Extended; the native
// WebGPU backend never compiles it, and a browser's WebGPU compiles the
// subgroup ones where it offers subgroups. An extension's `enable` lines
// (`enable f16;`, `enable subgroups;`) move to the top of the module.
//
// Import it to reuse gpurun's kernels in your own WebGPU or Vulkan
// program: the WGSL sources, their SPIR-V and the typed uniform blocks and
// bindings of each entry point.
package shaders

//go:generate go run ./internal/gen -out spirv

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed wgsl/*.wgsl wgsl/ext/*.wgsl wgsl/lib/*.wgsl
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
	Bindings []BindingKind
	// BindingNames holds the WGSL name of each binding (binding i is
	// BindingNames[i]), Params the type name of the uniform block bound
	// as p (a Go struct of this package of that name mirrors it):
	// what the GPU backend's generated kernel contracts are made of.
	BindingNames []string
	Params       string
	// Variants lists the specializations of a specialized family (nil for
	// a plain one); WGSL then lacks the variant constants.
	Variants []Variant
	// extKernels are the kernels of the variants' extension files (in
	// Kernels too), held only by the variants naming them as Entry.
	extKernels []string
}

// Variant is one specialization of a family: module-scope WGSL constants
// prepended to its source, one module (WGSL and SPIR-V) per variant.
type Variant struct {
	Key    string // module name suffix, e.g. "I4_F16_glu"
	Consts []Const
	// Ext names extension files (wgsl/ext/<name>.wgsl) appended to the
	// family's source in order; the module then holds only the kernel
	// Entry (one of the extensions'), and only the Vulkan backend runs it.
	// An extension's `enable` lines move to the top of the module.
	Ext   []string
	Entry string
}

// Extended reports whether the variant's module uses features
// wgpu-native's WGSL compiler lacks (an extension file's): the Vulkan
// backend runs it, and a browser's WebGPU where it offers them
// (gpu.Caps.Subgroups).
func (v Variant) Extended() bool { return len(v.Ext) > 0 }

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
	"qkv": func() []Variant {
		var out []Variant
		for _, v := range MatMulVariants() {
			// One module per weight layout, and its subgroup form.
			if !v.GLU && !v.F16 && !v.Norm {
				out = append(out, v.RopeKVVariant())
			}
		}
		return out
	},
	"qblocks": func() []Variant {
		var out []Variant
		for _, v := range QBlockVariants() {
			out = append(out, v.Variant())
		}
		return out
	},
	"sample": SampleVariants,
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
	Name  string // family, or family.variant
	WGSL  string
	Entry string // "": every entry point; else the module holds only this one
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
			out = append(out, Module{Name: f.Name, WGSL: f.WGSL})
			continue
		}
		for _, v := range f.Variants {
			src, err := variantWGSL(f, v)
			if err != nil {
				return nil, err
			}
			out = append(out, Module{f.Name + "." + v.Key, src, v.Entry})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// variantWGSL is the complete source of variant v of family f.
func variantWGSL(f *Family, v Variant) (string, error) {
	var enable strings.Builder
	src := v.wgsl() + f.WGSL
	for _, name := range v.Ext {
		ext, err := wgslFS.ReadFile("wgsl/ext/" + name + ".wgsl")
		if err != nil {
			return "", fmt.Errorf("shaders: %s.%s: %w", f.Name, v.Key, err)
		}
		// WGSL wants enable directives before any declaration.
		body := enableRE.ReplaceAllStringFunc(string(ext), func(line string) string {
			enable.WriteString(line)
			return ""
		})
		src += "\n" + body
	}
	return enable.String() + src, nil
}

// holds reports whether variant v's module has kernel k.
func (v Variant) holds(f *Family, k string) bool {
	if v.Entry != "" {
		return k == v.Entry
	}
	return !slices.Contains(f.extKernels, k)
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
		if e.IsDir() {
			continue // ext: extension files of variants; lib: included snippets
		}
		name := strings.TrimSuffix(e.Name(), ".wgsl")
		if name == commonFile {
			continue
		}
		src, err := wgslFS.ReadFile("wgsl/" + e.Name())
		if err != nil {
			r.err = fmt.Errorf("shaders: %w", err)
			return r
		}
		// A family whose first line is "// base: NAME" is family NAME's
		// source followed by its own: NAME's bindings and helpers with
		// more of both; its kernels are its own entry points only.
		base := ""
		if m := baseRE.FindStringSubmatch(string(src)); m != nil {
			b, err := wgslFS.ReadFile("wgsl/" + m[1] + ".wgsl")
			if err != nil {
				r.err = fmt.Errorf("shaders: %s: base: %w", name, err)
				return r
			}
			base = string(b) + "\n"
		}
		full, err := expandIncludes(name, codesWGSL()+string(common)+"\n"+base+string(src))
		if err == nil {
			full, err = expandActivations(name, full)
		}
		if err != nil {
			r.err = err
			return r
		}
		f, err := parseFamily(name, full)
		if err != nil {
			r.err = err
			return r
		}
		if base != "" {
			f.Kernels = nil
			for _, m := range entryRE.FindAllStringSubmatch(string(src), -1) {
				f.Kernels = append(f.Kernels, m[1])
			}
		}
		if vs, ok := specialized[name]; ok {
			f.Variants = vs()
			for _, v := range f.Variants {
				if len(v.Ext) == 0 || slices.Contains(f.extKernels, v.Entry) {
					continue
				}
				for _, e := range v.Ext {
					ext, err := wgslFS.ReadFile("wgsl/ext/" + e + ".wgsl")
					if err != nil {
						r.err = fmt.Errorf("shaders: %w", err)
						return r
					}
					for _, m := range entryRE.FindAllStringSubmatch(string(ext), -1) {
						if !slices.Contains(f.extKernels, m[1]) {
							f.extKernels = append(f.extKernels, m[1])
							f.Kernels = append(f.Kernels, m[1])
						}
					}
				}
				if !slices.Contains(f.extKernels, v.Entry) {
					r.err = fmt.Errorf("shaders: %s.%s: entry %q not in wgsl/ext/%v", name, v.Key, v.Entry, v.Ext)
					return r
				}
			}
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
	bindingRE = regexp.MustCompile(`@group\(0\)\s*@binding\((\d+)\)\s*var<\s*(uniform|storage\s*,\s*read_write|storage\s*,\s*read|storage)\s*>\s*([A-Za-z_][A-Za-z0-9_]*)`)
	baseRE    = regexp.MustCompile(`^// base: ([a-z0-9_]+)\n`)
	enableRE  = regexp.MustCompile(`(?m)^enable [a-z0-9_, ]+;\n`)
	entryRE   = regexp.MustCompile(`@compute[^\n]*\n\s*fn\s+([A-Za-z_][A-Za-z0-9_]*)`)
)

// parseFamily reads the binding declarations and entry points of a source.
// Bindings must be numbered densely from 0 in group 0.
func parseFamily(name, src string) (*Family, error) {
	f := &Family{Name: name, WGSL: src}
	kinds := map[int]BindingKind{}
	names := map[int]string{}
	for _, m := range bindingRE.FindAllStringSubmatch(src, -1) {
		i, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("shaders: %s: binding %q: %w", name, m[1], err)
		}
		k := StorageRead
		switch {
		case m[2] == "uniform":
			k = Uniform
		case strings.HasSuffix(m[2], "read_write"):
			k = StorageRW
		}
		if _, dup := kinds[i]; dup {
			return nil, fmt.Errorf("shaders: %s: binding %d declared twice", name, i)
		}
		kinds[i] = k
		names[i] = m[3]
	}
	for i := 0; i < len(kinds); i++ {
		k, ok := kinds[i]
		if !ok {
			return nil, fmt.Errorf("shaders: %s: bindings are not dense (missing %d)", name, i)
		}
		f.Bindings = append(f.Bindings, k)
		f.BindingNames = append(f.BindingNames, names[i])
	}
	if m := uniformRE.FindStringSubmatch(src); m != nil {
		f.Params = m[1]
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
func Get(name string) (KernelSpec, error) {
	r := load()
	if r.err != nil {
		return KernelSpec{}, r.err
	}
	f, ok := r.kernels[name]
	if !ok {
		return KernelSpec{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	if f.Variants != nil {
		return KernelSpec{}, fmt.Errorf("%w: %q is specialized: use GetVariant", ErrUnknown, name)
	}
	return spec(name, f.Name, f.WGSL, f.Bindings)
}

// GetVariant is Get for a kernel of a specialized family, in variant v.
func GetVariant(name string, v Variant) (KernelSpec, error) {
	r := load()
	if r.err != nil {
		return KernelSpec{}, r.err
	}
	f, ok := r.kernels[name]
	if !ok {
		return KernelSpec{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	for _, fv := range f.Variants {
		if fv.Key == v.Key {
			if !fv.holds(f, name) {
				return KernelSpec{}, fmt.Errorf("%w: variant %q of %s has no kernel %q", ErrUnknown, v.Key, f.Name, name)
			}
			src, err := variantWGSL(f, fv)
			if err != nil {
				return KernelSpec{}, err
			}
			s, err := spec(name, f.Name+"."+v.Key, src, f.Bindings)
			s.Name = name + "." + v.Key
			return s, err
		}
	}
	return KernelSpec{}, fmt.Errorf("%w: %q has no variant %q", ErrUnknown, name, v.Key)
}

func spec(name, module, wgsl string, bindings []BindingKind) (KernelSpec, error) {
	spv, err := SPIRV(module)
	if err != nil {
		return KernelSpec{}, err
	}
	return KernelSpec{
		Name:     name,
		WGSL:     wgsl,
		SPIRV:    spv,
		Entry:    name,
		Bindings: append([]BindingKind(nil), bindings...),
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
func Specs() ([]KernelSpec, error) { return specs(true) }

// PortableSpecs is Specs without the Extended variants: what the native
// WebGPU backend may be asked to compile.
func PortableSpecs() ([]KernelSpec, error) { return specs(false) }

func specs(extended bool) ([]KernelSpec, error) {
	fams, err := Families()
	if err != nil {
		return nil, err
	}
	var out []KernelSpec
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
				if !v.holds(f, k) || v.Extended() && !extended {
					continue
				}
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
