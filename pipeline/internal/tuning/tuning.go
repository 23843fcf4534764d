// Package tuning holds the knobs of package pipeline that only tests turn
// (pipeline.Options.WithTuning): a full KV cache where rings would do, and
// the batching rule overridden both ways, so that tests compare the two
// forms on small models. Being internal, they are not part of the API.
package tuning

// Options are pipeline's test-only options; the zero value is what
// pipeline.Options runs without WithTuning.
type Options struct {
	// FullKVCache keeps every position of every layer in the KV cache.
	// Otherwise, on backends that take them (the CPU, WebGPU and Vulkan
	// ones), sliding-window
	// layers keep only their window (plus the largest prefill size) in a
	// ring (arch.BuildOptions.RingTokens): the same logits, less memory.
	FullKVCache bool
	// NoBatching steps each session with its own decode program rather
	// than gathering the decode steps of concurrent sessions into one
	// batched step per round (continuous batching, see pipeline/batch.go; used
	// with Slots > 1 on backends that run batched graphs).
	// The results agree; this is for comparing the two. By default a
	// model batches only where it pays (pipeline.BatchMinWeightBytes);
	// AlwaysBatch overrides the rule.
	NoBatching bool
	// AlwaysBatch batches the decode steps of concurrent sessions whatever
	// the size of the model (see NoBatching), on backends that run batched
	// graphs; for tests and comparisons. It cannot be combined with
	// NoBatching.
	AlwaysBatch bool
	// GatherRows makes a batched decode round wait (up to two seconds)
	// until it has this many rows, whatever the number of sessions
	// decoding, until the model's first round of rows of different
	// adapter sets has run; then rounds gather as usual. A test of mixed
	// rounds over a model so small that one request's whole generation
	// can finish before the next request's arrives needs it.
	GatherRows int
	// CheckpointEvery overrides the interval of a hybrid model's state
	// checkpoints along a prefill (pipeline.DefaultCheckpointEvery), so
	// that tests of shared prefixes on small contexts take some.
	CheckpointEvery int
	// PerPositionRollback makes speculative decoding on a hybrid model
	// verify its drafts one token per step with a state checkpoint after
	// each, rather than in one step restoring the checkpoint before it and
	// running the kept tokens again on a rejection (for comparing the
	// two).
	PerPositionRollback bool
}
