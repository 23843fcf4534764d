package shaders

import (
	"fmt"
	"regexp"
	"strings"
)

// A WGSL source names the activation bindings its kernels read and write
// through a directive line
//
//	// activations: a, b, out, x(out_f16)
//
// and the registry writes their accessors in its place (expandActivations),
// so the per-binding helpers exist once, here, rather than once per family:
// for each name N, a binding N_w of u32 words (read-only: N_at) or of
// atomic<u32> words (read-write: N_at and N_set), whose elements are f32
// bits, or binary16 halves packed two per word when the uniform block's
// flag p.N_f16 (or the flag named in parentheses) is set. See common.wgsl's
// act_value and half_bits for the shared core: one word loaded, the half
// or the f32 picked with a select,
// and a half written with two atomics, since the word's other half may
// belong to another invocation.
var (
	activationsRE = regexp.MustCompile(`(?m)^// activations: ([a-z0-9_(), ]+)$`)
	actItemRE     = regexp.MustCompile(`^([a-z][a-z0-9_]*)(?:\(([a-z][a-z0-9_]*)\))?$`)
)

// expandActivations replaces every activations directive of src with the
// accessors it names.
func expandActivations(family, src string) (string, error) {
	return replaceDirectives(activationsRE, src, func(list string) (string, error) {
		var b strings.Builder
		for i, item := range strings.Split(list, ",") {
			m := actItemRE.FindStringSubmatch(strings.TrimSpace(item))
			if m == nil {
				return "", fmt.Errorf("shaders: %s: activations directive: bad item %q", family, item)
			}
			name, flag := m[1], m[2]
			if flag == "" {
				flag = name + "_f16"
			}
			atomic, ok := activationBinding(src, name)
			if !ok {
				return "", fmt.Errorf("shaders: %s: activations directive: no binding %s_w of u32 or atomic<u32> words", family, name)
			}
			if i > 0 {
				b.WriteString("\n")
			}
			writeAccessors(&b, name, flag, atomic)
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	})
}

// replaceDirectives replaces each line re matches by expand(its first
// submatch), stopping at the first error.
func replaceDirectives(re *regexp.Regexp, src string, expand func(arg string) (string, error)) (string, error) {
	var err error
	out := re.ReplaceAllStringFunc(src, func(line string) string {
		if err != nil {
			return line
		}
		var text string
		text, err = expand(re.FindStringSubmatch(line)[1])
		return text
	})
	if err != nil {
		return "", err
	}
	return out, nil
}

// activationBinding reports whether src declares name_w as a storage array
// of u32 (atomic false) or atomic<u32> words (atomic true).
func activationBinding(src, name string) (atomic, ok bool) {
	re := regexp.MustCompile(`var<storage,\s*(read|read_write)>\s+` + regexp.QuoteMeta(name) + `_w\s*:\s*array<(u32|atomic<u32>)>\s*;`)
	m := re.FindStringSubmatch(src)
	if m == nil {
		return false, false
	}
	return m[2] == "atomic<u32>", true
}

func writeAccessors(b *strings.Builder, name, flag string, atomic bool) {
	if !atomic {
		fmt.Fprintf(b, `// %[1]s_at is activation %[1]s[i]: a binary16 half of word i/2 when %[2]s
// is set (an f16 activation, packed two per word), else an f32.
fn %[1]s_at(i: u32) -> f32 {
    let h = p.%[2]s != 0u;
    return act_value(%[1]s_w[select(i, i >> 1u, h)], i, h);
}
`, name, flag)
		return
	}
	fmt.Fprintf(b, `// %[1]s_at and %[1]s_set read and write activation %[1]s[i]: with %[2]s
// set an f16 activation, binary16 halves packed two per word (written with
// two atomics, so neighbouring invocations may write the word's other
// half at once), else f32 words.
fn %[1]s_at(i: u32) -> f32 {
    let h = p.%[2]s != 0u;
    return act_value(atomicLoad(&%[1]s_w[select(i, i >> 1u, h)]), i, h);
}

fn %[1]s_set(i: u32, v: f32) {
    let h = p.%[2]s != 0u;
    let j = select(i, i >> 1u, h);
    atomicAnd(&%[1]s_w[j], select(0u, ~(0xffffu << ((i & 1u) * 16u)), h));
    atomicOr(&%[1]s_w[j], select(bitcast<u32>(v), half_bits(v, i), h));
}
`, name, flag)
}

// A family's line "// include: NAME" is replaced by wgsl/lib/NAME.wgsl
// (without that file's header, the comment lines before its first blank
// line): helpers that several families need but common.wgsl, which every
// module carries, should not hold.
var includeRE = regexp.MustCompile(`(?m)^// include: ([a-z0-9_]+)$`)

// expandIncludes replaces every include directive of src.
func expandIncludes(family, src string) (string, error) {
	return replaceDirectives(includeRE, src, func(name string) (string, error) {
		b, err := wgslFS.ReadFile("wgsl/lib/" + name + ".wgsl")
		if err != nil {
			return "", fmt.Errorf("shaders: %s: include %s: %w", family, name, err)
		}
		body := string(b)
		if i := strings.Index(body, "\n\n"); i >= 0 {
			body = body[i+2:]
		}
		return strings.TrimSuffix(body, "\n"), nil
	})
}
