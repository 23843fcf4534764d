package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/hub/hubtest"
)

// realFiles are GGUF files of the repository's testdata, served as a
// repository's quants.
func realFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, src := range map[string]string{
		"llama-Q4_K_M.gguf": "../../testdata/gguf/llama-Q4_K_M.gguf",
		"llama-Q5_K_M.gguf": "../../testdata/gguf/llama-Q5_K_M.gguf",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// newHub serves the real files as org/llama-GGUF (and a README).
func newHub(t *testing.T) (*hubtest.Hub, map[string][]byte) {
	h := hubtest.New(t)
	files := realFiles(t)
	h.Add("org/llama-GGUF", "README.md", []byte("# llama\n"))
	h.Add("org/llama-GGUF", "llama-Q4_K_M.gguf", files["llama-Q4_K_M.gguf"])
	h.Add("org/llama-GGUF", "llama-Q5_K_M.gguf", files["llama-Q5_K_M.gguf"])
	return h, files
}

func newClient(h *hubtest.Hub, cache string) (*Client, *[]string) {
	var logs []string
	return &Client{Endpoint: h.URL, Cache: cache, Backoff: time.Millisecond, Log: func(s string) { logs = append(logs, s) }}, &logs
}

// checkPulled: the result's one file has want's bytes, is a link into
// blobs/<sha256> and refs/main names the hub's commit; nothing partial is
// left.
func checkPulled(t *testing.T, h *hubtest.Hub, cache string, r Result, want []byte) {
	t.Helper()
	if len(r.Files) != 1 {
		t.Fatalf("files %v, want one", r.Files)
	}
	got, err := os.ReadFile(r.Files[0])
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pulled file: %d bytes, %v; want the served %d bytes", len(got), err, len(want))
	}
	dir := filepath.Join(cache, "models--org--llama-GGUF")
	if r.Files[0] != filepath.Join(dir, "snapshots", h.Commit, "llama-Q4_K_M.gguf") && r.Files[0] != filepath.Join(dir, "snapshots", h.Commit, "llama-Q5_K_M.gguf") {
		t.Errorf("file at %s, not in the snapshot", r.Files[0])
	}
	// Windows without the privilege to make links gets a copy.
	if l, err := os.Readlink(r.Files[0]); runtime.GOOS != "windows" && (err != nil || !strings.HasPrefix(l, filepath.Join("..", "..", "blobs")+string(filepath.Separator))) {
		t.Errorf("snapshot entry: link %q, %v; want ../../blobs/<etag>", l, err)
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(ref) != h.Commit || r.Commit != h.Commit {
		t.Errorf("refs/main %q, %v, result commit %q; want %q", ref, err, r.Commit, h.Commit)
	}
	checkNoPartial(t, cache)
}

// checkNoPartial: no .incomplete file anywhere in the cache.
func checkNoPartial(t *testing.T, cache string) {
	t.Helper()
	for _, p := range partials(t, cache) {
		t.Errorf("left a partial download: %s", p)
	}
}

func partials(t *testing.T, cache string) []string {
	var out []string
	filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".incomplete") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// checkNothingComplete: the cache holds no blob, snapshot entry or ref.
func checkNothingComplete(t *testing.T, cache string) {
	t.Helper()
	filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.HasSuffix(p, ".incomplete") {
			t.Errorf("a file that looks complete after a failed pull: %s", p)
		}
		return nil
	})
}

func TestPull(t *testing.T) {
	h, files := newHub(t)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	var last Progress
	c.Progress = func(p Progress) { last = p }
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])
	if n := int64(len(files["llama-Q4_K_M.gguf"])); r.Bytes != n || last.Done != n || last.Total != n || last.File != "llama-Q4_K_M.gguf" {
		t.Errorf("bytes %d, last progress %+v; want %d", r.Bytes, last, n)
	}
	// Again: from the cache, no file downloaded.
	before := len(h.Requests())
	r2, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "q4_k_m"})
	if err != nil || r2.Bytes != 0 || r2.Files[0] != r.Files[0] {
		t.Fatalf("second pull: %+v, %v", r2, err)
	}
	for _, q := range h.Requests()[before:] {
		if strings.HasPrefix(q.Path, "/storage/") {
			t.Errorf("second pull downloaded again: %+v", q)
		}
	}
	// Another quant: a second blob in the same snapshot.
	r3, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q5_K_M"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r3, files["llama-Q5_K_M.gguf"])
}

// TestPullRenamed: a renamed repository's relative redirect is followed
// to read the file's metadata; the cache keeps the name asked for.
func TestPullRenamed(t *testing.T) {
	h, files := newHub(t)
	h.SetFaults(hubtest.Faults{Renamed: map[string]string{"old/name": "org/llama-GGUF"}})
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	r, err := c.Pull(context.Background(), Ref{Repo: "old/name"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(r.Files[0])
	if err != nil || !bytes.Equal(got, files["llama-Q4_K_M.gguf"]) {
		t.Fatalf("renamed: %d bytes, %v", len(got), err)
	}
	if want := filepath.Join(cache, "models--old--name", "snapshots", h.Commit, "llama-Q4_K_M.gguf"); r.Files[0] != want {
		t.Errorf("path %s, want %s", r.Files[0], want)
	}
}

// TestPullTree: a listing without siblings falls back on tree/main.
func TestPullTree(t *testing.T) {
	h, files := newHub(t)
	h.SetFaults(hubtest.Faults{NoSiblings: true})
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q5_K_M"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q5_K_M.gguf"])
}

// TestPullResume: cuts in the middle of the file are resumed with Range
// requests from where each stopped, and the file is whole.
func TestPullResume(t *testing.T) {
	h, files := newHub(t)
	h.SetFaults(hubtest.Faults{Cut: 3, CutAfter: 20000})
	cache := t.TempDir()
	c, logs := newClient(h, cache)
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])
	var ranges []string
	for _, q := range h.Requests() {
		if strings.HasPrefix(q.Path, "/storage/") {
			ranges = append(ranges, q.Range)
		}
	}
	if want := []string{"", "bytes=20000-", "bytes=40000-", "bytes=60000-"}; strings.Join(ranges, ",") != strings.Join(want, ",") {
		t.Errorf("downloads asked for ranges %q, want %q", ranges, want)
	}
	if n := int64(len(files["llama-Q4_K_M.gguf"])); r.Bytes != n {
		t.Errorf("downloaded %d bytes in all, want %d (each byte once)", r.Bytes, n)
	}
	if !strings.Contains(strings.Join(*logs, "\n"), "resuming at byte 60000") {
		t.Errorf("log does not say it resumed: %q", *logs)
	}
}

// TestPullResumeAfterInterrupt: a partial download left by an earlier run
// (cancelled) is resumed by the next.
func TestPullResumeAfterInterrupt(t *testing.T) {
	h, files := newHub(t)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	ctx, cancel := context.WithCancel(context.Background())
	c.Progress = func(p Progress) {
		if p.Done >= 50000 {
			cancel()
		}
	}
	h.SetFaults(hubtest.Faults{Cut: 1, CutAfter: 50000})
	_, err := c.Pull(ctx, Ref{Repo: "org/llama-GGUF"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v, want context.Canceled", err)
	}
	checkNothingComplete(t, cache)
	if len(partials(t, cache)) != 1 {
		t.Fatalf("partials %v, want the one kept for resuming", partials(t, cache))
	}
	c.Progress = nil
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])
	if r.Bytes >= int64(len(files["llama-Q4_K_M.gguf"])) {
		t.Errorf("the second pull downloaded %d bytes: it did not resume", r.Bytes)
	}
}

// TestPull500: a few 500s are retried; 500s that persist are an error
// naming the status and the tries, leaving nothing complete-looking.
func TestPull500(t *testing.T) {
	h, files := newHub(t)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	h.SetFaults(hubtest.Faults{Fail500: 3})
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])

	cache2 := t.TempDir()
	c2, _ := newClient(h, cache2)
	h.SetFaults(hubtest.Faults{Fail500: 1 << 30})
	_, err = c2.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	var se *StatusError
	if err == nil || !errors.As(err, &se) || se.Status != 500 || !strings.Contains(err.Error(), "after 5 tries") {
		t.Fatalf("persistent 500s: %v; want a 500 after 5 tries", err)
	}
	checkNothingComplete(t, cache2)
	// With the file cached, persistent 500s fall back on the cache.
	r, err = c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatalf("persistent 500s, file cached: %v", err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])
	// 500s in the middle of the download (after its listing and HEAD).
	h.SetFaults(hubtest.Faults{Cut: 1, CutAfter: 30000})
	cache3 := t.TempDir()
	c3, _ := newClient(h, cache3)
	c3.Progress = func(p Progress) {
		if p.Done > 0 {
			h.SetFaults(hubtest.Faults{Fail500: 1 << 30})
		}
	}
	_, err = c3.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err == nil || !errors.As(err, &se) || se.Status != 500 {
		t.Fatalf("500s mid-download: %v", err)
	}
	checkNothingComplete(t, cache3)
}

// TestPullChecksum: content that does not hash to the ETag is an error,
// and the partial download is removed (resuming it would keep the bad
// bytes), nothing complete-looking left.
func TestPullChecksum(t *testing.T) {
	h, _ := newHub(t)
	h.SetFaults(hubtest.Faults{Corrupt: true})
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	_, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("corrupt content: %v, want ErrChecksum", err)
	}
	checkNothingComplete(t, cache)
	checkNoPartial(t, cache)
}

// fullDisk fails with ENOSPC once more than left bytes are written.
type fullDisk struct {
	f    *os.File
	left *int64
}

func (d fullDisk) Write(p []byte) (int, error) {
	if int64(len(p)) > *d.left {
		n, _ := d.f.Write(p[:*d.left])
		*d.left = 0
		return n, &os.PathError{Op: "write", Path: d.f.Name(), Err: syscall.ENOSPC}
	}
	*d.left -= int64(len(p))
	return d.f.Write(p)
}
func (d fullDisk) Close() error { return d.f.Close() }

// TestPullDiskFull: a write that fails for want of space ends the pull
// with that error (no retry), nothing complete-looking; once there is
// space, the next pull resumes from the bytes written.
func TestPullDiskFull(t *testing.T) {
	h, files := newHub(t)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	left := int64(40000)
	c.openAppend = func(p string) (io.WriteCloser, error) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		return fullDisk{f, &left}, err
	}
	_, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "writing the download") {
		t.Fatalf("full disk: %v, want ENOSPC", err)
	}
	checkNothingComplete(t, cache)
	c.openAppend = nil
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, cache, r, files["llama-Q4_K_M.gguf"])
	if want := int64(len(files["llama-Q4_K_M.gguf"])) - 40000; r.Bytes != want {
		t.Errorf("after space came back: downloaded %d, want the remaining %d", r.Bytes, want)
	}
}

// TestPullOffline: offline, a pulled reference comes from the cache with
// no request; one never pulled is a clear error.
func TestPullOffline(t *testing.T) {
	h, files := newHub(t)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q5_K_M"}); err != nil {
		t.Fatal(err)
	}
	n := len(h.Requests())
	off := New(func(k string) string {
		return map[string]string{"HF_HUB_CACHE": cache, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": h.URL}[k]
	})
	if !off.Offline {
		t.Fatal("HF_HUB_OFFLINE=1 is not offline")
	}
	r, err := off.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	// The default (Q4_K_M) is not cached: offline takes what is there.
	checkPulled(t, h, cache, r, files["llama-Q5_K_M.gguf"])
	if _, err := off.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q4_K_M"}); !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), "Q5_K_M") {
		t.Errorf("offline, an uncached quant: %v", err)
	}
	if _, err := off.Pull(context.Background(), Ref{Repo: "org/other"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline, an uncached repository: %v", err)
	}
	if len(h.Requests()) != n {
		t.Errorf("offline pulls made %d requests", len(h.Requests())-n)
	}
	// The hub gone: an online pull uses the cache, saying so.
	h.Close()
	c2, logs := newClient(h, cache)
	c2.Tries = 1
	if r, err := c2.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q5_K_M"}); err != nil || r.Commit != h.Commit {
		t.Errorf("hub unreachable: %+v, %v", r, err)
	} else if !strings.Contains(strings.Join(*logs, "\n"), "using the cached snapshot") {
		t.Errorf("logs %q do not say the cache was used", *logs)
	}
}

// TestPullToken: the token is sent as a Bearer header on every request to
// the hub, and a hub wanting one that is not given is a 401 saying so.
func TestPullToken(t *testing.T) {
	h, files := newHub(t)
	h.SetFaults(hubtest.Faults{Token: "hf_secret"})
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	_, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = New(func(k string) string { return map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.URL + "/"}[k] })
	c.Backoff = time.Millisecond
	if c.Cache != filepath.Join(home, "hub") || c.Token != "hf_secret" {
		t.Fatalf("from HF_HOME: cache %s token %q", c.Cache, c.Token)
	}
	r, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, h, c.Cache, r, files["llama-Q4_K_M.gguf"])
	for _, q := range h.Requests()[1:] {
		if q.Authorization != "Bearer hf_secret" {
			t.Errorf("%s %s sent Authorization %q", q.Method, q.Path, q.Authorization)
		}
	}
	if got := Token(func(k string) string { return map[string]string{"HF_TOKEN": "env", "HF_HOME": home}[k] }); got != "env" {
		t.Errorf("HF_TOKEN does not win over the token file: %q", got)
	}
}

// TestPullSplit: a split GGUF's parts are all pulled, in order, into the
// same snapshot, under their directory.
func TestPullSplit(t *testing.T) {
	h := hubtest.New(t)
	whole := realFiles(t)["llama-Q4_K_M.gguf"]
	a, b := whole[:len(whole)/2], whole[len(whole)/2:]
	h.Add("org/split", "Q8_0/m-Q8_0-00001-of-00002.gguf", a)
	h.Add("org/split", "Q8_0/m-Q8_0-00002-of-00002.gguf", b)
	cache := t.TempDir()
	c, _ := newClient(h, cache)
	r, err := c.Pull(context.Background(), Ref{Repo: "org/split", Quant: "Q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files) != 2 {
		t.Fatalf("files %v", r.Files)
	}
	for i, want := range [][]byte{a, b} {
		got, err := os.ReadFile(r.Files[i])
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("part %d: %d bytes, %v", i+1, len(got), err)
		}
		if l, _ := os.Readlink(r.Files[i]); runtime.GOOS != "windows" && !strings.HasPrefix(l, filepath.Join("..", "..", "..", "blobs")) {
			t.Errorf("part %d links to %q", i+1, l)
		}
	}
}

// TestPullErrors: a missing repository, a missing quant.
func TestPullErrors(t *testing.T) {
	h, _ := newHub(t)
	c, _ := newClient(h, t.TempDir())
	var se *StatusError
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/missing"}); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("missing repository: %v", err)
	}
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/llama-GGUF", Quant: "Q2_K"}); !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), "Q4_K_M, Q5_K_M") {
		t.Errorf("missing quant: %v", err)
	}
}
