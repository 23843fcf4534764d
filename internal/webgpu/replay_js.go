//go:build js

package webgpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/jsx"
	"github.com/cogentcore/webgpu/wgpu"
)

// replay is a command list as one JavaScript array, made at its first
// submission (a finished list never changes): the page encodes and submits
// a whole submission with one call into JavaScript instead of three per
// dispatch (setPipeline, setBindGroup, dispatchWorkgroups through the
// binding, each a syscall/js crossing with its arguments converted, and an
// empty dynamic-offsets array made for every setBindGroup).
type replay struct {
	ops  js.Value // flat: 0, pipeline, group, x, y, z | 1, src, srcOff, dst, dstOff, size | 2, slot, 0, 0, 0, 0
	made bool
}

// aheadFunc makes the page's submitter (replayAhead). encode turns lists
// into a command buffer: one compute pass per run of dispatches (the
// pipeline set once per run of one kernel), copies between passes, and a
// timestamp as an empty pass that writes it into querySet
// (writeTimestamp's stand-in, see timestampPass), as Submit's generic path
// does. submit queues lists and, with again set, encodes the same lists
// once more in a later task of the page's event loop (a MessageChannel
// message: the submission is on its way to the browser's GPU process
// first), while the device runs them and the host awaits their read: the
// next submission of the same lists (a decode program's steps) then only
// submits that buffer, and the encoding (a JavaScript call per dispatch's
// bind group and dispatch) leaves the host's serial time between two
// submissions. A command buffer names its buffers, not their contents:
// it reads what the queue holds when it runs (the step tensor written
// just before its submit), so one encoded early runs as one encoded at
// its submit. One that the next submission does not use is dropped.
var aheadFunc = sync.OnceValue(func() js.Value {
	return js.Global().Get("Function").New(`
const encode = (device, lists, querySet) => {
  const enc = device.createCommandEncoder();
  let pass = null, cur = null;
  for (const ops of lists) {
    for (let i = 0; i < ops.length; i += 6) {
      if (ops[i] === 0) {
        if (pass === null) { pass = enc.beginComputePass(); cur = null; }
        if (ops[i+1] !== cur) { cur = ops[i+1]; pass.setPipeline(cur); }
        pass.setBindGroup(0, ops[i+2]);
        pass.dispatchWorkgroups(ops[i+3], ops[i+4], ops[i+5]);
      } else if (ops[i] === 1) {
        if (pass !== null) { pass.end(); pass = null; }
        enc.copyBufferToBuffer(ops[i+1], ops[i+2], ops[i+3], ops[i+4], ops[i+5]);
      } else {
        if (pass !== null) { pass.end(); pass = null; }
        enc.beginComputePass({timestampWrites: {querySet, beginningOfPassWriteIndex: ops[i+1]}}).end();
      }
    }
  }
  if (pass !== null) pass.end();
  return enc.finish();
};
const a = {lists: null, cb: null, seq: 0, job: null};
const ch = new MessageChannel();
ch.port1.onmessage = () => {
  const j = a.job;
  a.job = null;
  if (j === null || j.seq !== a.seq || a.cb !== null) return;
  try { a.cb = encode(j.device, j.lists, j.querySet); a.lists = j.lists; } catch (e) { a.cb = null; a.lists = null; }
};
const copyCB = (device, src, off, dst, n) => {
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(src, off, dst, 0, n);
  return enc.finish();
};
const mapped = (dst, n) => dst.mapAsync(1 /* GPUMapMode.READ */, 0, n).then(() => {
  try { return new Uint8Array(dst.getMappedRange(0, n)).slice(); }
  finally { dst.unmap(); }
});
a.submit = (device, lists, querySet, again, src, off, dst, n) => {
  let cb = null;
  if (a.cb !== null && a.lists.length === lists.length && a.lists.every((o, i) => o === lists[i])) cb = a.cb;
  a.cb = null; a.lists = null; a.seq++;
  if (cb === null) cb = encode(device, lists, querySet);
  device.queue.submit(dst === null ? [cb] : [cb, copyCB(device, src, off, dst, n)]);
  const read = dst === null ? undefined : mapped(dst, n);
  if (again) { a.job = {device, lists, querySet, seq: a.seq}; ch.port2.postMessage(0); }
  return read;
};
a.read = (device, src, off, dst, n) => {
  device.queue.submit([copyCB(device, src, off, dst, n)]);
  return mapped(dst, n);
};
return a;
`)
})

// replayAhead is the page's submitter (aheadFunc), made at the device's
// first replayed submission. d.mu guards it.
type replayAhead struct{ v js.Value }

// handle is the JavaScript object behind one of the binding's handles, each
// a struct of one js.Value (v0.23.0's *_js.go).
func handle[T any](p *T) js.Value { return *(*js.Value)(unsafe.Pointer(p)) }

// submitReplay encodes and submits cs with one call into JavaScript (or
// submits the command buffer encoded ahead for them, replayAhead); false
// when a list holds a command it does not replay, for Submit's generic
// path. Lists submitted before are encoded again ahead of their next
// submission. d.mu is held.
func submitReplay(d *Device, cs []*commands) (handled bool, err error) {
	_, handled, err = replayRead(d, cs, nil, 0, nil, 0)
	return handled, err
}

// replayRead is submitReplay, and with dst set, the same submission
// copies src[off:off+n] into dst and the promise returned resolves with
// those bytes once dst is mapped (SubmitRead's read ahead). d.mu is held.
func replayRead(d *Device, cs []*commands, src *buffer, off int64, dst *wgpu.Buffer, n int64) (read js.Value, handled bool, err error) {
	lists := js.Global().Get("Array").New()
	again := true // every list was submitted before: likely to be again (decode steps)
	for _, c := range cs {
		if !c.replay.made {
			again = false
			ops := js.Global().Get("Array").New()
			for _, cmd := range c.cmds {
				switch cmd.kind {
				case cmdDispatch:
					if cmd.x == 0 || cmd.y == 0 || cmd.z == 0 {
						continue
					}
					ops.Call("push", 0, handle(cmd.k.pipeline), handle(cmd.group), cmd.x, cmd.y, cmd.z)
				case cmdCopy:
					ops.Call("push", 1, handle(cmd.src.b), cmd.srcOff, handle(cmd.dst.b), cmd.dstOff, cmd.size)
				case cmdTimestamp:
					if d.queries == nil {
						return js.Undefined(), false, nil
					}
					ops.Call("push", 2, cmd.slot, 0, 0, 0, 0)
				default:
					return js.Undefined(), false, nil
				}
			}
			c.replay = replay{ops: ops, made: true}
		}
		lists.Call("push", c.replay.ops)
	}
	defer func() {
		if r := recover(); r != nil {
			read, handled, err = js.Undefined(), true, fmt.Errorf("webgpu: submit: %v", r)
		}
	}()
	qs := js.Null()
	if d.queries != nil {
		qs = d.queries.v
	}
	if d.ahead.v.IsUndefined() {
		d.ahead.v = aheadFunc().Invoke()
	}
	if dst == nil {
		d.ahead.v.Call("submit", handle(d.dev), lists, qs, again, js.Null(), 0, js.Null(), 0)
		return js.Undefined(), true, nil
	}
	return d.ahead.v.Call("submit", handle(d.dev), lists, qs, again, handle(src.b), off, handle(dst), n), true, nil
}

// readFunc copies n bytes of src at off into the staging buffer, submits,
// maps the staging buffer and resolves with a copy of those bytes, the
// staging buffer unmapped again: a read back is one call into JavaScript
// and one await, where the binding's path makes about ten calls (encoder,
// copy, finish, submit, release, mapAsync, getMappedRange, a Uint8Array,
// unmap). With slots > 0 the same submission also resolves timestamp slots
// [0, slots) and copies them to the staging buffer at tsOff, and the bytes
// resolved with run to their end: a timed submission's timestamps come
// back with its step tensor, not in a second round trip (pageStamps).
var readFunc = sync.OnceValue(func() js.Value {
	return js.Global().Get("Function").New("device", "src", "off", "staging", "n", "querySet", "resolved", "slots", "tsOff", `
const enc = device.createCommandEncoder();
enc.copyBufferToBuffer(src, off, staging, 0, n);
let end = n;
if (slots > 0) {
  enc.resolveQuerySet(querySet, 0, slots, resolved, 0);
  enc.copyBufferToBuffer(resolved, 0, staging, tsOff, slots * 8);
  end = tsOff + slots * 8;
}
device.queue.submit([enc.finish()]);
return staging.mapAsync(1 /* GPUMapMode.READ */, 0, end).then(() => {
  try { return new Uint8Array(staging.getMappedRange(0, end)).slice(); }
  finally { staging.unmap(); }
});
`)
})

// pageStamps keeps the timestamps a read resolved along with its bytes: on
// the page each read is a round trip through the browser's GPU process
// (milliseconds on a busy machine), and a timed decode submission
// (compute's TimeSteps) reads its step tensor and then its two timestamps,
// which natively cost microseconds. A read after submissions that wrote
// timestamps resolves them in its own submission; ReadTimestamps then
// answers from the cache while no submission came since.
type pageStamps struct {
	slots int      // 1 + the highest slot written since the last resolve (0: none)
	cache []uint64 // slots [0, len(cache)), resolved by the last read
}

// noteSubmit: cs write the slots of their timestamp commands, and the
// cached timestamps may no longer be the slots' values. d.mu is held.
func noteSubmit(d *Device, cs []*commands) {
	d.stamps.cache = nil
	if d.queries == nil {
		return
	}
	for _, c := range cs {
		for _, cmd := range c.cmds {
			if cmd.kind == cmdTimestamp {
				d.stamps.slots = max(d.stamps.slots, int(cmd.slot)+1)
			}
		}
	}
}

// cachedTimestamps returns slots [0, n) as the last read resolved them,
// when no submission came since. d.mu is held.
func cachedTimestamps(d *Device, n int) ([]uint64, bool) {
	if n > len(d.stamps.cache) {
		return nil, false
	}
	return append([]uint64(nil), d.stamps.cache[:n]...), true
}

// readReplay reads len(dst) bytes of wb at off (word aligned, inside the
// staging buffer's size) through readFunc, resolving the timestamps
// written since the last read (pageStamps). d.mu is held.
func readReplay(d *Device, wb *buffer, off int64, dst []byte) (handled bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			handled, err = true, fmt.Errorf("webgpu: read: %v", r)
		}
	}()
	slots, tsOff := d.stamps.slots, (int64(len(dst))+7)&^7
	qs, resolved := js.Null(), js.Null()
	if slots > 0 {
		if err := d.ensureStaging(tsOff + int64(slots)*8); err != nil {
			return true, err
		}
		qs, resolved = d.queries.v, handle(d.resolved)
	}
	p := readFunc().Invoke(handle(d.dev), handle(wb.b), off, handle(d.staging), len(dst), qs, resolved, slots, tsOff)
	v, ok := jsx.Await(p)
	if !ok {
		return true, fmt.Errorf("webgpu: read: buffer map failed: %s", v.Call("toString").String())
	}
	want := len(dst)
	if slots > 0 {
		want = int(tsOff) + 8*slots
	}
	if v.Length() != want {
		return true, fmt.Errorf("webgpu: read: mapped %d bytes, want %d", v.Length(), want)
	}
	if slots == 0 {
		js.CopyBytesToGo(dst, v)
		return true, nil
	}
	raw := make([]byte, want)
	js.CopyBytesToGo(raw, v)
	copy(dst, raw)
	d.stamps.cache = make([]uint64, slots)
	for i := range d.stamps.cache {
		d.stamps.cache[i] = binary.LittleEndian.Uint64(raw[int(tsOff)+8*i:])
	}
	d.stamps.slots = 0
	return true, nil
}

// writeFunc writes n bytes of the wasm memory at ptr into buf at off: the
// view of the memory is made in JavaScript, in the call. The binding's
// WriteBuffer makes it in Go (jsx.BytesToJS: the memory's ArrayBuffer, then
// a constructor call whose arguments Go allocates), and a wasm memory that
// grows in between detaches that ArrayBuffer: "Cannot perform Construct on
// a detached ArrayBuffer", which kernels compiling while the weights
// stream (compileUnlocked) made frequent.
var writeFunc = sync.OnceValue(func() js.Value {
	return js.Global().Get("Function").New("queue", "buf", "off", "ptr", "n", `
queue.writeBuffer(buf, off, new Uint8Array(globalThis.wasm.instance.exports.mem.buffer, ptr, n));
`)
})

// writeBuffer writes data into wb at off through writeFunc. d.mu is held.
func writeBuffer(d *Device, wb *buffer, off int64, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	writeFunc().Invoke(handle(d.queue), handle(wb.b), off, uintptr(unsafe.Pointer(&data[0])), len(data))
	runtime.KeepAlive(data)
	return nil
}

// mapping is a read ahead's map in flight on the page: the promise of
// its bytes (aheadFunc's submit or read).
type mapping struct{ p js.Value }

// startRead submits cs and, in the same queue submission where the
// lists replay, a copy of src[off:off+n] into rb, and asks for rb's map
// (SubmitRead). d.mu is held.
func startRead(d *Device, cs []*commands, src *buffer, off int64, rb *wgpu.Buffer, n int64) (m mapping, err error) {
	noteSubmit(d, cs)
	p, handled, err := replayRead(d, cs, src, off, rb, n)
	if err != nil {
		return mapping{}, err
	}
	if !handled {
		if err := d.submitLocked(cs); err != nil {
			return mapping{}, err
		}
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("webgpu: read ahead: %v", r)
			}
		}()
		if d.ahead.v.IsUndefined() {
			d.ahead.v = aheadFunc().Invoke()
		}
		p = d.ahead.v.Call("read", handle(d.dev), handle(src.b), off, handle(rb), n)
	}
	return mapping{p: p}, nil
}

// waitRead awaits m's bytes into dst. The page's device lock is not held
// while the event loop runs.
func waitRead(_ context.Context, _ *Device, m mapping, _ *wgpu.Buffer, dst []byte) error {
	v, ok := jsx.Await(m.p)
	if !ok {
		return fmt.Errorf("buffer map failed: %s", v.Call("toString").String())
	}
	if v.Length() != len(dst) {
		return fmt.Errorf("mapped %d bytes, want %d", v.Length(), len(dst))
	}
	js.CopyBytesToGo(dst, v)
	return nil
}
