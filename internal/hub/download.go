package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Progress reports a file's download: Done of Total bytes (Total -1 when
// the hub does not say). Done starts at the bytes a resumed download had.
type Progress struct {
	File        string
	Done, Total int64
}

// Client pulls files from a hub into a cache.
type Client struct {
	// Endpoint is the hub's base address (HF_ENDPOINT).
	Endpoint string
	// Token, when set, is sent as "Authorization: Bearer TOKEN" to the
	// endpoint (Go's client drops it on redirects to other hosts).
	Token string
	// Cache is the cache directory (HF_HUB_CACHE).
	Cache string
	// Offline uses only the cache (HF_HUB_OFFLINE).
	Offline bool
	// HTTP is the client requests go through (http.DefaultClient if nil).
	HTTP *http.Client
	// Tries is how many times a request is made before its failure is the
	// pull's (default 5); a download that made progress starts counting
	// again.
	Tries int
	// Backoff is the wait after the first failed try, doubled after each
	// further one (default 1s).
	Backoff time.Duration
	// Progress, if set, is called as bytes arrive.
	Progress func(Progress)
	// Log, if set, is told of retries, resumes and the cache used offline.
	Log func(string)

	// openAppend opens a partial download for appending (a test replaces
	// it with a writer that runs out of space).
	openAppend func(path string) (io.WriteCloser, error)
}

// New returns a client configured from env (HF_ENDPOINT, HF_TOKEN or the
// token file, HF_HUB_CACHE or HF_HOME, HF_HUB_OFFLINE).
func New(env Env) *Client {
	ep := strings.TrimRight(env("HF_ENDPOINT"), "/")
	if ep == "" {
		ep = DefaultEndpoint
	}
	return &Client{Endpoint: ep, Token: Token(env), Cache: CacheDir(env), Offline: Offline(env)}
}

// Result is a pulled model.
type Result struct {
	Ref    Ref
	Commit string
	// Files are the local paths of the model's files (snapshot entries),
	// in order: one file, or a split GGUF's parts, the first to be opened.
	Files []string
	// Bytes counts the bytes downloaded (0 when all came from the cache).
	Bytes int64
}

// StatusError is a hub's answer other than success.
type StatusError struct {
	URL    string
	Status int
	Text   string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		s += " (a gated or private repository: set HF_TOKEN to a token that may read it)"
	case http.StatusNotFound:
		s += " (no such repository or file)"
	}
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// ErrChecksum is wrapped by the error of a download whose content does not
// match its ETag.
var ErrChecksum = errors.New("checksum mismatch")

// Pull makes ref's files present in the cache and returns their paths:
// from the hub, or, offline (or when the hub cannot be reached), from what
// the cache holds. The hub counts as unreachable after network
// errors and 5xx, 408 or 429 answers that persisted through the retries.
func (c *Client) Pull(ctx context.Context, ref Ref) (Result, error) {
	if c.Offline {
		return c.cached(ref)
	}
	res, err := c.pull(ctx, ref)
	var se *StatusError
	unreachable := err != nil && ctx.Err() == nil && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrNoMatch) &&
		(!errors.As(err, &se) || retryable(se.Status))
	if unreachable {
		if r, cerr := c.cached(ref); cerr == nil && r.Ref == ref {
			c.log(fmt.Sprintf("the hub could not be reached (%v); using the cached snapshot %s", err, r.Commit))
			return r, nil
		}
	}
	return res, err
}

func (c *Client) cached(ref Ref) (Result, error) {
	commit, files, err := cachedFiles(c.Cache, ref.Repo)
	if err != nil {
		return Result{}, fmt.Errorf("offline: %s: %w", ref, err)
	}
	chosen, err := Choose(files, ref.Quant)
	if err != nil {
		return Result{}, fmt.Errorf("offline: %s: in the cached snapshot %s: %w", ref, commit, err)
	}
	r := Result{Ref: ref, Commit: commit}
	for _, f := range chosen {
		r.Files = append(r.Files, filepath.Join(repoDir(c.Cache, ref.Repo), "snapshots", commit, filepath.FromSlash(f)))
	}
	return r, nil
}

func (c *Client) pull(ctx context.Context, ref Ref) (Result, error) {
	base := c.Endpoint + "/api/models/" + ref.Repo
	l, err := c.listing(ctx, base)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", ref, err)
	}
	chosen, err := Choose(l.Files, ref.Quant)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", ref, err)
	}
	dir := repoDir(c.Cache, ref.Repo)
	r := Result{Ref: ref}
	for _, f := range chosen {
		u := c.Endpoint + "/" + ref.Repo + "/resolve/main/" + escapePath(f)
		m, err := c.head(ctx, u)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %s: %w", ref, f, err)
		}
		commit := m.commit
		if commit == "" {
			commit = l.Commit
		}
		if err := checkCommit(commit); err != nil {
			return Result{}, fmt.Errorf("%s: %s: the hub gives no usable commit (X-Repo-Commit %q): %w", ref, f, commit, err)
		}
		if r.Commit != "" && commit != r.Commit {
			return Result{}, fmt.Errorf("%s: the repository changed during the pull (commit %s, then %s): pull again", ref, r.Commit, commit)
		}
		r.Commit = commit
		n, err := c.fetch(ctx, u, dir, f, m)
		r.Bytes += n
		if err != nil {
			return Result{}, fmt.Errorf("%s: %s: %w", ref, f, err)
		}
		p, err := link(dir, commit, f, m.etag)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %s: linking the snapshot: %w", ref, f, err)
		}
		r.Files = append(r.Files, p)
	}
	if err := writeRef(dir, r.Commit); err != nil {
		return Result{}, fmt.Errorf("%s: %w", ref, err)
	}
	return r, nil
}

// escapePath escapes each element of a repository path for a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, e := range parts {
		parts[i] = url.PathEscape(e)
	}
	return strings.Join(parts, "/")
}

// listing reads the repository's listing: /api/models/ORG/REPO, or its
// tree/main when the first gives no siblings.
func (c *Client) listing(ctx context.Context, base string) (Listing, error) {
	body, err := c.get(ctx, base)
	if err != nil {
		return Listing{}, err
	}
	l, err := ParseListing(body)
	if err == nil {
		return l, nil
	}
	body2, err2 := c.get(ctx, base+"/tree/main")
	if err2 != nil {
		return Listing{}, fmt.Errorf("%s: %w (and %w)", base, err, err2)
	}
	l2, err2 := ParseListing(body2)
	if err2 != nil {
		return Listing{}, fmt.Errorf("%s: %w (and tree/main: %w)", base, err, err2)
	}
	return l2, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) tries() int {
	if c.Tries > 0 {
		return c.Tries
	}
	return 5
}

func (c *Client) log(s string) {
	if c.Log != nil {
		c.Log(s)
	}
}

// wait sleeps the backoff before try number try+1 (try counts from 1).
func (c *Client) wait(ctx context.Context, try int) error {
	d := c.Backoff
	if d <= 0 {
		d = time.Second
	}
	for i := 1; i < try && d < time.Minute; i++ {
		d *= 2
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable reports whether a status is worth another try.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

func (c *Client) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "gpurun")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// send makes a request, retrying network errors and retryable statuses
// with backoff; any other status outside 2xx (3xx too when follow is
// false) is a *StatusError.
func (c *Client) send(ctx context.Context, method, u string, hc *http.Client, setup func(*http.Request)) (*http.Response, error) {
	var last error
	for try := 1; ; try++ {
		req, err := c.newRequest(ctx, method, u)
		if err != nil {
			return nil, err
		}
		if setup != nil {
			setup(req)
		}
		resp, err := hc.Do(req)
		if err == nil {
			if resp.StatusCode < 400 {
				return resp, nil
			}
			text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			last = &StatusError{URL: u, Status: resp.StatusCode, Text: strings.TrimSpace(string(text))}
			if !retryable(resp.StatusCode) {
				return nil, last
			}
		} else {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // it would name the method and URL again
			}
			last = fmt.Errorf("%s %s: %w", method, u, err)
		}
		if try >= c.tries() {
			return nil, fmt.Errorf("after %d tries: %w", try, last)
		}
		c.log(fmt.Sprintf("%v; trying again (%d of %d)", last, try+1, c.tries()))
		if err := c.wait(ctx, try); err != nil {
			return nil, err
		}
	}
}

// get reads a small document (a listing), at most 64 MiB.
func (c *Client) get(ctx context.Context, u string) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, u, c.httpClient(), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return b, nil
}

// fileMeta is what a HEAD of resolve/main/FILE says.
type fileMeta struct {
	etag   string
	commit string
	size   int64 // -1: unknown
}

// head reads a file's metadata without following a redirect: the hub puts
// X-Linked-Etag (an LFS file's sha256), X-Linked-Size and X-Repo-Commit on
// the redirect to its storage.
func (c *Client) head(ctx context.Context, u string) (fileMeta, error) {
	hc := *c.httpClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var resp *http.Response
	for hops := 0; ; hops++ {
		r, err := c.send(ctx, http.MethodHead, u, &hc, func(r *http.Request) { r.Header.Set("Accept-Encoding", "identity") })
		if err != nil {
			return fileMeta{}, err
		}
		r.Body.Close()
		resp = r
		// A relative redirect without the metadata is the hub's for a
		// renamed repository: follow it, as huggingface_hub does.
		loc := r.Header.Get("Location")
		if r.StatusCode < 300 || r.StatusCode >= 400 || r.Header.Get("X-Repo-Commit") != "" || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || hops >= 5 {
			break
		}
		next, err := url.Parse(u)
		if err != nil {
			return fileMeta{}, err
		}
		rel, err := url.Parse(loc)
		if err != nil {
			return fileMeta{}, fmt.Errorf("%s: redirect to %q: %w", u, loc, err)
		}
		u = next.ResolveReference(rel).String()
	}
	h := resp.Header
	m := fileMeta{commit: h.Get("X-Repo-Commit"), size: -1}
	m.etag = normalizeETag(h.Get("X-Linked-Etag"))
	if m.etag == "" {
		m.etag = normalizeETag(h.Get("ETag"))
	}
	if m.etag == "" {
		return fileMeta{}, fmt.Errorf("%s: the hub sends no ETag, so the download could not be verified", u)
	}
	if err := checkCommit(m.etag); err != nil {
		return fileMeta{}, fmt.Errorf("%s: ETag %q: %w", u, m.etag, err)
	}
	size := h.Get("X-Linked-Size")
	if size == "" && resp.StatusCode < 300 {
		size = h.Get("Content-Length")
	}
	if size != "" {
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil || n < 0 {
			return fileMeta{}, fmt.Errorf("%s: size %q: not a byte count", u, size)
		}
		m.size = n
	}
	return m, nil
}

// normalizeETag drops an ETag's weak marker and quotes.
func normalizeETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// errWrite marks a failure to write the partial download (a full disk),
// which no retry mends.
type errWrite struct{ err error }

func (e errWrite) Error() string { return "writing the download: " + e.err.Error() }
func (e errWrite) Unwrap() error { return e.err }

// fetch makes blobs/<etag> present: downloaded to blobs/<etag>.incomplete,
// resumed with a Range request after a cut, checked, then renamed. It
// returns the bytes it downloaded.
//
// The .incomplete file is kept when the download fails for a reason a rerun
// mends (the network, an interrupt, a full disk) so that the rerun resumes;
// it is removed when its content is wrong (the checksum does not match, it
// is longer than the file), since resuming would only keep the error.
func (c *Client) fetch(ctx context.Context, u, dir, file string, m fileMeta) (int64, error) {
	blobs := filepath.Join(dir, "blobs")
	dst := filepath.Join(blobs, m.etag)
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && (m.size < 0 || st.Size() == m.size) {
		return 0, nil
	}
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return 0, err
	}
	inc := dst + ".incomplete"
	var got int64
	fails := 0
	for {
		have := int64(0)
		if st, err := os.Stat(inc); err == nil {
			have = st.Size()
		}
		if m.size >= 0 && have > m.size {
			c.log(fmt.Sprintf("%s: the partial download is longer than the file; starting again", file))
			os.Remove(inc)
			have = 0
		}
		if m.size >= 0 && have == m.size {
			break
		}
		if have > 0 {
			c.log(fmt.Sprintf("%s: resuming at byte %d", file, have))
		}
		n, done, err := c.fetchFrom(ctx, u, inc, file, have, m.size)
		got += n
		if err == nil && done {
			break
		}
		if err != nil {
			var we errWrite
			var se *StatusError
			switch {
			case ctx.Err() != nil:
				return got, ctx.Err()
			case errors.As(err, &we), errors.As(err, &se):
				return got, err
			}
		}
		if n > 0 {
			fails = 0
		}
		fails++
		if fails >= c.tries() {
			return got, fmt.Errorf("after %d tries without progress: %w", fails, err)
		}
		c.log(fmt.Sprintf("%s: %v; trying again", file, err))
		if err := c.wait(ctx, fails); err != nil {
			return got, err
		}
	}
	if err := verify(inc, m); err != nil {
		os.Remove(inc)
		return got, fmt.Errorf("%w; the download was removed", err)
	}
	if err := os.Rename(inc, dst); err != nil {
		return got, err
	}
	return got, nil
}

// fetchFrom downloads u from byte have into inc. done is true when the
// body ended whole (its length as the response and size say).
func (c *Client) fetchFrom(ctx context.Context, u, inc, file string, have, size int64) (n int64, done bool, err error) {
	resp, err := c.send(ctx, http.MethodGet, u, c.httpClient(), func(r *http.Request) {
		r.Header.Set("Accept-Encoding", "identity")
		if have > 0 {
			r.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
	})
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusRequestedRangeNotSatisfiable && have > 0 {
			os.Remove(inc)
			return 0, false, fmt.Errorf("the hub refused to resume at byte %d; starting again", have)
		}
		return 0, false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			os.Remove(inc)
			return 0, false, fmt.Errorf("the hub answered range %d- with %q; starting again", have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			c.log(fmt.Sprintf("%s: the hub does not resume; starting again", file))
			os.Remove(inc)
			have = 0
		}
	default:
		return 0, false, &StatusError{URL: u, Status: resp.StatusCode, Text: "unexpected status for a download"}
	}
	open := c.openAppend
	if open == nil {
		open = func(p string) (io.WriteCloser, error) {
			return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		}
	}
	w, err := open(inc)
	if err != nil {
		return 0, false, errWrite{err}
	}
	total := size
	if total < 0 && resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	report := func() {
		if c.Progress != nil {
			c.Progress(Progress{File: file, Done: have + n, Total: total})
		}
	}
	report()
	buf := make([]byte, 64<<10)
	var rerr error
	for {
		if err := ctx.Err(); err != nil {
			w.Close()
			return n, false, err
		}
		k, re := resp.Body.Read(buf)
		if k > 0 {
			wk, we := w.Write(buf[:k])
			n += int64(wk)
			if we == nil && wk < k {
				we = io.ErrShortWrite
			}
			if we != nil {
				w.Close()
				return n, false, errWrite{we}
			}
			report()
		}
		if re != nil {
			if re != io.EOF {
				rerr = re
			}
			break
		}
	}
	if err := w.Close(); err != nil {
		return n, false, errWrite{err}
	}
	if rerr != nil {
		return n, false, fmt.Errorf("the download was cut at byte %d: %w", have+n, rerr)
	}
	if total >= 0 && have+n < total {
		return n, false, fmt.Errorf("the download was cut at byte %d of %d", have+n, total)
	}
	return n, true, nil
}

// verify checks a finished download against its metadata: its size, and
// an ETag of 64 hex digits as its sha256 (an LFS file), of 40 as its git
// blob hash (a file in git itself). Another ETag is checked by size alone.
func verify(path string, m fileMeta) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if m.size >= 0 && st.Size() != m.size {
		return fmt.Errorf("%w: %d bytes, want %d", ErrChecksum, st.Size(), m.size)
	}
	var h hash.Hash
	switch {
	case isHex(m.etag, 64):
		h = sha256.New()
	case isHex(m.etag, 40):
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	default:
		return nil
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, m.etag) {
		return fmt.Errorf("%w: content hashes to %s, the hub's ETag is %s", ErrChecksum, sum, m.etag)
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
