//go:build cgo

package vulkan

/*
#include <stdlib.h>
#include "vkext.h"
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"
)

// pipelineCacheOff is the PipelineCacheEnv value that disables the cache.
const pipelineCacheOff = "off"

// The cache file is our header, then the bytes vkGetPipelineCacheData
// returned:
//
//	magic    [8]byte  "GPRNVKPC"
//	format   uint32   fileFormat
//	length   uint32   bytes of Vulkan data that follow
//	checksum [32]byte SHA-256 of those bytes
//	data     [length]byte, starting with VkPipelineCacheHeaderVersionOne
//
// all little-endian. A file that fails any check is ignored (and replaced
// when the device closes), never trusted: a half-written file cannot be
// read because files are written under a temporary name and renamed.
var fileMagic = [8]byte{'G', 'P', 'R', 'N', 'V', 'K', 'P', 'C'}

const (
	fileFormat     = 1
	fileHeaderSize = 8 + 4 + 4 + sha256.Size
	// vkHeaderSize is VkPipelineCacheHeaderVersionOne: headerSize,
	// headerVersion, vendorID, deviceID (uint32 each), pipelineCacheUUID.
	vkHeaderSize = 16 + vk.UuidSize
	// maxCacheFile bounds what is read back: a pipeline cache of every
	// kernel is a few MiB; anything far larger is not ours.
	maxCacheFile = 256 << 20
)

// pipelineCache is a device's VkPipelineCache and its file.
type pipelineCache struct {
	handle vk.PipelineCache
	path   string
	loaded [sha256.Size]byte // checksum of the data loaded, to skip unchanged saves
	bad    bool              // the file failed its checks: replace or remove it

	mu    sync.Mutex
	stats PipelineCacheStats
}

// cacheDir returns the pipeline cache directory, "" when the cache is off.
func cacheDir() (string, error) {
	switch v := os.Getenv(PipelineCacheEnv); v {
	case pipelineCacheOff:
		return "", nil
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no user cache directory (set %s): %w", PipelineCacheEnv, err)
		}
		return filepath.Join(base, "gpurun", "vulkan"), nil
	default:
		return v, nil
	}
}

// revision is the gpurun build the cache belongs to: the VCS revision the
// binary was built from (with "+modified" for a dirty tree), else its module
// version, else "devel" (test binaries and builds outside a checkout).
func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case rev != "" && modified:
		return rev + "+modified"
	case rev != "":
		return rev
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		return bi.Main.Version
	}
	return "devel"
}

// cacheFileName keys a cache file by the device (vendor, device id and the
// driver's pipelineCacheUUID), the driver version and the gpurun revision.
func cacheFileName(props *vk.PhysicalDeviceProperties, rev string) string {
	h := sha256.New()
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], props.VendorID)
	binary.LittleEndian.PutUint32(b[4:], props.DeviceID)
	binary.LittleEndian.PutUint32(b[8:], props.DriverVersion)
	h.Write(b[:])
	h.Write(props.PipelineCacheUUID[:])
	h.Write([]byte(rev))
	return fmt.Sprintf("%04x-%04x-%s.vkpc", props.VendorID, props.DeviceID, hex.EncodeToString(h.Sum(nil)[:12]))
}

// checkCacheFile returns the Vulkan data of a cache file after checking our
// header, the checksum and the Vulkan header against the device.
func checkCacheFile(b []byte, props *vk.PhysicalDeviceProperties) ([]byte, error) {
	if len(b) < fileHeaderSize {
		return nil, fmt.Errorf("%d bytes, shorter than the header", len(b))
	}
	if !bytes.Equal(b[:8], fileMagic[:]) {
		return nil, errors.New("not a gpurun pipeline cache (bad magic)")
	}
	if f := binary.LittleEndian.Uint32(b[8:]); f != fileFormat {
		return nil, fmt.Errorf("format %d, want %d", f, fileFormat)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	data := b[fileHeaderSize:]
	if uint64(n) != uint64(len(data)) {
		return nil, fmt.Errorf("truncated or padded: header says %d bytes of data, file has %d", n, len(data))
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], b[16:fileHeaderSize]) {
		return nil, errors.New("checksum mismatch")
	}
	if len(data) < vkHeaderSize {
		return nil, fmt.Errorf("Vulkan data of %d bytes, shorter than its header", len(data))
	}
	hdrLen := binary.LittleEndian.Uint32(data[0:])
	version := binary.LittleEndian.Uint32(data[4:])
	vendor := binary.LittleEndian.Uint32(data[8:])
	device := binary.LittleEndian.Uint32(data[12:])
	switch {
	case hdrLen < vkHeaderSize || uint64(hdrLen) > uint64(len(data)):
		return nil, fmt.Errorf("Vulkan header length %d out of range", hdrLen)
	case version != uint32(vk.PipelineCacheHeaderVersionOne):
		return nil, fmt.Errorf("Vulkan header version %d, want %d", version, vk.PipelineCacheHeaderVersionOne)
	case vendor != props.VendorID || device != props.DeviceID:
		return nil, fmt.Errorf("written for device %04x:%04x, this is %04x:%04x", vendor, device, props.VendorID, props.DeviceID)
	case !bytes.Equal(data[16:vkHeaderSize], props.PipelineCacheUUID[:]):
		return nil, errors.New("written by another driver (pipelineCacheUUID differs)")
	}
	return data, nil
}

// vkHeaderOnly reports whether Vulkan cache data holds nothing past its
// header (or is too short to have one).
func vkHeaderOnly(data []byte) bool {
	return len(data) < 4 || uint64(len(data)) <= uint64(binary.LittleEndian.Uint32(data))
}

// encodeCacheFile is checkCacheFile's inverse.
func encodeCacheFile(data []byte) []byte {
	out := make([]byte, fileHeaderSize, fileHeaderSize+len(data))
	copy(out, fileMagic[:])
	binary.LittleEndian.PutUint32(out[8:], fileFormat)
	binary.LittleEndian.PutUint32(out[12:], uint32(len(data)))
	sum := sha256.Sum256(data)
	copy(out[16:], sum[:])
	return append(out, data...)
}

// openPipelineCache creates the device's VkPipelineCache, seeded from its
// file when that is valid. Problems with the file become the stats'
// warning (printed to stderr): the cache then starts empty.
func (d *Device) openPipelineCache() error {
	pc := &pipelineCache{}
	props := &d.phys.props
	var initial []byte
	dir, err := cacheDir()
	switch {
	case err != nil:
		pc.warn("pipeline cache off: %v", err)
	case dir != "":
		pc.path = filepath.Join(dir, cacheFileName(props, revision()))
		b, err := readLimited(pc.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			pc.warn("ignoring pipeline cache %s: %v", pc.path, err)
		default:
			if initial, err = checkCacheFile(b, props); err != nil {
				pc.warn("ignoring pipeline cache %s: %v", pc.path, err)
				initial, pc.bad = nil, true
			} else if vkHeaderOnly(initial) {
				initial = nil // holds no pipelines: nothing to warm
			}
		}
	}
	info := vk.PipelineCacheCreateInfo{SType: vk.StructureTypePipelineCacheCreateInfo}
	var cbuf unsafe.Pointer
	if len(initial) > 0 {
		cbuf = C.CBytes(initial)
		defer C.free(cbuf)
		info.InitialDataSize = uint(len(initial))
		info.PInitialData = cbuf
	}
	var h vk.PipelineCache
	if err := check("vkCreatePipelineCache", vk.CreatePipelineCache(d.dev, &info, nil, &h)); err != nil {
		if len(initial) == 0 {
			return err
		}
		// A driver may refuse data it cannot use: start empty instead.
		pc.warn("ignoring pipeline cache %s: %v", pc.path, err)
		initial, pc.bad = nil, true
		// A new create info: the binding keeps its C copy of the first
		// one inside it and would pass that (with the data) again.
		empty := vk.PipelineCacheCreateInfo{SType: vk.StructureTypePipelineCacheCreateInfo}
		if err := check("vkCreatePipelineCache", vk.CreatePipelineCache(d.dev, &empty, nil, &h)); err != nil {
			return err
		}
	}
	pc.handle = h
	pc.stats.Path = pc.path
	pc.stats.LoadedBytes = len(initial)
	if len(initial) > 0 {
		pc.loaded = sha256.Sum256(initial)
	}
	d.pcache = pc
	return nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCacheFile {
		return nil, fmt.Errorf("%d bytes, more than a pipeline cache holds", st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

func (pc *pipelineCache) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	pc.stats.Warning = msg
	fmt.Fprintln(os.Stderr, "gpurun: vulkan: "+msg)
}

// created records a pipeline creation that took dt, with its feedback.
func (pc *pipelineCache) created(dt time.Duration, fb feedback) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.stats.Pipelines++
	if pc.stats.LoadedBytes > 0 {
		pc.stats.WarmPipelines++
	}
	pc.stats.CompileTime += dt
	if fb.c != nil {
		flags := uint32(C.gr_feedback_flags(fb.c))
		if flags&C.gr_creation_feedback_valid != 0 {
			pc.stats.Feedback = true
			if flags&C.gr_creation_feedback_cache_hit != 0 {
				pc.stats.Hits++
			}
		}
	}
}

// feedback is a pipeline's creation feedback in C memory (nil c: none
// asked for, on devices before Vulkan 1.3).
type feedback struct{ c *C.gr_feedback }

// newFeedback allocates the feedback of one pipeline creation where the
// device has Vulkan 1.3; free it with free.
func (d *Device) newFeedback() feedback {
	if d.phys.api < vk.MakeVersion(1, 3, 0) {
		return feedback{}
	}
	return feedback{C.gr_feedback_new()}
}

// next is the pNext link of a VkComputePipelineCreateInfo (nil for none).
func (f feedback) next() unsafe.Pointer {
	if f.c == nil {
		return nil
	}
	return C.gr_feedback_info(f.c)
}

func (f feedback) free() {
	if f.c != nil {
		C.free(unsafe.Pointer(f.c))
	}
}

// save writes the cache's data to its file (under a temporary name, then
// renamed, so readers see the old file or the new one, never a part) when
// pipelines were created since it was loaded and the data changed. A file
// that failed its checks is removed first, so that it warns once.
func (d *Device) savePipelineCache() {
	pc := d.pcache
	if pc == nil {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.bad {
		if err := os.Remove(pc.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			pc.warn("removing pipeline cache %s: %v", pc.path, err)
		}
	}
	if pc.path == "" || pc.stats.Pipelines == 0 {
		return
	}
	var size uint
	if vk.GetPipelineCacheData(d.dev, pc.handle, &size, nil) != vk.Success || size == 0 {
		return
	}
	cbuf := C.malloc(C.size_t(size))
	defer C.free(cbuf)
	if res := vk.GetPipelineCacheData(d.dev, pc.handle, &size, cbuf); res != vk.Success {
		pc.warn("pipeline cache not saved: vkGetPipelineCacheData: %v", res)
		return
	}
	data := C.GoBytes(cbuf, C.int(size))
	if vkHeaderOnly(data) {
		pc.stats.DriverEmpty = true
		return
	}
	if sha256.Sum256(data) == pc.loaded {
		return
	}
	if err := writeAtomic(pc.path, encodeCacheFile(data)); err != nil {
		pc.warn("pipeline cache not saved: %v", err)
		return
	}
	pc.stats.SavedBytes = len(data)
}

// writeAtomic writes b to path through a temporary file in the same
// directory and a rename.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// PipelineCacheStats reports what the device's pipeline cache did so far.
func (d *Device) PipelineCacheStats() PipelineCacheStats {
	pc := d.pcache
	if pc == nil {
		return PipelineCacheStats{}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.stats
}
