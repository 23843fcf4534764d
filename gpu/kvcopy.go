package gpu

import "fmt"

// KVCopier is implemented by backends that copy cached positions between
// two of their KV caches. A prefix cache uses it to keep the keys and
// values of finished requests and to give a new request the ones of its
// prompt's cached prefix without running them again.
type KVCopier interface {
	// CopyKV copies the keys and values of positions [0, n) of every layer
	// from src to dst, two caches of this backend with the same layers,
	// heads, head size and storage type (their lengths may differ; both
	// hold at least n positions). It is ordered after the work submitted
	// before it and before the work submitted after it; no program may run
	// on dst meanwhile.
	CopyKV(dst, src KVCache, n int) error
}

// CopyKV copies positions [0, n) of src into dst on b, or fails with
// ErrUnsupported when b copies no cache rows.
func CopyKV(b Backend, dst, src KVCache, n int) error {
	c, ok := b.(KVCopier)
	if !ok {
		return fmt.Errorf("%w: the %s backend copies no KV cache rows", ErrUnsupported, b.Info().Backend)
	}
	return c.CopyKV(dst, src, n)
}

// CanCopyKV reports whether b copies KV cache rows (CopyKV).
func CanCopyKV(b Backend) bool {
	_, ok := b.(KVCopier)
	return ok
}
