package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePool is a pool of models a, b, c and big with a fake loader (sizes
// by name; a loaded model's measured size may differ from its estimate)
// and a fake clock.
type fakePool struct {
	*pool
	clock  time.Time
	loads  []string
	closed []string
	mu     sync.Mutex
}

func newFakePool(budget int64, keep time.Duration) *fakePool {
	f := &fakePool{clock: time.Unix(1000, 0)}
	measured := map[string]int64{"a": 40, "b": 40, "c": 30, "big": 200}
	f.pool = newPool(budget, keep, 50*time.Millisecond, func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.clock
	}, func(ctx context.Context, id string) (*instance, int64, error) {
		f.mu.Lock()
		f.loads = append(f.loads, id)
		f.mu.Unlock()
		if id == "bad" {
			return nil, 0, errors.New("no such file")
		}
		return &instance{close: func() error {
			f.mu.Lock()
			f.closed = append(f.closed, id)
			f.mu.Unlock()
			return nil
		}}, measured[id], nil
	})
	for id, est := range map[string]int64{"a": 40, "b": 40, "c": 20, "big": 200, "bad": 10} {
		f.add(id, est)
	}
	return f
}

func (f *fakePool) loadedIDs() string {
	var ids []string
	for _, l := range f.loaded() {
		ids = append(ids, l.id)
	}
	return strings.Join(ids, ",")
}

// TestPoolPolicy drives the pool step by step: "+a" acquires a (a
// request starts), "-a" releases it with the server's keep_alive, "-a:0"
// / "-a:-1" / "-a:10s" with a request's, "t10s" advances the clock and
// sweeps; after each step the loaded models must be want (sorted ids),
// and at the end the loads and unloads those listed.
func TestPoolPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int64
		keep    time.Duration
		steps   []string
		want    []string // loaded after each step
		loads   string
		unloads string
		errs    map[int]error // step -> the error its acquire gets
	}{
		{name: "fits", budget: 100, keep: time.Minute,
			steps: []string{"+a", "-a", "+b", "-b", "+a", "-a"},
			want:  []string{"a", "a", "a,b", "a,b", "a,b", "a,b"}, loads: "a,b"},
		{name: "lru eviction", budget: 90, keep: time.Minute,
			steps: []string{"+a", "-a", "t1s", "+b", "-b", "t1s", "+a", "-a", "+c", "-c"},
			// c (estimate 20) fits beside a and b? 40+40+20 > 90: b, the
			// least recently used, goes.
			want:  []string{"a", "a", "a", "a,b", "a,b", "a,b", "a,b", "a,b", "a,c", "a,c"},
			loads: "a,b,c", unloads: "b"},
		{name: "in flight never evicted", budget: 80, keep: time.Minute,
			steps: []string{"+a", "+b", "-b", "+c"},
			// a has a request running: b (idle) goes, though a is older.
			want:  []string{"a", "a,b", "a,b", "a,c"},
			loads: "a,b,c", unloads: "b"},
		{name: "no room waits then 503", budget: 80, keep: time.Minute,
			steps: []string{"+a", "+b", "+c"},
			want:  []string{"a", "a,b", "a,b"},
			loads: "a,b", errs: map[int]error{2: errNoRoom}},
		{name: "too large", budget: 100, keep: time.Minute,
			steps: []string{"+big"}, want: []string{""}, errs: map[int]error{0: errTooLarge}},
		{name: "load error", budget: 100, keep: time.Minute,
			steps: []string{"+bad", "+a"}, want: []string{"", "a"}, loads: "bad,a", errs: map[int]error{0: errString("no such file")}},
		{name: "keep alive expires", budget: 0, keep: 5 * time.Minute,
			steps: []string{"+a", "-a", "t4m", "+b", "-b", "t1m", "t4m"},
			want:  []string{"a", "a", "a", "a,b", "a,b", "b", ""},
			loads: "a,b", unloads: "a,b"},
		{name: "keep alive 0 and -1", budget: 0, keep: 5 * time.Minute,
			steps: []string{"+a", "+a", "-a:0", "-a:0", "+b", "-b:-1", "t1000h", "+b", "-b:1s", "t1s"},
			// a stays while its second request runs, goes when it ends.
			want:  []string{"a", "a", "a", "", "b", "b", "b", "b", "b", ""},
			loads: "a,b", unloads: "a,b"},
		{name: "request keep alive lasts", budget: 0, keep: time.Minute,
			steps: []string{"+a", "-a:1h", "t30m", "+a", "-a", "t2m"},
			// The last request gave none: the server's minute applies.
			want:  []string{"a", "a", "a", "a", "a", ""},
			loads: "a", unloads: "a"},
		{name: "measured larger evicts idle", budget: 80, keep: time.Minute,
			steps: []string{"+a", "-a", "t1s", "+b", "-b", "t1s", "+c"},
			// c estimates 20 (40+40+20 > 80: a, the older, goes)
			// and measures 30: 40+30 fits.
			want:  []string{"a", "a", "a", "a,b", "a,b", "a,b", "b,c"},
			loads: "a,b,c", unloads: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePool(tc.budget, tc.keep)
			for i, step := range tc.steps {
				switch {
				case step[0] == '+':
					_, err := f.acquire(context.Background(), step[1:])
					want := tc.errs[i]
					if want == nil && err != nil || want != nil && (err == nil || !errors.Is(err, want) && !strings.Contains(err.Error(), want.Error())) {
						t.Fatalf("step %d %s: err %v, want %v", i, step, err, want)
					}
				case step[0] == '-':
					id, k, has := strings.Cut(step[1:], ":")
					var keep *time.Duration
					if has {
						d, err := ParseKeepAlive([]byte(fmt.Sprintf("%q", k)))
						if err != nil {
							t.Fatal(err)
						}
						keep = d
					}
					f.release(id, keep)
				case step[0] == 't':
					d, err := time.ParseDuration(step[1:])
					if err != nil {
						t.Fatal(err)
					}
					f.mu.Lock()
					f.clock = f.clock.Add(d)
					f.mu.Unlock()
					f.sweep()
				}
				if got := f.loadedIDs(); got != tc.want[i] {
					t.Fatalf("after step %d %s: loaded %q, want %q", i, step, got, tc.want[i])
				}
			}
			if got := strings.Join(f.loads, ","); got != tc.loads {
				t.Errorf("loads %q, want %q", got, tc.loads)
			}
			if got := strings.Join(f.closed, ","); got != tc.unloads {
				t.Errorf("unloads %q, want %q", got, tc.unloads)
			}
		})
	}
}

// TestPoolConcurrentFirstLoad: many first requests for one model load it
// once, and a waiting load for a model that has no room proceeds as soon
// as the request holding the room ends.
func TestPoolConcurrentFirstLoad(t *testing.T) {
	f := newFakePool(0, time.Minute)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.acquire(context.Background(), "a"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !slices.Equal(f.loads, []string{"a"}) {
		t.Fatalf("loads %v, want one of a", f.loads)
	}

	g := newFakePool(80, time.Minute)
	g.wait = time.Minute
	g.acquire(context.Background(), "a")
	g.acquire(context.Background(), "b")
	var got atomic.Bool
	done := make(chan error)
	go func() {
		_, err := g.acquire(context.Background(), "c")
		got.Store(true)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if got.Load() {
		t.Fatal("c loaded while a and b both had requests running")
	}
	g.release("b", nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.loadedIDs() != "a,c" {
		t.Fatalf("loaded %q, want a,c", g.loadedIDs())
	}
	// A waiting load ends with its request's context.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := g.acquire(ctx, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestParseKeepAlive(t *testing.T) {
	for in, want := range map[string]time.Duration{`"5m"`: 5 * time.Minute, `0`: 0, `"0"`: 0, `-1`: -1, `"-1"`: -1, `"-5m"`: -1, `30`: 30 * time.Second, `"1h30m"`: 90 * time.Minute, `1.5`: 1500 * time.Millisecond} {
		got, err := ParseKeepAlive([]byte(in))
		if err != nil || *got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{`"soon"`, `true`, `{}`} {
		if _, err := ParseKeepAlive([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if d, err := ParseKeepAlive(nil); d != nil || err != nil {
		t.Errorf("absent: %v, %v", d, err)
	}
}
