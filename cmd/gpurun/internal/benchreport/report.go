// Package benchreport is the data model of `gpurun bench` results and its
// three renderings: JSON (a versioned schema, schema.json beside this file),
// Markdown tables in the style of llama-bench, and one self-contained HTML
// page whose charts are inline SVG drawn here (no scripts, fonts or other
// network resources). Compare relates a report to an earlier one.
package benchreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is the version of the JSON layout this package writes and
// reads. It changes when a field changes meaning or is removed; added
// optional fields keep it.
const SchemaVersion = 1

// Schema is the JSON Schema (draft 2020-12) of a report, documenting every
// field.
//
//go:embed schema.json
var Schema []byte

// ErrVersion: a report of a schema version this package does not read.
var ErrVersion = errors.New("benchreport: unsupported schema version")

// Report is one `gpurun bench` invocation: what ran where, and the results
// of every configuration and test.
type Report struct {
	SchemaVersion int         `json:"schema_version"`
	Created       time.Time   `json:"created"`
	Command       []string    `json:"command"`
	Environment   Environment `json:"environment"`
	Protocol      Protocol    `json:"protocol"`
	Results       []Result    `json:"results"`
	// Baseline is the earlier report given to --compare, with the ratio of
	// each matching result.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Incomplete: the sweep had not finished when this was written (bench
	// --report rewrites the report after every configuration); the
	// configurations after the last result were not run.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Environment is what the numbers were measured on.
type Environment struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	// Revision is the gpurun commit, from the binary's build information
	// or else git in the working directory (see HostEnvironment and
	// RevisionSource); "unknown" when neither has it.
	Revision       string `json:"revision"`
	Modified       bool   `json:"modified"`
	RevisionTime   string `json:"revision_time,omitempty"`
	RevisionSource string `json:"revision_source,omitempty"`
	// PeakRSSBytes is the peak resident memory of the whole process.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// LoadAverage is the system's one-minute load average when the sweep
	// started and when it ended (Linux; absent elsewhere): figures measured
	// on a machine busy with other work are slower and noisier.
	LoadAverage []float64 `json:"load_average,omitempty"`
	Devices     []Device  `json:"devices"`
}

// Device is one backend's adapter.
type Device struct {
	Backend string `json:"backend"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Driver  string `json:"driver"`
}

// Protocol is how every test was run.
type Protocol struct {
	Reps   int `json:"reps"`
	Warmup int `json:"warmup"`
	// Description says how prompts are made and tokens picked.
	Description string `json:"description"`
}

// Test kinds.
const (
	KindPrompt    = "pp"        // prompt processing: time to first token and prefill speed
	KindGenerate  = "tg"        // generation: decode speed after a one-token prompt
	KindCombined  = "pp+tg"     // a prompt then a generation, every metric
	KindMediaPipe = "mediapipe" // MediaPipe's protocol: 1024-token prompt, 1280-token cache, 256 generated
)

// Depth fills: how a test at a depth (Test.Depth) gets its context.
const (
	// DepthPrefill runs the context's tokens as a prompt (untimed).
	DepthPrefill = "prefill"
	// DepthRandom writes random keys and values at the context's positions
	// through the backend's own store path (pipeline.Session.FillRandom):
	// the measured steps attend to as many positions, at a fraction of a
	// long prefill's time.
	DepthRandom = "random"
)

// Test is one measured workload.
type Test struct {
	Name string `json:"name"` // pp512, tg128, pp128+tg32, mediapipe, tg32@d4096
	Kind string `json:"kind"`
	// PromptTokens and GenerateTokens are what each run does; a tg N test
	// generates N+1 tokens after a one-token prompt, so that N are decode
	// steps.
	PromptTokens   int `json:"prompt_tokens"`
	GenerateTokens int `json:"generate_tokens"`
	MaxCache       int `json:"max_cache,omitempty"` // the KV cache the test requires, 0 if any
	// Depth is the context each run holds before its prompt (a name's
	// "@dD", llama-bench's -d): the prompt and the decode steps run at
	// positions Depth.., attending to the Depth positions before them,
	// which DepthFill (DepthPrefill or DepthRandom) put there, untimed.
	Depth     int    `json:"depth,omitempty"`
	DepthFill string `json:"depth_fill,omitempty"`
}

// Metrics reports which of the three figures the test measures.
func (t Test) Metrics() (ttft, prefill, decode bool) {
	switch t.Kind {
	case KindPrompt:
		return true, true, false
	case KindGenerate:
		return false, false, true
	default:
		return true, true, true
	}
}

// Result is one configuration (model, weights, backend, activations) under
// one test.
type Result struct {
	Model  string `json:"model"`
	Source string `json:"source"` // "synthetic" or the model file's path
	Arch   string `json:"arch"`
	// Weights is the stored type of the weight matrices: f32, f16, int8,
	// int4, or for a file the type holding most of its matrix bytes.
	Weights     string `json:"weights"`
	Activations string `json:"activations"` // the policy asked for: auto, f32, f16, or "model" (its own policy)
	// ActivationDType is the type the policy gave the activations between
	// kernels (f32 or f16); empty when the model did not load.
	ActivationDType string `json:"activation_dtype,omitempty"`
	KVCache         string `json:"kv_cache"` // the resulting KV cache type
	Backend         string `json:"backend"`
	Device          string `json:"device"`
	ModelBytes      int64  `json:"model_bytes"`
	MaxCache        int    `json:"max_cache"`
	// LoadSeconds is the time the model took to load on the backend the
	// tests ran on. With LoadColdSeconds (GPU backends, bench
	// --cold-load), that was a fresh device whose pipeline cache held what
	// a first load, on another fresh device with an empty cache, left
	// (the warm load); LoadColdSeconds is that first load's.
	LoadSeconds     float64 `json:"load_seconds"`
	LoadColdSeconds float64 `json:"load_cold_seconds,omitempty"`
	// PipelineCacheBytes is the pipeline cache data the warm load started
	// from, and PipelineCacheHits the pipelines it created with that data
	// (Vulkan; 0 where the driver keeps nothing in a pipeline cache, and
	// on WebGPU, which has no persistent cache).
	PipelineCacheBytes int64 `json:"pipeline_cache_bytes,omitempty"`
	PipelineCacheHits  int   `json:"pipeline_cache_hits,omitempty"`
	// PeakRSSBytes is the process's peak resident memory while this
	// configuration was loaded and run (on Linux the high-water mark is
	// reset before loading; elsewhere it is the process peak so far).
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// DeviceMemoryBytes is the most device memory gpurun's buffers took
	// at once while this configuration loaded and ran (weights, KV cache,
	// activations, staging), as the GPU backends count their allocations;
	// 0 for the CPU backend.
	DeviceMemoryBytes int64 `json:"device_memory_bytes,omitempty"`
	// DecodeWeightBytes and KVBytesPerPosition are what one decode step
	// reads: the weights, and the keys and values per cache position it
	// attends to (the bytes-moved prediction of the decode table).
	DecodeWeightBytes  int64 `json:"decode_weight_bytes,omitempty"`
	KVBytesPerPosition int64 `json:"kv_bytes_per_position,omitempty"`
	// KVCacheBytes is the KV cache one session holds (sliding-window
	// layers on rings where the backend takes them).
	KVCacheBytes int64 `json:"kv_cache_bytes,omitempty"`
	Test         Test  `json:"test"`
	Runs         []Run `json:"runs"`
	// The statistics over Runs of the figures the test measures.
	TimeToFirstTokenMS  *Stat `json:"time_to_first_token_ms,omitempty"`
	PrefillTokensPerSec *Stat `json:"prefill_tokens_per_sec,omitempty"`
	DecodeTokensPerSec  *Stat `json:"decode_tokens_per_sec,omitempty"`
	// Speculation names the speculative decoding the runs used (bench
	// --lookup or --draft), "" for none; Acceptance (drafts accepted per
	// drafted token) and TokensPerStep (decoded tokens per model step)
	// summarize its runs.
	Speculation   string `json:"speculation,omitempty"`
	Acceptance    *Stat  `json:"acceptance,omitempty"`
	TokensPerStep *Stat  `json:"tokens_per_step,omitempty"`
	// Kernels is the per-kernel time breakdown (bench --profile).
	Kernels []Kernel `json:"kernels,omitempty"`
	// DecodeStep splits the wall time of a decode step into the device's
	// and the host's (a test that decodes, on a backend with timestamps
	// that picks tokens on the device): see StepTime.
	DecodeStep *StepTime `json:"decode_step,omitempty"`
	// Error says why the configuration could not be measured (for example
	// its weights do not fit in memory); it has no runs then.
	Error string `json:"error,omitempty"`
}

// Run is one measured generation.
type Run struct {
	PromptTokens        int     `json:"prompt_tokens"`
	GeneratedTokens     int     `json:"generated_tokens"`
	TimeToFirstTokenMS  float64 `json:"time_to_first_token_ms"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec"`
	DecodeTokensPerSec  float64 `json:"decode_tokens_per_sec"`
	// Speculative decoding (Result.Speculation): tokens drafted, drafts
	// accepted, and the model's steps after the first token.
	DraftTokens    int `json:"draft_tokens,omitempty"`
	AcceptedTokens int `json:"accepted_tokens,omitempty"`
	TargetSteps    int `json:"target_steps,omitempty"`
}

// Stat summarizes repeated measurements: the median, and the range as the
// spread.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// NewStat summarizes values (nil for none).
func NewStat(values []float64) *Stat {
	if len(values) == 0 {
		return nil
	}
	v := slices.Clone(values)
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return &Stat{Median: med, Min: v[0], Max: v[len(v)-1], N: len(v)}
}

// HalfRange is half the distance between the extremes: the "±" printed
// beside the median.
func (s Stat) HalfRange() float64 { return (s.Max - s.Min) / 2 }

// Kernel is one kernel's share of a profiled run: how often it was
// dispatched, its total device time, and the bytes and floating-point
// operations those dispatches account for.
type Kernel struct {
	Name   string  `json:"name"`
	Calls  int64   `json:"calls"`
	TimeMS float64 `json:"time_ms"`
	Bytes  int64   `json:"bytes"`
	Flops  int64   `json:"flops"`
}

// StepTime is one decode step's wall time split into the device's and the
// host's: WallMS is the median decode rate's step (1000 / tok/s, every
// step of the runs: submissions of several steps, their waits and reads,
// the pipeline's bookkeeping, and in the browser the page's JS crossings,
// awaits and buffer mapping), DeviceMS the device time of a decode step
// (pipeline.Model.TimeDecode: the test's decode steps run again in
// submissions as a generation's, timestamps around each submission),
// HostMS the rest: the time a device infinitely fast would still take. On
// a software driver the device time dominates; on a real GPU HostMS
// decides the rate.
//
// TimedWallMS is the timed rerun's own wall time per step (its
// submissions, each followed by a read of its two timestamps): TimedWallMS
// - DeviceMS is a host share taken in the same moment as the device time,
// steadier than HostMS on a busy machine, if larger by that read.
type StepTime struct {
	WallMS      float64 `json:"wall_ms"`
	DeviceMS    float64 `json:"device_ms"`
	HostMS      float64 `json:"host_ms"`
	TimedWallMS float64 `json:"timed_wall_ms"`
}

// SetDecodeDevice sets r's DecodeStep from its median decode rate (call
// Summarize first), deviceMS, the device time of one decode step, and
// timedWallMS, the wall time of one step of that timed run
// (pipeline.Model.TimeDecode); nothing without a decode rate.
func (r *Result) SetDecodeDevice(deviceMS, timedWallMS float64) {
	if r.DecodeTokensPerSec == nil || r.DecodeTokensPerSec.Median <= 0 {
		return
	}
	wall := 1000 / r.DecodeTokensPerSec.Median
	r.DecodeStep = &StepTime{WallMS: wall, DeviceMS: deviceMS, HostMS: wall - deviceMS, TimedWallMS: timedWallMS}
}

// Summarize fills the statistics of r from its runs, for the figures its
// test measures.
func (r *Result) Summarize() {
	ttft, prefill, decode := r.Test.Metrics()
	pick := func(on bool, get func(Run) float64) *Stat {
		if !on {
			return nil
		}
		v := make([]float64, len(r.Runs))
		for i, run := range r.Runs {
			v[i] = get(run)
		}
		return NewStat(v)
	}
	r.TimeToFirstTokenMS = pick(ttft, func(r Run) float64 { return r.TimeToFirstTokenMS })
	r.PrefillTokensPerSec = pick(prefill, func(r Run) float64 { return r.PrefillTokensPerSec })
	r.DecodeTokensPerSec = pick(decode, func(r Run) float64 { return r.DecodeTokensPerSec })
	if r.Speculation != "" {
		r.Acceptance = pick(true, func(r Run) float64 {
			if r.DraftTokens == 0 {
				return 0
			}
			return float64(r.AcceptedTokens) / float64(r.DraftTokens)
		})
		r.TokensPerStep = pick(true, func(r Run) float64 {
			if r.TargetSteps == 0 {
				return 0
			}
			return float64(r.GeneratedTokens-1) / float64(r.TargetSteps)
		})
	}
}

// Key identifies a configuration and test across reports: the same key in
// two reports means the same measurement, possibly on another machine or
// revision.
func (r *Result) Key() string {
	k := []string{r.Model, r.Weights, r.Backend, r.Activations, r.Test.Name}
	if r.Speculation != "" {
		k = append(k, r.Speculation)
	}
	return strings.Join(k, " | ")
}

// Label names the configuration (without the test) for charts and tables:
// "stories260K int8 · vulkan · activations: model default (f32) · KV cache f16".
func (r *Result) Label() string {
	l := fmt.Sprintf("%s %s · %s · activations: %s · KV cache %s", r.Model, r.Weights, r.Backend, r.ActivationsText(), r.KVCache)
	if r.Speculation != "" {
		l += " · speculative: " + r.Speculation
	}
	return l
}

// ActivationsText spells out the activation policy and the type it gave:
// "model default (f32)" (the model's own policy), "auto (f16)", "f16".
func (r *Result) ActivationsText() string {
	return ActivationsText(r.Activations, r.ActivationDType)
}

// ActivationsText spells out an activation policy (PolicyModel for the
// model's own) and, when known and not the policy itself, the type it gave.
func ActivationsText(policy, dtype string) string {
	text := policy
	if policy == PolicyModel {
		text = "model default"
	}
	if dtype != "" && dtype != policy {
		text += " (" + dtype + ")"
	}
	return text
}

// PolicyModel is Result.Activations for a model run with its own policy
// (no --activations).
const PolicyModel = "model"

// Tests lists the distinct tests of the results in first-seen order.
func (r *Report) Tests() []Test {
	var out []Test
	for _, res := range r.Results {
		if !slices.ContainsFunc(out, func(t Test) bool { return t.Name == res.Test.Name }) {
			out = append(out, res.Test)
		}
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON, refusing other schema
// versions and non-finite numbers.
func ReadJSON(rd io.Reader) (*Report, error) {
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	var probe struct {
		SchemaVersion *int `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("benchreport: not a report: %w", err)
	}
	if probe.SchemaVersion == nil {
		return nil, fmt.Errorf("%w: no schema_version (not a gpurun bench report)", ErrVersion)
	}
	if *probe.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: %d (this gpurun reads %d)", ErrVersion, *probe.SchemaVersion, SchemaVersion)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	for i := range r.Results {
		for _, s := range []*Stat{r.Results[i].TimeToFirstTokenMS, r.Results[i].PrefillTokensPerSec, r.Results[i].DecodeTokensPerSec} {
			if s != nil && (bad(s.Median) || bad(s.Min) || bad(s.Max)) {
				return nil, fmt.Errorf("benchreport: result %d (%s): invalid statistic %+v", i, r.Results[i].Key(), *s)
			}
		}
	}
	return &r, nil
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }

// DecodeBytesRow compares one test's decode speed with that of its
// configuration's shortest-prompt test (Ref) against what the bytes a
// decode step moves predict.
type DecodeBytesRow struct {
	Label, Test, Ref   string
	WeightBytes        int64
	KVBytesPerPosition int64
	Positions          float64 // mean cache positions a decode step attends to
	BytesPerToken      int64   // WeightBytes + KVBytesPerPosition*Positions
	Decode             *Stat
	Predicted          float64 // the ref's bytes per token / this test's
	Measured           float64 // decode tok/s (medians) / the ref's
	OfPrediction       float64 // Measured / Predicted
}

// decodePositions is the mean number of cache positions a decode step of
// test t attends to: its steps run at positions depth+prompt ..
// depth+prompt+gen-2.
func decodePositions(t Test) float64 {
	return float64(t.Depth) + float64(t.PromptTokens) + float64(t.GenerateTokens)/2
}

// DecodeBytesRows gives, for every configuration (label and cache size)
// with two or more measured decode figures and DecodeBytes, a row per
// test other than the one with the shortest prompt, which is the ref.
func (r *Report) DecodeBytesRows() []DecodeBytesRow {
	var out []DecodeBytesRow
	type group struct{ idx []int }
	groups := map[string]*group{}
	var order []string
	for i := range r.Results {
		res := &r.Results[i]
		if res.Error != "" || res.DecodeTokensPerSec == nil || res.DecodeTokensPerSec.Median <= 0 || res.DecodeWeightBytes <= 0 {
			continue
		}
		k := fmt.Sprintf("%s|%d", res.Label(), res.MaxCache)
		if groups[k] == nil {
			groups[k] = &group{}
			order = append(order, k)
		}
		groups[k].idx = append(groups[k].idx, i)
	}
	for _, k := range order {
		g := groups[k]
		if len(g.idx) < 2 {
			continue
		}
		ref := &r.Results[g.idx[0]]
		for _, i := range g.idx[1:] {
			if decodePositions(r.Results[i].Test) < decodePositions(ref.Test) {
				ref = &r.Results[i]
			}
		}
		bytesAt := func(res *Result) (float64, float64) {
			pos := decodePositions(res.Test)
			return pos, float64(res.DecodeWeightBytes) + float64(res.KVBytesPerPosition)*pos
		}
		_, refBytes := bytesAt(ref)
		for _, i := range g.idx {
			res := &r.Results[i]
			if res == ref {
				continue
			}
			pos, b := bytesAt(res)
			d := DecodeBytesRow{Label: res.Label(), Test: res.Test.Name, Ref: ref.Test.Name, WeightBytes: res.DecodeWeightBytes,
				KVBytesPerPosition: res.KVBytesPerPosition, Positions: pos, BytesPerToken: int64(b), Decode: res.DecodeTokensPerSec,
				Predicted: refBytes / b, Measured: res.DecodeTokensPerSec.Median / ref.DecodeTokensPerSec.Median}
			d.OfPrediction = d.Measured / d.Predicted
			out = append(out, d)
		}
	}
	return out
}
