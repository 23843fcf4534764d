package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/tensors/model"
)

// The steppers' tests run them over a toy model on fake programs: the
// logits after token t peak at follow(t) (second highest at follow(t)+1),
// whatever the position, so every step's expected token is known without
// a backend.

const toyVocab = 16

func follow(t int) int { return (t*3 + 1) % toyVocab }

// toyRow writes the logits after token t into row.
func toyRow(row []float32, t int) {
	clear(row)
	row[follow(t)] = 5
	row[(follow(t)+1)%toyVocab] = 4
}

// run is one recorded Run of a fake program.
type run struct {
	tokens []int32
	pos    int
}

// fakeProgram is a gpu.Program of the toy model: it returns the logits of
// its last token (allRows: of every token), or with pick the id the
// logits peak at among the tokens its mask allows (the argmax program).
// stepsProgram runs several steps per submission too (gpu.Program.RunSteps).
type fakeProgram struct {
	allRows, pick bool
	runs          []run
	last          []int32
	mask          []uint64
	masks         int // SetTokenMask calls
}

func (p *fakeProgram) Run(_ context.Context, tokens []int32, pos int) error {
	p.runs = append(p.runs, run{slices.Clone(tokens), pos})
	p.last = slices.Clone(tokens)
	return nil
}

func (p *fakeProgram) Logits(dst []float32) (int, error) {
	if p.pick {
		dst[0] = float32(p.picked(p.last[len(p.last)-1]))
		return 1, nil
	}
	rows := p.last[len(p.last)-1:]
	if p.allRows {
		rows = p.last
	}
	for i, t := range rows {
		toyRow(dst[i*toyVocab:(i+1)*toyVocab], int(t))
	}
	return len(rows) * toyVocab, nil
}

func (p *fakeProgram) picked(t int32) int {
	row := make([]float32, toyVocab)
	toyRow(row, int(t))
	best := -1
	for id, v := range row {
		if p.mask != nil && p.mask[id/64]&(1<<(id%64)) == 0 {
			continue
		}
		if best < 0 || v > row[best] {
			best = id
		}
	}
	return best
}

func (p *fakeProgram) SetTokenMask(allowed []uint64) error {
	p.mask = slices.Clone(allowed)
	p.masks++
	return nil
}

func (p *fakeProgram) SetInput([]float32) error { return gpu.ErrUnsupported }

func (p *fakeProgram) Release() {}

// The rest of gpu.Program: a fake runs one step per Run, keeps its
// sampling rule and has no timestamps (its Caps say so: fakeCaps).
func (p *fakeProgram) RunSteps(context.Context, int32, int, int, []int32) ([]int32, error) {
	return nil, gpu.ErrUnsupported
}
func (p *fakeProgram) TimeSteps(context.Context, int32, int, int, []int32) ([]int32, uint64, error) {
	return nil, 0, gpu.ErrUnsupported
}
func (p *fakeProgram) StartSteps(context.Context, int32, int, int, int, []int32, bool) (gpu.StepWindow, error) {
	return nil, gpu.ErrUnsupported
}
func (p *fakeProgram) SetSampling(fusion.Sampling) error { return gpu.ErrUnsupported }
func (p *fakeProgram) Profile(context.Context, []int32, int) ([]gpu.OpTime, error) {
	return nil, gpu.ErrUnsupported
}

// fakeCaps are the capabilities of fakeProgram (no multi-step
// submissions) and of stepsProgram (multiStepCaps).
var (
	fakeCaps      = gpu.Caps{}
	multiStepCaps = gpu.Caps{MaxSteps: 64, MaxStops: 8}
)

// stepsProgram adds RunSteps to a picking fakeProgram; submits records
// how many ids each submission returned.
type stepsProgram struct {
	*fakeProgram
	submits []int
}

func (p *stepsProgram) RunSteps(_ context.Context, token int32, pos, n int, stops []int32) ([]int32, error) {
	var ids []int32
	defer func() { p.submits = append(p.submits, len(ids)) }()
	for range n {
		token = int32(p.picked(token))
		ids = append(ids, token)
		if slices.Contains(stops, token) {
			break
		}
	}
	return ids, nil
}

// onlyTokens is a tokenFilter that allows the listed tokens and counts
// the tokens it accepts; the output is complete after done of them.
type onlyTokens struct {
	ids      []int
	accepted int
	done     int
}

func (f *onlyTokens) maskLogits(logits []float32) error {
	for id := range logits {
		if !slices.Contains(f.ids, id) {
			logits[id] = float32(-1e30)
		}
	}
	return nil
}

func (f *onlyTokens) allowed() ([]uint64, error) {
	m := make([]uint64, (toyVocab+63)/64)
	for _, id := range f.ids {
		m[id/64] |= 1 << (id % 64)
	}
	return m, nil
}

func (f *onlyTokens) accept(int) (bool, error) {
	f.accepted++
	return f.done > 0 && f.accepted >= f.done, nil
}

// toyModel is a model of the toy vocabulary whose one slot decodes with a
// fake program and holds history, with the logits after it in the
// returned row.
func toyModel(history []int) (*Model, *slot, *fakeProgram, []float32) {
	dec := &fakeProgram{}
	m := &Model{cfg: model.Config{VocabSize: toyVocab}, maxCache: 32, stepsPerSubmit: 4}
	sl := &slot{programs: programs{decode: dec}, cached: slices.Clone(history)}
	m.slots = []*slot{sl}
	row := make([]float32, toyVocab)
	toyRow(row, history[len(history)-1])
	return m, sl, dec, row
}

// drive asks st for n tokens after history as the generation loop does,
// appending each.
func drive(t *testing.T, st stepper, history []int, n, left int) []int {
	t.Helper()
	var got []int
	for range n {
		id, err := st.next(context.Background(), history, left)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
		history = append(history, id)
		left--
	}
	return got
}

// chain is the toy model's greedy continuation of t, n tokens.
func chain(t, n int) []int {
	var out []int
	for range n {
		t = follow(t)
		out = append(out, t)
	}
	return out
}

func TestHostPick(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter tokenFilter
		want   []int
	}{
		{"any token", anyToken{}, chain(2, 3)},
		// follow(2)=7 is not allowed: its runner-up 8; follow(8)=9.
		{"masked", &onlyTokens{ids: []int{8, 9, 12, 13}}, []int{8, 9, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel([]int{5, 2})
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: sampler.New(sampler.Options{}), filter: tc.filter}
			got := drive(t, h, []int{5, 2}, 3, 10)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
			// The first from the prefill's row; then one decode step each.
			wantRuns := []run{{[]int32{int32(got[0])}, 2}, {[]int32{int32(got[1])}, 3}}
			if fmt.Sprint(dec.runs) != fmt.Sprint(wantRuns) {
				t.Errorf("decode runs %v, want %v", dec.runs, wantRuns)
			}
			if want := []int{5, 2, got[0], got[1]}; !slices.Equal(sl.cached, want) {
				t.Errorf("cache holds %v, want %v", sl.cached, want)
			}
		})
	}
}

func TestDeviceStep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		filter    tokenFilter
		unready   bool // the cache lacks more than the last token: the host steps
		want      []int
		picked    int
		masks     int // SetTokenMask calls, the reset at close included
		hostSteps int
	}{
		{name: "argmax", filter: anyToken{}, want: chain(2, 3), picked: 2},
		{name: "masked", filter: &onlyTokens{ids: []int{8, 9, 12, 13}}, want: []int{8, 9, 12}, picked: 2, masks: 3},
		// Each host step runs the token the cache lost and the last one.
		{name: "cache not ready", filter: anyToken{}, unready: true, want: chain(2, 3), hostSteps: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel([]int{5, 2})
			pp := &fakeProgram{pick: true}
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: sampler.New(sampler.Options{}), filter: tc.filter}
			d := &deviceStep{host: h, prog: newPickProgram(pp, fusion.Sampling{}, fakeCaps)}
			history := []int{5, 2}
			var got []int
			for range 3 {
				id, err := d.next(context.Background(), history, 10)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
				history = append(history, id)
				if tc.unready {
					sl.cached = sl.cached[:len(sl.cached)-1] // as if the cache lost a token
				}
			}
			var mt Metrics
			d.close(&mt)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
			if mt.DevicePicked != tc.picked || pp.masks != tc.masks || len(dec.runs) != tc.hostSteps {
				t.Errorf("device picked %d, masks set %d, host steps %d; want %d, %d, %d", mt.DevicePicked, pp.masks, len(dec.runs), tc.picked, tc.masks, tc.hostSteps)
			}
			if pp.mask != nil {
				t.Errorf("the mask %v stays set after close", pp.mask)
			}
		})
	}
}

func TestMultiStep(t *testing.T) {
	stopAt := chain(2, 3)[2]
	for _, tc := range []struct {
		name    string
		left    int     // tokens the generation may produce, asking for min(left, 6)
		stops   []int32 // the device's stop ids
		submits []int   // ids back from each RunSteps submission
		single  int     // one-step runs
	}{
		// The first token from the prefill's logits, 4 in one
		// submission, then 4 more of which 1 is handed out.
		{name: "full submissions", left: 20, submits: []int{4, 4}},
		// The first, then 3 in one submission (left 3 when asked).
		{name: "limited", left: 4, submits: []int{3}},
		// Room for one more token: a plain device step.
		{name: "one left", left: 2, single: 1},
		// The device stops the submission at a stop id.
		{name: "stop id", left: 20, stops: []int32{int32(stopAt)}, submits: []int{2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel([]int{5, 2})
			fp := &fakeProgram{pick: true}
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: sampler.New(sampler.Options{}), filter: anyToken{}}
			sp := &stepsProgram{fakeProgram: fp}
			d := &deviceStep{host: h, prog: newPickProgram(sp, fusion.Sampling{}, multiStepCaps)}
			s := &multiStep{single: d, most: 4, stops: tc.stops}
			n := min(tc.left, 6)
			got := drive(t, s, []int{5, 2}, n, tc.left)
			var mt Metrics
			s.close(&mt)
			if want := chain(2, n); !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v", got, want)
			}
			if !slices.Equal(sp.submits, tc.submits) || len(fp.runs) != tc.single || len(dec.runs) != 0 {
				t.Errorf("submissions %v, single steps %d, host steps %d; want %v, %d, 0", sp.submits, len(fp.runs), len(dec.runs), tc.submits, tc.single)
			}
			if mt.DevicePicked != n-1 {
				t.Errorf("device picked %d, want %d", mt.DevicePicked, n-1)
			}
			// The cache holds the tokens before each id handed out or queued.
			all := append([]int{5, 2}, got...)
			all = append(all, s.queue...)
			if want := all[:len(all)-1]; !slices.Equal(sl.cached, want) {
				t.Errorf("cache holds %v, want %v", sl.cached, want)
			}
		})
	}
}

func TestSpeculativeStepper(t *testing.T) {
	// follow: 2 7 6 3 10 ...; history holds 7 followed by 6 9 4 2, so
	// after the first token, 7, lookup drafts from there.
	history := []int{7, 6, 9, 4, 2}
	for _, tc := range []struct {
		name              string
		k                 int
		want              []int
		drafted, accepted int
		verifyRuns        []run
	}{
		// The first token 7 from the prefill's row; then drafts 6 9 (k 2)
		// of which the target keeps 6 and replaces 9 by its own 3.
		{name: "k2", k: 2, want: []int{7, 6, 3}, drafted: 2, accepted: 1,
			verifyRuns: []run{{[]int32{7, 6, 9}, 5}}},
		// Drafts 6 9 4 2: 6 kept, then 3; after it lookup finds nothing
		// (3 is new), so a plain step gives 10.
		{name: "k4", k: 4, want: []int{7, 6, 3, 10}, drafted: 4, accepted: 1,
			verifyRuns: []run{{[]int32{7, 6, 9, 4, 2}, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel(history)
			ver := &fakeProgram{allRows: true}
			sl.verify = map[int]gpu.Program{tc.k + 1: ver}
			opts := &GenerateOptions{Speculation: &Speculation{Lookup: 2, Tokens: tc.k}}
			greedy := sampler.New(sampler.Options{})
			spec, err := m.newSpeculator(context.Background(), opts, greedy, history)
			if err != nil {
				t.Fatal(err)
			}
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: greedy, filter: anyToken{}}
			s := &speculative{spec: spec, plain: h, sl: sl}
			got := drive(t, s, slices.Clone(history), len(tc.want), 20)
			var mt Metrics
			s.close(&mt)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
			if mt.DraftTokens != tc.drafted || mt.AcceptedTokens != tc.accepted {
				t.Errorf("drafted %d, accepted %d; want %d, %d", mt.DraftTokens, mt.AcceptedTokens, tc.drafted, tc.accepted)
			}
			if fmt.Sprint(ver.runs) != fmt.Sprint(tc.verifyRuns) {
				t.Errorf("verifier runs %v, want %v (plain steps %v)", ver.runs, tc.verifyRuns, dec.runs)
			}
		})
	}
}

// fakeBatch is a gpu.BatchProgram that no test's round of one row runs.
type fakeBatch struct{}

func (fakeBatch) RunBatch(context.Context, []gpu.Row) error {
	return fmt.Errorf("unexpected batched step")
}
func (fakeBatch) Logits([]float32) (int, error) { return 0, fmt.Errorf("unexpected logits") }
func (fakeBatch) Release()                      {}

func TestBatchRound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unready   bool // the cache lacks more than the last token: the slot's own steps
		rounds    int64
		decodeRun int
	}{
		{name: "rounds", rounds: 2, decodeRun: 2},
		// Each step feeds the token the cache lost and the last one.
		{name: "cache not ready", unready: true, rounds: 0, decodeRun: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel([]int{5, 2})
			b := &batcher{slots: m.slots, prog: fakeBatch{}, vocab: toyVocab,
				reqs: make(chan *stepReq, 1), wake: make(chan struct{}, 1),
				quit: make(chan struct{}), done: make(chan struct{}),
				logits: make([]float32, toyVocab)}
			b.users.Store(1)
			go b.loop()
			defer b.stop()
			b.join()
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: sampler.New(sampler.Options{}), filter: anyToken{}}
			r := &batchRound{host: h, b: b, req: &stepReq{done: make(chan struct{}, 1)}}
			history := []int{5, 2}
			var got []int
			for range 3 {
				id, err := r.next(context.Background(), history, 10)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
				history = append(history, id)
				if tc.unready {
					sl.cached = sl.cached[:len(sl.cached)-1]
				}
			}
			r.close(&Metrics{})
			if want := chain(2, 3); !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v", got, want)
			}
			// A round of one row runs the slot's own decode program.
			if b.rounds.Load() != tc.rounds || len(dec.runs) != tc.decodeRun {
				t.Errorf("%d rounds, %d decode runs; want %d, %d", b.rounds.Load(), len(dec.runs), tc.rounds, tc.decodeRun)
			}
			if b.active.Load() != 0 {
				t.Errorf("%d sessions still in the rounds after close", b.active.Load())
			}
		})
	}
}

// script is a stepper that hands out ids, failing past them.
type script struct {
	ids    []int
	lefts  []int // the left of each call
	served int   // ids handed out
	closed bool
}

func (s *script) next(_ context.Context, _ []int, left int) (int, error) {
	s.lefts = append(s.lefts, left)
	if len(s.ids) == 0 {
		return -1, fmt.Errorf("script: no more ids")
	}
	id := s.ids[0]
	s.ids = s.ids[1:]
	s.served++
	return id, nil
}

func (s *script) close(*Metrics) { s.closed = true }

// TestGenerationLoop: Session.decode stops, streams and counts whatever
// the stepper: each stop reason, the tokens streamed and the budget it
// tells the stepper.
func TestGenerationLoop(t *testing.T) {
	const eos = 15
	for _, tc := range []struct {
		name      string
		ids       []int
		maxTokens int
		filter    tokenFilter
		breakAt   int // the consumer stops after this many tokens (0: never)
		cancel    bool
		want      []int
		reason    StopReason
		lefts     []int
	}{
		{name: "stop token", ids: []int{3, 4, eos, 5}, want: []int{3, 4}, reason: StopToken, lefts: []int{32, 32, 32}},
		{name: "max tokens", ids: []int{3, 4, 5, 6}, maxTokens: 3, want: []int{3, 4, 5}, reason: StopMaxTokens, lefts: []int{3, 2, 1}},
		// The history of 1 token and 32 generated pass the cache of 32: the
		// last generated token is never run.
		{name: "cache full", ids: slices.Repeat([]int{1}, 40), want: slices.Repeat([]int{1}, 32), reason: StopCacheFull},
		{name: "consumer", ids: []int{3, 4, 5}, breakAt: 2, want: []int{3, 4}, reason: StopByConsumer},
		{name: "complete", ids: []int{3, 4, 5}, filter: &onlyTokens{done: 2}, want: []int{3, 4}, reason: StopToken},
		{name: "cancelled", ids: []int{3, 4}, cancel: true, want: []int{3}, reason: StopCancelled},
		{name: "step error", ids: []int{3}, want: []int{3}, reason: StopError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _, _ := toyModel([]int{2})
			m.cfg.EOS = eos
			s := &Session{m: m, history: []int{2}}
			opts := GenerateOptions{MaxTokens: tc.maxTokens}
			g := newGeneration(s, &opts)
			if tc.filter != nil {
				g.filter = tc.filter
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &script{ids: tc.ids}
			var got []int
			s.decode(ctx, time.Now(), g, st, func(tok Token, err error) bool {
				if err == nil && tok.ID >= 0 {
					got = append(got, tok.ID)
				}
				if tc.cancel {
					cancel()
				}
				return tc.breakAt == 0 || len(got) < tc.breakAt
			})
			mt := s.Metrics()
			if !slices.Equal(got, tc.want) || mt.StopReason != tc.reason {
				t.Errorf("streamed %v, stop %q; want %v, %q", got, mt.StopReason, tc.want, tc.reason)
			}
			if mt.GeneratedTokens != len(tc.want) || mt.DecodeSteps != max(0, st.served-1) {
				t.Errorf("generated %d, decode steps %d; want %d, %d", mt.GeneratedTokens, mt.DecodeSteps, len(tc.want), max(0, st.served-1))
			}
			if tc.lefts != nil && !slices.Equal(st.lefts, tc.lefts) {
				t.Errorf("budgets %v, want %v", st.lefts, tc.lefts)
			}
			if want := append([]int{2}, tc.want...); !slices.Equal(s.history, want) {
				t.Errorf("history %v, want %v", s.history, want)
			}
		})
	}
}

// TestSamplingRule: the rule valid options give the device is one its
// programs take (fusion.Sampling.Validate), and greedy options give none.
func TestSamplingRule(t *testing.T) {
	for _, tc := range []struct {
		opts    GenerateOptions
		sampled bool
	}{
		{GenerateOptions{}, false},
		{GenerateOptions{Temperature: 0.7, TopK: 1}, false},
		{GenerateOptions{Temperature: 0.7}, true},
		{GenerateOptions{Temperature: 1e-30, TopK: 40, TopP: 1, Seed: 9}, true},
		{GenerateOptions{Temperature: 2, TopK: math.MaxInt, TopP: 0.5}, true},
	} {
		if err := tc.opts.Validate(); err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		rule, sampled := tc.opts.sampling()
		if sampled != tc.sampled {
			t.Errorf("%+v: sampled %v, want %v", tc.opts, sampled, tc.sampled)
		}
		if err := rule.Validate(); sampled && err != nil {
			t.Errorf("%+v: rule %+v: %v", tc.opts, rule, err)
		}
	}
}
