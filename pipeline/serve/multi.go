package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of MultiConfig's zero fields.
const (
	DefaultKeepAlive = 5 * time.Minute  // idle time before a model unloads
	DefaultLoadWait  = 30 * time.Second // how long a load waits for room
)

// ModelSource is one model a Multi serves, loaded on its first request.
type ModelSource struct {
	// ID is the model's name in the API.
	ID string
	// Variants are further ids the loaded model's Config serves
	// (Config.Variants, e.g. "ID:adapter"), listed and routed to it.
	Variants []string
	// Estimate is the model's memory in bytes before it loads (the
	// weights' file size, say); the budget uses it until the model loads
	// and is measured.
	Estimate int64
	// Load loads the model: the Config of a Server for it (ModelID is set
	// to ID; APIKey, CORSOrigin, MaxBody and Log are the Multi's), the
	// bytes it holds (0: ModelBytes of the Config's models) and what frees
	// it.
	Load func(ctx context.Context) (cfg Config, bytes int64, close func() error, err error)
}

// MultiConfig configures a Multi.
type MultiConfig struct {
	Models []ModelSource
	// Budget is the memory the loaded models may hold, in bytes; 0 means
	// no limit.
	Budget int64
	// KeepAlive is how long a model stays loaded after its last request
	// when the request gives no keep_alive: 0 means DefaultKeepAlive, < 0
	// forever. NoKeepAlive unloads a model when its requests end.
	KeepAlive   time.Duration
	NoKeepAlive bool
	// LoadWait bounds how long a load waits for the models with requests
	// running to make room (503 with Retry-After beyond); 0 means
	// DefaultLoadWait.
	LoadWait   time.Duration
	APIKey     string
	CORSOrigin string
	MaxBody    int64
	Log        func(format string, args ...any)
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Multi serves several models over the APIs Server answers, routing each
// request by its "model" field (404 naming the served ids for another),
// loading a model on its first request within a memory budget and
// unloading the least recently used idle one to make room, and a model
// idle for its keep_alive (pool.go). Each model is a Server of its own:
// slots, prefix cache, grammars, adapters and template are per model.
// GET /v1/models, /api/tags and /api/ps list them all (/api/ps the loaded
// ones, with expires_at). Create it with NewMulti; Close unloads all.
type Multi struct {
	cfg      MultiConfig
	pool     *pool
	sources  map[string]*ModelSource
	alias    map[string]string // every served id (variants too) -> its source's id
	ids      []string          // served ids in listing order
	created  int64
	mux      *http.ServeMux
	closing  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	inFlight atomic.Int64
}

// modelRoutes are the routes whose requests name a model: Multi routes
// them to its Server.
var modelRoutes = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages", "/v1/messages/count_tokens",
	"/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/show"}

// NewMulti checks cfg and returns a server; no model loads before its
// first request.
func NewMulti(cfg MultiConfig) (*Multi, error) {
	if len(cfg.Models) == 0 {
		return nil, errors.New("serve: no models")
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.NoKeepAlive {
		cfg.KeepAlive = 0
	}
	if cfg.LoadWait <= 0 {
		cfg.LoadWait = DefaultLoadWait
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Multi{cfg: cfg, sources: map[string]*ModelSource{}, alias: map[string]string{}, created: cfg.Now().Unix(), stop: make(chan struct{})}
	m.pool = newPool(cfg.Budget, cfg.KeepAlive, cfg.LoadWait, cfg.Now, m.load)
	m.pool.log = cfg.Log
	for i := range cfg.Models {
		src := &cfg.Models[i]
		if src.ID == "" || src.Load == nil {
			return nil, fmt.Errorf("serve: model %d has no id or loader", i)
		}
		for _, id := range append([]string{src.ID}, src.Variants...) {
			if _, dup := m.alias[id]; dup {
				return nil, fmt.Errorf("serve: two models named %q", id)
			}
			m.alias[id] = src.ID
			m.ids = append(m.ids, id)
		}
		m.sources[src.ID] = src
		m.pool.add(src.ID, src.Estimate)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", m.auth(m.models, writeError))
	mux.HandleFunc("GET /v1/models/{id...}", m.auth(m.model, writeError))
	mux.HandleFunc("GET /api/tags", m.auth(m.ollamaTags, ollamaError))
	mux.HandleFunc("GET /api/ps", m.auth(m.ollamaPS, ollamaError))
	mux.HandleFunc("GET /api/version", m.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"version": OllamaVersion})
	}, ollamaError))
	mux.HandleFunc("GET /health", m.health)
	for _, route := range modelRoutes {
		mux.HandleFunc("POST "+route, m.dispatch)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		shapeFor(r.URL.Path)(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("unknown route %s %s", r.Method, r.URL.Path)})
	})
	m.mux = mux
	go m.sweeper()
	return m, nil
}

// sweeper unloads the models whose keep_alive has passed, checking every
// second, until Close.
func (m *Multi) sweeper() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.pool.sweep()
		}
	}
}

// Close unloads every model and stops the sweeper.
func (m *Multi) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	m.pool.closeAll()
	return nil
}

// ModelBytes is the memory a loaded model's Config holds as this server
// counts it against the budget: the weights once, and the KV caches of
// every slot of the model and its variants. A prefix cache's budget
// (pipeline.Options.PrefixCacheBytes) is the loader's to add.
func ModelBytes(cfg Config) int64 {
	w, _ := cfg.Model.DecodeBytes()
	n := w + int64(cfg.Model.Slots())*cfg.Model.KVCacheBytes()
	for _, v := range cfg.Variants {
		n += int64(v.Slots()) * v.KVCacheBytes()
	}
	return n
}

// load loads the model id as a Server.
func (m *Multi) load(ctx context.Context, id string) (*instance, int64, error) {
	src := m.sources[id]
	cfg, n, closeFn, err := src.Load(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("loading %q: %w", id, err)
	}
	cfg.ModelID, cfg.APIKey, cfg.CORSOrigin, cfg.MaxBody, cfg.Log = id, "", "", m.cfg.MaxBody, m.cfg.Log
	s, err := New(cfg)
	if err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, 0, fmt.Errorf("loading %q: %w", id, err)
	}
	if n <= 0 {
		n = ModelBytes(cfg)
	}
	if m.cfg.Log != nil {
		m.cfg.Log("loaded %q (%.1f MiB)", id, float64(n)/(1<<20))
	}
	return &instance{h: s, srv: s, close: closeFn}, n, nil
}

// ServeHTTP routes a request, answering CORS preflights first when CORS
// is on.
func (m *Multi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveWithCORS(w, r, m.cfg.CORSOrigin, m.mux)
}

// shapeFor is the error writer of a route's API.
func shapeFor(path string) func(http.ResponseWriter, *apiError) {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return ollamaError
	case strings.HasPrefix(path, "/v1/messages"):
		return anthropicError
	}
	return writeError
}

func (m *Multi) auth(h http.HandlerFunc, fail func(http.ResponseWriter, *apiError)) http.HandlerFunc {
	if m.cfg.APIKey == "" {
		return h
	}
	bearer, key := []byte("Bearer "+m.cfg.APIKey), []byte(m.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) != 1 &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), key) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			fail(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)"})
			return
		}
		h(w, r)
	}
}

// resolve is the source id serving name (on ollama's routes, "name:latest"
// is name).
func (m *Multi) resolve(name, path string) (string, bool) {
	names := []string{name}
	if strings.HasPrefix(path, "/api/") {
		names = append(names, strings.TrimSuffix(name, ":latest"))
	}
	for _, n := range names {
		if id, ok := m.alias[n]; ok {
			return id, true
		}
	}
	return "", false
}

// notFound is the error for a request naming a model not served here.
func (m *Multi) notFound(name string) *apiError {
	quoted := make([]string, len(m.ids))
	for i, id := range m.ids {
		quoted[i] = strconv.Quote(id)
	}
	msg := fmt.Sprintf("the model %q does not exist; this server serves %s", name, strings.Join(quoted, ", "))
	if name == "" {
		msg = "model is required; this server serves " + strings.Join(quoted, ", ")
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found", Message: msg}
}

// ParseKeepAlive reads a keep_alive as ollama takes it: a duration
// string ("5m", "1h30m", "0"), or a number of seconds; negative means
// forever. nil (absent or null) gives nil.
func ParseKeepAlive(raw json.RawMessage) (*time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var d time.Duration
	var s string
	var f float64
	switch {
	case json.Unmarshal(raw, &f) == nil:
		d = time.Duration(f * float64(time.Second))
	case json.Unmarshal(raw, &s) == nil:
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			n, nerr := strconv.ParseFloat(s, 64)
			if nerr != nil {
				return nil, fmt.Errorf("keep_alive %q: want a duration (5m, 0, -1) or seconds", s)
			}
			d = time.Duration(n * float64(time.Second))
		}
	default:
		return nil, fmt.Errorf("keep_alive %s: want a duration string or a number of seconds", raw)
	}
	if d < 0 {
		d = -1
	}
	return &d, nil
}

// dispatch routes a POST by its body's model to that model's Server,
// loading it first if need be.
func (m *Multi) dispatch(w http.ResponseWriter, r *http.Request) {
	fail := shapeFor(r.URL.Path)
	m.auth(func(w http.ResponseWriter, r *http.Request) {
		if m.closing.Load() {
			fail(w, &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 5, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.cfg.MaxBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			fail(w, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("the request body is larger than %d bytes", m.cfg.MaxBody)})
			return
		case err != nil:
			fail(w, badRequest("", "invalid_body", "reading the body: "+err.Error()))
			return
		}
		var head struct {
			Model     string          `json:"model"`
			Name      string          `json:"name"` // ollama's older /api/show field
			KeepAlive json.RawMessage `json:"keep_alive"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			fail(w, badRequest("", "invalid_json", "the body is not valid JSON: "+err.Error()))
			return
		}
		name := cmpOr(head.Model, head.Name)
		id, ok := m.resolve(name, r.URL.Path)
		if !ok {
			fail(w, m.notFound(name))
			return
		}
		keep, err := ParseKeepAlive(head.KeepAlive)
		if err != nil {
			fail(w, badRequest("keep_alive", "invalid_keep_alive", err.Error()))
			return
		}
		m.inFlight.Add(1)
		defer m.inFlight.Add(-1)
		inst, err := m.pool.acquire(r.Context(), id)
		if err != nil {
			switch {
			case r.Context().Err() != nil:
				// The client left while the model loaded or waited.
			case errors.Is(err, errNoRoom):
				fail(w, &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 1, Type: "server_error", Code: "model_busy", Message: err.Error()})
			case errors.Is(err, errTooLarge):
				fail(w, &apiError{Status: http.StatusInsufficientStorage, Type: "server_error", Code: "model_too_large", Message: err.Error()})
			default:
				fail(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "load_failed", Message: err.Error()})
			}
			return
		}
		defer m.pool.release(id, keep)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		inst.h.ServeHTTP(w, r)
	}, fail)(w, r)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (m *Multi) health(w http.ResponseWriter, r *http.Request) {
	if m.closing.Load() {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
		return
	}
	var loaded []string
	for _, l := range m.pool.loaded() {
		loaded = append(loaded, l.id)
	}
	writeJSON(w, map[string]any{"status": "ok", "models": m.ids, "loaded": loaded, "in_flight": m.inFlight.Load()})
}

func (m *Multi) modelObject(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: m.created, OwnedBy: "gpurun",
		Type: "model", DisplayName: id, CreatedAt: time.Unix(m.created, 0).UTC().Format(time.RFC3339)}
}

func (m *Multi) models(w http.ResponseWriter, r *http.Request) {
	var list []modelObject
	for _, id := range m.ids {
		list = append(list, m.modelObject(id))
	}
	writeJSON(w, map[string]any{"object": "list", "data": list,
		"has_more": false, "first_id": list[0].ID, "last_id": list[len(list)-1].ID})
}

func (m *Multi) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !slices.Contains(m.ids, id) {
		writeError(w, m.notFound(id))
		return
	}
	writeJSON(w, m.modelObject(id))
}

// ollamaEntry is a model as /api/tags and /api/ps list it (without what
// only a loaded model tells, for one that is not).
func (m *Multi) ollamaEntry(id string, size int64) map[string]any {
	sum := sha256.Sum256([]byte(id))
	return map[string]any{"name": id, "model": id, "size": size, "digest": hex.EncodeToString(sum[:]),
		"details": map[string]any{"parent_model": "", "format": "gguf", "family": "", "families": []string{},
			"parameter_size": "", "quantization_level": ""},
		"modified_at": time.Unix(m.created, 0).UTC()}
}

func (m *Multi) ollamaTags(w http.ResponseWriter, r *http.Request) {
	list := []map[string]any{}
	for _, id := range m.ids {
		list = append(list, m.ollamaEntry(id, m.sources[m.alias[id]].Estimate))
	}
	writeJSON(w, map[string]any{"models": list})
}

// ollamaPS lists the loaded models with the time keep_alive unloads them
// (a century ahead for one kept forever, as ollama shows it).
func (m *Multi) ollamaPS(w http.ResponseWriter, r *http.Request) {
	list := []map[string]any{}
	for _, l := range m.pool.loaded() {
		e := m.ollamaEntry(l.id, l.bytes)
		exp := l.expires
		if exp.IsZero() {
			exp = m.cfg.Now().AddDate(100, 0, 0)
		}
		e["expires_at"] = exp.UTC()
		e["size_vram"] = 0
		list = append(list, e)
	}
	writeJSON(w, map[string]any{"models": list})
}

// Serve serves on ln until ctx is done, then shuts down as Server.Serve
// does and unloads the models.
func (m *Multi) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	defer m.Close()
	return serveHTTP(ctx, ln, grace, m, &m.closing)
}

// serveHTTP serves h on ln until ctx is done, then stops accepting (closing
// set), lets running requests finish for up to grace, then cancels the
// ones still running and waits for their handlers.
func serveHTTP(ctx context.Context, ln net.Listener, grace time.Duration, h http.Handler, closing *atomic.Bool) error {
	genCtx, cancelGens := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelGens()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return genCtx },
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	closing.Store(true)
	shCtx, cancel := context.WithTimeout(context.Background(), grace)
	err := hs.Shutdown(shCtx)
	cancel()
	if err != nil {
		cancelGens()
		shCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = hs.Shutdown(shCtx)
		cancel()
		if err != nil {
			hs.Close()
		}
	}
	if e := <-done; !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}
