package spirvgen

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
)

// capability and extension instructions for module.
func capability(c uint32) []uint32 { return []uint32{opCapability, c} }

func extension(name string) []uint32 {
	b := append([]byte(name), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	ins := []uint32{opExtension}
	for i := 0; i < len(b); i += 4 {
		ins = append(ins, binary.LittleEndian.Uint32(b[i:]))
	}
	return ins
}

// capsOf lists the capabilities and extensions a module declares.
func capsOf(t *testing.T, spv []byte) (caps []uint32, exts []string) {
	t.Helper()
	words, err := decode(spv)
	if err != nil {
		t.Fatal(err)
	}
	if err := walk(words, func(op uint32, ins []uint32) {
		switch op {
		case opCapability:
			caps = append(caps, ins[1])
		case opExtension:
			exts = append(exts, literalString(ins[1:]))
		}
	}); err != nil {
		t.Fatal(err)
	}
	return caps, exts
}

const (
	capShader          = 1
	capGroupNonUniform = 61
	scFunction         = 7
)

// TestDropUnusedCapabilities: each declared capability the module uses
// stays, each it does not use goes, capabilities the pass cannot decide
// stay, and the 16-bit storage extension goes with the last 16-bit storage
// capability.
func TestDropUnusedCapabilities(t *testing.T) {
	all16 := [][]uint32{capability(capShader), capability(capFloat16), capability(capStorageBuffer16),
		capability(capUniformAndStorage16), capability(capStorageInputOutput16), capability(capGroupNonUniform),
		capability(capInt64), extension(ext16BitStorage)}
	// %10 f16, %11 vec4<f16>, %12 runtime array, %13 struct, %20 f32.
	f16Types := [][]uint32{{opTypeFloat, 10, 16}, {opTypeVector, 11, 10, 4}, {opTypeRuntimeArray, 12, 11}, {opTypeStruct, 13, 20, 12}, {opTypeFloat, 20, 32}}
	cases := []struct {
		name      string
		decl, use [][]uint32
		caps      []uint32
		exts      []string
	}{
		{"f16 in a storage buffer", all16, append(f16Types, []uint32{opTypePointer, 14, scStorageBuffer, 13}),
			[]uint32{capShader, capFloat16, capStorageBuffer16, capGroupNonUniform}, []string{ext16BitStorage}},
		{"f16 in a uniform block", all16, append(f16Types, []uint32{opTypePointer, 14, scUniform, 13}),
			[]uint32{capShader, capFloat16, capStorageBuffer16, capUniformAndStorage16, capGroupNonUniform}, []string{ext16BitStorage}},
		{"f16 inputs", all16, append(f16Types, []uint32{opTypePointer, 14, scInput, 11}),
			[]uint32{capShader, capFloat16, capStorageInputOutput16, capGroupNonUniform}, []string{ext16BitStorage}},
		{"f16 arithmetic only", all16, append(f16Types, []uint32{opTypePointer, 14, scFunction, 11}, []uint32{opTypePointer, 15, scStorageBuffer, 20}),
			[]uint32{capShader, capFloat16, capGroupNonUniform}, nil},
		{"no f16", all16, [][]uint32{{opTypeFloat, 20, 32}, {opTypePointer, 15, scStorageBuffer, 20}},
			[]uint32{capShader, capGroupNonUniform}, nil},
		{"64-bit ints", all16, [][]uint32{{opTypeInt, 20, 64, 0}},
			[]uint32{capShader, capGroupNonUniform, capInt64}, nil},
		// Only the implying capability is declared: it stays for the
		// storage buffer use it covers.
		{"implied", [][]uint32{capability(capShader), capability(capFloat16), capability(capUniformAndStorage16), extension(ext16BitStorage)},
			append(f16Types, []uint32{opTypePointer, 14, scStorageBuffer, 13}),
			[]uint32{capShader, capFloat16, capUniformAndStorage16}, []string{ext16BitStorage}},
		{"int8 storage", [][]uint32{capability(capShader), capability(capInt8), capability(capStorageBuffer8), capability(capStoragePushConstant8), extension(ext8BitStorage), extension(ext16BitStorage)},
			[][]uint32{{opTypeInt, 10, 8, 1}, {opTypeStruct, 13, 10}, {opTypePointer, 14, scStorageBuffer, 13}},
			[]uint32{capShader, capInt8, capStorageBuffer8}, []string{ext8BitStorage}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := module(append(slices.Clone(c.decl), c.use...)...)
			got, err := DropUnusedCapabilities(in)
			if err != nil {
				t.Fatal(err)
			}
			caps, exts := capsOf(t, got)
			if !slices.Equal(caps, c.caps) || !slices.Equal(exts, c.exts) {
				t.Errorf("capabilities %v, extensions %q; want %v, %q", caps, exts, c.caps, c.exts)
			}
			// Everything else is untouched.
			want := module(c.use...)
			if !bytes.HasSuffix(got, want[4*firstWordAfterHeader:]) {
				t.Errorf("instructions other than capabilities changed")
			}
			again, err := DropUnusedCapabilities(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %v", err)
			}
		})
	}
	for _, bad := range [][]byte{nil, module()[:12], append([]byte{1, 2, 3, 4}, module()[4:]...), module(capability(1))[:24]} {
		if _, err := DropUnusedCapabilities(bad); err == nil {
			t.Errorf("no error for %d bytes", len(bad))
		}
	}
}

// TestDropUnusedCapabilitiesNaga runs the pass on what naga makes of an
// f16 kernel (f16 storage, f16 arithmetic, `enable f16;`): naga's
// StorageInputOutput16 goes, and spirv-val (which rejects a module using
// a capability it does not declare) accepts the result for Vulkan 1.3.
func TestDropUnusedCapabilitiesNaga(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		ci.Missing(t, "naga v30 (see README: cargo install naga-cli)")
	}
	src := `enable f16;
@group(0) @binding(0) var<storage, read> w: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    o[g.x] = f32(dot(w[g.x], vec4<f16>(vec4<i32>(i32(g.x)) >> vec4<u32>(1u, 2u, 3u, 4u))));
}
`
	dir := t.TempDir()
	in, out := filepath.Join(dir, "a.wgsl"), filepath.Join(dir, "a.spv")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(naga, "--spirv-version", SPIRVVersion, in, out).CombinedOutput(); err != nil {
		t.Fatalf("naga: %v: %s", err, b)
	}
	spv, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if caps, _ := capsOf(t, spv); !slices.Contains(caps, capStorageInputOutput16) {
		t.Logf("naga no longer declares StorageInputOutput16 (%v)", caps)
	}
	got, err := DropUnusedCapabilities(spv)
	if err != nil {
		t.Fatal(err)
	}
	caps, exts := capsOf(t, got)
	for _, c := range []uint32{capShader, capFloat16, capStorageBuffer16} {
		if !slices.Contains(caps, c) {
			t.Errorf("capability %d dropped: %v", c, caps)
		}
	}
	if slices.Contains(caps, capStorageInputOutput16) || !slices.Contains(exts, ext16BitStorage) {
		t.Errorf("capabilities %v, extensions %q", caps, exts)
	}
	val, err := exec.LookPath("spirv-val")
	if err != nil {
		ci.Missing(t, "spirv-val (apt-get install spirv-tools; .ci/setup does)")
	}
	if err := os.WriteFile(out, got, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(val, "--target-env", "vulkan1.3", out).CombinedOutput(); err != nil {
		t.Errorf("spirv-val: %v: %s", err, b)
	}
}
