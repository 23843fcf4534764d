// Package hubtest is a loopback fake of a Hugging Face hub for tests: it
// serves real files under the hub's routes (/api/models/ORG/REPO, its
// tree/main, /ORG/REPO/resolve/main/FILE redirecting to a storage URL as
// the hub redirects LFS files to its CDN) and injects faults: 500s, cuts in
// the middle of a file, wrong content, a required token.
package hubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hub is a running fake hub.
type Hub struct {
	*httptest.Server
	// Commit is the commit every repository is at.
	Commit string

	mu    sync.Mutex
	repos map[string][]file // ORG/REPO -> files, in listing order
	f     Faults
	log   []Request
}

type file struct {
	path string
	data []byte
	sum  string // sha256, hex
}

// Faults are the faults the hub injects; each counter is decremented as
// it fires.
type Faults struct {
	// Fail500 answers the next N requests (any route) with 500.
	Fail500 int
	// Cut ends the next N file bodies after CutAfter bytes by closing the
	// connection mid-body.
	Cut      int
	CutAfter int64
	// Stall makes the next N file bodies stop after StallAfter bytes and
	// wait for the client to go away (an interrupt test's slow hub).
	Stall      int
	StallAfter int64
	// Corrupt flips a byte of every file body served while set, the
	// ETag staying the true content's.
	Corrupt bool
	// Token, when set, is required as "Authorization: Bearer Token" on
	// every route (401 otherwise).
	Token string
	// Renamed maps an old repository name to its new one: the old name's
	// resolve URLs answer with a relative redirect to the new name's, as
	// the hub does for a renamed repository.
	Renamed map[string]string
	// NoSiblings makes /api/models/ORG/REPO answer without "siblings", so
	// clients fall back on tree/main.
	NoSiblings bool
}

// Request is one request the hub saw.
type Request struct {
	Method, Path, Range, Authorization string
}

// New starts a hub; it closes when the test ends.
func New(t testing.TB) *Hub {
	h := &Hub{Commit: "0123456789abcdef0123456789abcdef01234567", repos: map[string][]file{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

// Add puts a file into a repository.
func (h *Hub) Add(repo, path string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := sha256.Sum256(data)
	h.repos[repo] = append(h.repos[repo], file{path: path, data: data, sum: hex.EncodeToString(s[:])})
}

// SetFaults replaces the faults.
func (h *Hub) SetFaults(f Faults) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f = f
}

// Requests returns the requests seen so far.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.log...)
}

func (h *Hub) find(repo, path string) (file, bool) {
	for _, f := range h.repos[repo] {
		if f.path == path {
			return f, true
		}
	}
	return file{}, false
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.log = append(h.log, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")})
	if h.f.Fail500 > 0 {
		h.f.Fail500--
		h.mu.Unlock()
		http.Error(w, "injected failure", http.StatusInternalServerError)
		return
	}
	if h.f.Token != "" && r.Header.Get("Authorization") != "Bearer "+h.f.Token {
		h.mu.Unlock()
		http.Error(w, "a token is required", http.StatusUnauthorized)
		return
	}
	f := h.f
	h.mu.Unlock()
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/models/"):
		h.api(w, strings.TrimPrefix(p, "/api/models/"), f)
	case strings.HasPrefix(p, "/storage/"):
		h.storage(w, r, strings.TrimPrefix(p, "/storage/"))
	default:
		h.resolve(w, r, strings.TrimPrefix(p, "/"))
	}
}

func (h *Hub) api(w http.ResponseWriter, rest string, f Faults) {
	repo, tree := strings.CutSuffix(rest, "/tree/main")
	h.mu.Lock()
	if to, ok := f.Renamed[repo]; ok {
		repo = to
	}
	files, ok := h.repos[repo]
	h.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return
	}
	var out any
	if tree {
		var arr []map[string]any
		for _, fl := range files {
			arr = append(arr, map[string]any{"type": "file", "path": fl.path, "size": len(fl.data), "oid": "x", "lfs": map[string]any{"oid": fl.sum, "size": len(fl.data)}})
		}
		out = arr
	} else {
		obj := map[string]any{"id": repo, "sha": h.Commit}
		if !f.NoSiblings {
			var sib []map[string]string
			for _, fl := range files {
				sib = append(sib, map[string]string{"rfilename": fl.path})
			}
			obj["siblings"] = sib
		}
		out = obj
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// resolve redirects /ORG/REPO/resolve/main/FILE to /storage/REPO/SHA256,
// with the hub's metadata headers on the redirect.
func (h *Hub) resolve(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" || parts[3] != "main" {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + parts[1]
	h.mu.Lock()
	if to, ok := h.f.Renamed[repo]; ok {
		h.mu.Unlock()
		http.Redirect(w, r, "/"+to+"/resolve/main/"+parts[4], http.StatusTemporaryRedirect)
		return
	}
	fl, ok := h.find(repo, parts[4])
	h.mu.Unlock()
	if !ok {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", h.Commit)
	w.Header().Set("X-Linked-Etag", `"`+fl.sum+`"`)
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(fl.data)))
	w.Header().Set("ETag", `W/"not-the-content-hash"`)
	http.Redirect(w, r, "/storage/"+repo+"/"+fl.sum, http.StatusFound)
}

// storage serves a file's bytes with Range support, injecting cuts and
// corruption.
func (h *Hub) storage(w http.ResponseWriter, r *http.Request, rest string) {
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	repo, sum := rest[:i], rest[i+1:]
	h.mu.Lock()
	var fl file
	ok := false
	for _, f := range h.repos[repo] {
		if f.sum == sum {
			fl, ok = f, true
		}
	}
	cut := int64(-1)
	if h.f.Cut > 0 {
		h.f.Cut--
		cut = h.f.CutAfter
	}
	stall := int64(-1)
	if h.f.Stall > 0 {
		h.f.Stall--
		stall = h.f.StallAfter
	}
	corrupt := h.f.Corrupt
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	data := fl.data
	if corrupt {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0x5a
	}
	var ww http.ResponseWriter = w
	if cut >= 0 {
		ww = &cutWriter{ResponseWriter: w, left: cut}
	}
	if stall >= 0 {
		ww = &cutWriter{ResponseWriter: w, left: stall, stall: r.Context().Done()}
	}
	w.Header().Set("ETag", `"`+fl.sum+`"`)
	http.ServeContent(ww, r, "", time.Time{}, bytes.NewReader(data))
}

// cutWriter writes left bytes of the body, then drops the connection (or,
// with stall set, waits for it to close first).
type cutWriter struct {
	http.ResponseWriter
	left  int64
	stall <-chan struct{}
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= c.left {
		c.left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	n, _ := c.ResponseWriter.Write(p[:c.left])
	c.left = 0
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	_ = n
	if c.stall != nil {
		<-c.stall
	}
	panic(http.ErrAbortHandler)
}
