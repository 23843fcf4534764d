//go:build js

package webgpu

import (
	"fmt"
	"sync"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/jsx"
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

// replayFunc encodes ops on device and submits them: one compute pass per
// run of dispatches (the pipeline set once per run of one kernel), copies
// between passes, and a timestamp as an empty pass that writes it into
// querySet (writeTimestamp's stand-in, see timestampPass), as Submit's
// generic path does.
var replayFunc = sync.OnceValue(func() js.Value {
	return js.Global().Get("Function").New("device", "lists", "querySet", `
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
device.queue.submit([enc.finish()]);
`)
})

// handle is the JavaScript object behind one of the binding's handles, each
// a struct of one js.Value (v0.23.0's *_js.go).
func handle[T any](p *T) js.Value { return *(*js.Value)(unsafe.Pointer(p)) }

// submitReplay encodes and submits cs with one call into JavaScript; false
// when a list holds a command it does not replay, for Submit's generic
// path. d.mu is held.
func submitReplay(d *Device, cs []*commands) (handled bool, err error) {
	lists := js.Global().Get("Array").New()
	for _, c := range cs {
		if !c.replay.made {
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
						return false, nil
					}
					ops.Call("push", 2, cmd.slot, 0, 0, 0, 0)
				default:
					return false, nil
				}
			}
			c.replay = replay{ops: ops, made: true}
		}
		lists.Call("push", c.replay.ops)
	}
	defer func() {
		if r := recover(); r != nil {
			handled, err = true, fmt.Errorf("webgpu: submit: %v", r)
		}
	}()
	qs := js.Null()
	if d.queries != nil {
		qs = d.queries.v
	}
	replayFunc().Invoke(handle(d.dev), lists, qs)
	return true, nil
}

// readFunc copies n bytes of src at off into the staging buffer, submits,
// maps the staging buffer and resolves with a copy of those bytes, the
// staging buffer unmapped again: a read back is one call into JavaScript
// and one await, where the binding's path makes about ten calls (encoder,
// copy, finish, submit, release, mapAsync, getMappedRange, a Uint8Array,
// unmap).
var readFunc = sync.OnceValue(func() js.Value {
	return js.Global().Get("Function").New("device", "src", "off", "staging", "n", `
const enc = device.createCommandEncoder();
enc.copyBufferToBuffer(src, off, staging, 0, n);
device.queue.submit([enc.finish()]);
return staging.mapAsync(1 /* GPUMapMode.READ */, 0, n).then(() => {
  try { return new Uint8Array(staging.getMappedRange(0, n)).slice(); }
  finally { staging.unmap(); }
});
`)
})

// readReplay reads len(dst) bytes of wb at off (word aligned, inside the
// staging buffer's size) through readFunc. d.mu is held.
func readReplay(d *Device, wb *buffer, off int64, dst []byte) (handled bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			handled, err = true, fmt.Errorf("webgpu: read: %v", r)
		}
	}()
	p := readFunc().Invoke(handle(d.dev), handle(wb.b), off, handle(d.staging), len(dst))
	v, ok := jsx.Await(p)
	if !ok {
		return true, fmt.Errorf("webgpu: read: buffer map failed: %s", v.Call("toString").String())
	}
	if n := js.CopyBytesToGo(dst, v); n != len(dst) {
		return true, fmt.Errorf("webgpu: read: mapped %d bytes, want %d", n, len(dst))
	}
	return true, nil
}
