//go:build cgo

package vulkan

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

// vkData makes Vulkan pipeline cache data as a driver writes it: the
// VkPipelineCacheHeaderVersionOne of props, then payload.
func vkData(props *vk.PhysicalDeviceProperties, payload string) []byte {
	b := make([]byte, vkHeaderSize)
	binary.LittleEndian.PutUint32(b[0:], vkHeaderSize)
	binary.LittleEndian.PutUint32(b[4:], uint32(vk.PipelineCacheHeaderVersionOne))
	binary.LittleEndian.PutUint32(b[8:], props.VendorID)
	binary.LittleEndian.PutUint32(b[12:], props.DeviceID)
	copy(b[16:], props.PipelineCacheUUID[:])
	return append(b, payload...)
}

func TestCheckCacheFile(t *testing.T) {
	props := &vk.PhysicalDeviceProperties{VendorID: 0x10005, DeviceID: 0x7}
	copy(props.PipelineCacheUUID[:], "0123456789abcdef")
	other := *props
	other.DeviceID = 8
	otherUUID := *props
	copy(otherUUID.PipelineCacheUUID[:], "fedcba9876543210")
	good := encodeCacheFile(vkData(props, "pipelines"))
	badVersion := vkData(props, "pipelines")
	binary.LittleEndian.PutUint32(badVersion[4:], 2)
	badLen := vkData(props, "x")
	binary.LittleEndian.PutUint32(badLen[0:], 1<<20)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	wrongMagic := bytes.Clone(good)
	wrongMagic[0] = 'X'

	for _, tc := range []struct {
		name string
		file []byte
		want string // part of the error; "" for valid
	}{
		{"valid", good, ""},
		{"empty", nil, "shorter than the header"},
		{"truncated header", good[:10], "shorter than the header"},
		{"truncated data", good[:len(good)-3], "truncated"},
		{"padded", append(bytes.Clone(good), 0), "truncated or padded"},
		{"magic", wrongMagic, "bad magic"},
		{"checksum", flipped, "checksum"},
		{"short Vulkan header", encodeCacheFile([]byte("tiny")), "shorter than its header"},
		{"Vulkan header length", encodeCacheFile(badLen), "header length"},
		{"Vulkan header version", encodeCacheFile(badVersion), "header version"},
		{"other device", encodeCacheFile(vkData(&other, "p")), "written for device"},
		{"other driver", encodeCacheFile(vkData(&otherUUID, "p")), "another driver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := checkCacheFile(tc.file, props)
			if tc.want == "" {
				if err != nil || !bytes.Equal(data, vkData(props, "pipelines")) {
					t.Fatalf("got %q, %v; want the data back", data, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCacheFileNameKeys(t *testing.T) {
	base := vk.PhysicalDeviceProperties{VendorID: 0x10de, DeviceID: 0x2330, DriverVersion: 1}
	names := map[string]string{}
	for label, p := range map[string]vk.PhysicalDeviceProperties{
		"base":   base,
		"device": func() vk.PhysicalDeviceProperties { p := base; p.DeviceID++; return p }(),
		"driver": func() vk.PhysicalDeviceProperties { p := base; p.DriverVersion++; return p }(),
		"uuid":   func() vk.PhysicalDeviceProperties { p := base; p.PipelineCacheUUID[3] = 1; return p }(),
	} {
		names[cacheFileName(&p, "rev1")] = label
	}
	names[cacheFileName(&base, "rev2")] = "revision"
	if len(names) != 5 {
		t.Fatalf("cache file names collide: %v", names)
	}
}

// pcacheChildEnv makes TestPipelineCacheChild compile kernels and print
// its device's pipeline cache stats.
const pcacheChildEnv = "GPURUN_PCACHE_CHILD"

// cacheKernels is how many of the shader kernels the cache tests compile.
const cacheKernels = 12

// TestPipelineCacheChild is the child process of the tests below: it opens
// the device, compiles cacheKernels kernels, closes the device (which saves
// the cache) and prints the stats as JSON.
func TestPipelineCacheChild(t *testing.T) {
	if os.Getenv(pcacheChildEnv) == "" {
		t.Skip("child of TestPipelineCacheAcrossProcesses")
	}
	d, err := OpenDevice(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	compileSome(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(d.PipelineCacheStats())
	os.Stdout.Write(append(append([]byte("STATS "), out...), '\n'))
}

func compileSome(t testing.TB, d *Device) {
	t.Helper()
	specs, err := shaders.Specs()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs[:min(cacheKernels, len(specs))] {
		k, err := d.NewKernel(s)
		if err != nil {
			t.Fatal(err)
		}
		k.Release()
	}
}

// runChild runs TestPipelineCacheChild with the cache in dir.
func runChild(t *testing.T, dir string) PipelineCacheStats {
	t.Helper()
	s, err := child(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func child(dir string) (PipelineCacheStats, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipelineCacheChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), pcacheChildEnv+"=1", PipelineCacheEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return PipelineCacheStats{}, fmt.Errorf("child: %v\n%s", err, tail(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "STATS "); ok {
			var s PipelineCacheStats
			err := json.Unmarshal([]byte(js), &s)
			return s, err
		}
	}
	return PipelineCacheStats{}, fmt.Errorf("child printed no stats:\n%s", tail(out))
}

func skipWithoutDevice(t *testing.T) {
	t.Helper()
	if gputest.RerunDriver() != "" {
		t.Skip("inside a driver rerun")
	}
	_, err := Devices()
	gputest.NoDevice(t, "vulkan", err)
}

// TestPipelineCacheAcrossProcesses: a first process starts with an empty
// cache directory and saves what it compiled; a second finds the file,
// seeds its VkPipelineCache with it and creates every pipeline warm,
// faster. A driver whose cache data holds nothing past the header (Mesa
// 22's lavapipe, SwiftShader) gets no file and no warm pipelines: nothing
// is counted as a hit that could not be one.
func TestPipelineCacheAcrossProcesses(t *testing.T) {
	skipWithoutDevice(t)
	dir := t.TempDir()
	cold := runChild(t, dir)
	if cold.LoadedBytes != 0 || cold.WarmPipelines != 0 || cold.Warning != "" {
		t.Fatalf("first process in an empty directory: %+v, want a cold cache", cold)
	}
	if cold.Pipelines != cacheKernels {
		t.Fatalf("first process created %d pipelines, want %d", cold.Pipelines, cacheKernels)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	warm := runChild(t, dir)
	if cold.DriverEmpty {
		if len(files) != 0 || cold.SavedBytes != 0 || warm.LoadedBytes != 0 || warm.WarmPipelines != 0 {
			t.Fatalf("driver keeps no pipelines, yet files %v, cold %+v, warm %+v", files, cold, warm)
		}
		t.Logf("this driver's pipeline cache data holds no pipelines: nothing saved (compile %v, then %v; creation feedback %v, %d and %d in-process hits)",
			cold.CompileTime, warm.CompileTime, warm.Feedback, cold.Hits, warm.Hits)
		return
	}
	if cold.SavedBytes <= vkHeaderSize || len(files) != 1 || files[0] != cold.Path {
		t.Fatalf("first process saved %d bytes; directory holds %v, want only %s", cold.SavedBytes, files, cold.Path)
	}
	if warm.LoadedBytes != cold.SavedBytes || warm.WarmPipelines != cacheKernels || warm.Warning != "" {
		t.Fatalf("second process: %+v, want %d bytes loaded and %d warm pipelines", warm, cold.SavedBytes, cacheKernels)
	}
	t.Logf("compile time of %d pipelines: cold %v, warm %v (%d bytes of cache; creation feedback %v, %d hits)", cacheKernels, cold.CompileTime, warm.CompileTime, warm.LoadedBytes, warm.Feedback, warm.Hits)
	if warm.Feedback && warm.Hits != cacheKernels {
		t.Errorf("the driver reports %d of %d pipelines found in the loaded cache", warm.Hits, cacheKernels)
	}
	if warm.CompileTime >= cold.CompileTime {
		t.Errorf("warm compile %v not faster than cold %v", warm.CompileTime, cold.CompileTime)
	}
}

// TestPipelineCacheBadFiles: a corrupt, truncated or foreign cache file is
// ignored with a warning, the device works, and closing it replaces the
// file with a valid one (removes it where the driver keeps nothing to
// write, so the warning is not repeated).
func TestPipelineCacheBadFiles(t *testing.T) {
	skipWithoutDevice(t)
	dir := t.TempDir()
	t.Setenv(PipelineCacheEnv, dir)
	probe := openTest(t, false)
	props := probe.phys.props
	path := filepath.Join(dir, cacheFileName(&props, revision()))
	foreign := props
	foreign.PipelineCacheUUID[0] ^= 0xff
	valid := encodeCacheFile(vkData(&props, strings.Repeat("p", 64)))
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"garbage", []byte("this is not a pipeline cache at all, just text of some length")},
		{"truncated", valid[:len(valid)-10]},
		{"foreign driver", encodeCacheFile(vkData(&foreign, "p"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := OpenDevice(context.Background(), -1)
			if err != nil {
				t.Fatal(err)
			}
			st := d.PipelineCacheStats()
			if st.LoadedBytes != 0 || !strings.Contains(st.Warning, "ignoring pipeline cache") {
				t.Errorf("stats %+v, want the file ignored with a warning", st)
			}
			compileSome(t, d)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if d.PipelineCacheStats().DriverEmpty {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("bad file still there after close (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkCacheFile(b, &props); err != nil {
				t.Fatalf("file after close: %v", err)
			}
		})
	}
}

// TestPipelineCacheConcurrentWriters: two processes compiling and saving
// to the same directory at once leave at most one file, valid, and no
// temporary files; a third process loads it.
func TestPipelineCacheConcurrentWriters(t *testing.T) {
	skipWithoutDevice(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = child(dir) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	third := runChild(t, dir)
	if third.DriverEmpty && len(files) == 0 {
		return // nothing to write on this driver; TestWriteAtomicConcurrent covers the writes
	}
	if len(files) != 1 {
		t.Fatalf("cache directory holds %v, want one file", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < fileHeaderSize {
		t.Fatalf("%d-byte file", len(b))
	}
	data := b[fileHeaderSize:]
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], b[16:fileHeaderSize]) {
		t.Fatal("file left by concurrent writers fails its checksum")
	}
	if third.LoadedBytes != len(data) || third.Warning != "" {
		t.Fatalf("third process: %+v, want the %d bytes loaded", third, len(data))
	}
}

// TestWriteAtomicConcurrent: writers racing on one path with files of
// different sizes while a reader reads it: every read is one whole file
// that passes its checks, and no temporary file is left.
func TestWriteAtomicConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.vkpc")
	props := &vk.PhysicalDeviceProperties{VendorID: 1, DeviceID: 2}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 3 {
		wg.Go(func() {
			for i := range 40 {
				file := encodeCacheFile(vkData(props, strings.Repeat(string(rune('a'+w)), 1000*(w+1)+i)))
				if err := writeAtomic(path, file); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	reads := 0
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkCacheFile(b, props); err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		reads++
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("left %v", files)
	}
	t.Logf("%d reads, all whole", reads)
}
