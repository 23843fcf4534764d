package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/pipeline/chat"
	"github.com/gpurun/gpurun/pipeline/serve"
)

// serve's model arguments: MODEL... and repeated -m, each PATH or
// ID=PATH, or a directory of models.

// modelList is serve's repeatable -m.
type modelList []string

func (l *modelList) String() string { return strings.Join(*l, ",") }
func (l *modelList) Type() string   { return "[ID=]MODEL" }
func (l *modelList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("want a model file or ID=FILE")
	}
	*l = append(*l, s)
	return nil
}

// servedModel is one model serve was given.
// servedModel is one model serve holds: its id and path, and whether the
// id was given (-m ID=PATH) rather than taken from the path.
type servedModel struct {
	id, path string
	named    bool
}

// modelFileExts are the files a directory of models serves.
var modelFileExts = []string{".gguf", ".tflite", ".task", ".litertlm"}

// servedModels reads serve's model arguments (the -m values, then the
// positional ones): "ID=PATH" names a model ID, a plain PATH is named by
// its file name without the extension, and a directory that is not
// itself a model (a Hugging Face directory has a config.json) stands
// for every model file inside it (and every Hugging Face directory). It
// says whether the arguments ask for several models (more than one, or a
// directory of models).
func servedModels(flagged, args []string) ([]servedModel, bool, error) {
	var out []servedModel
	multi := len(flagged)+len(args) > 1
	for _, a := range append(slices.Clone(flagged), args...) {
		id, path, named := strings.Cut(a, "=")
		if !named || id == "" || strings.ContainsAny(id, `/\`) {
			id, path, named = "", a, false
		}
		st, err := os.Stat(path)
		if err == nil && st.IsDir() && !isHFDir(path) {
			found, err := modelsIn(path)
			if err != nil {
				return nil, false, err
			}
			out = append(out, found...)
			multi = true
			continue
		}
		if id == "" {
			id = modelName(path)
		}
		out = append(out, servedModel{id, path, named})
	}
	if err := uniqueIDs(out); err != nil {
		return nil, false, err
	}
	return out, multi, nil
}

// uniqueIDs fails when two served models have one id.
func uniqueIDs(models []servedModel) error {
	seen := map[string]string{}
	for _, m := range models {
		if p, dup := seen[m.id]; dup {
			return fmt.Errorf("two models named %q (%s and %s): name one with -m ID=PATH", m.id, p, m.path)
		}
		seen[m.id] = m.path
	}
	return nil
}

// pullServed pulls the hub references among the served models
// (hf.co/ORG/REPO[:QUANT]); one not named by -m ID= takes its file's name.
func pullServed(cmd *cobra.Command, models []servedModel) error {
	for i, m := range models {
		p, err := resolveModel(cmd.Context(), cmd, m.path)
		if err != nil {
			return err
		}
		if p != m.path && !m.named {
			models[i].id = modelName(p)
		}
		models[i].path = p
	}
	return uniqueIDs(models)
}

// modelName is a model's default id: its file name without the extension.
func modelName(path string) string {
	return strings.TrimSuffix(filepath.Base(filepath.Clean(path)), filepath.Ext(path))
}

func isHFDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	return err == nil
}

// modelsIn lists a directory's models, sorted by id.
func modelsIn(dir string) ([]servedModel, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	var out []servedModel
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "."):
		case e.IsDir() && isHFDir(p):
			out = append(out, servedModel{e.Name(), p, false})
		case !e.IsDir() && slices.Contains(modelFileExts, strings.ToLower(filepath.Ext(e.Name()))):
			out = append(out, servedModel{modelName(p), p, false})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("models: no model files (%s) or Hugging Face directories in %s", strings.Join(modelFileExts, ", "), dir)
	}
	return out, nil
}

// sizeOf is a model's bytes on disk (a directory's files summed).
func sizeOf(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// keepAliveFlag is --keep-alive: a duration, 0, or -1 (forever).
type keepAliveFlag struct{ d time.Duration }

func (f *keepAliveFlag) String() string {
	if f.d < 0 {
		return "-1"
	}
	return f.d.String()
}
func (f *keepAliveFlag) Type() string { return "duration" }
func (f *keepAliveFlag) Set(s string) error {
	raw, _ := json.Marshal(strings.TrimSpace(s))
	d, err := serve.ParseKeepAlive(raw)
	if err != nil || d == nil {
		return errors.New("want a duration (5m, 1h), 0 (unload after each request) or -1 (never unload)")
	}
	f.d = *d
	return nil
}

// multiServe is what serving several models takes from serve's flags.
type multiServe struct {
	mf        *modelFlags
	tf        *templateFlags
	models    []servedModel
	addr      string
	parallel  int
	queue     int
	apiKey    string
	cors      string
	grace     time.Duration
	budgetMB  int
	keepAlive time.Duration
	reasoning serve.ReasoningFormat
	rbudget   int
}

// serveMulti serves several models, each loaded on its first request.
func serveMulti(cmd *cobra.Command, o multiServe) error {
	for _, name := range []string{"adapter", "name", "draft", "lookup", "web"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return fmt.Errorf("--%s serves one model; with several, give each its own server", name)
		}
	}
	for _, m := range o.models {
		if _, err := os.Stat(m.path); err != nil {
			return fmt.Errorf("model %s: %w", m.id, err)
		}
	}
	source, vars, err := o.tf.load()
	if err != nil {
		return err
	}
	if o.rbudget == 0 {
		if vars == nil {
			vars = map[string]any{}
		}
		if _, set := vars["enable_thinking"]; !set {
			vars["enable_thinking"] = false
		}
	}
	errOut := cmd.ErrOrStderr()
	prefix := int64(o.mf.prefixMB) << 20
	var sources []serve.ModelSource
	for _, sm := range o.models {
		sources = append(sources, serve.ModelSource{ID: sm.id, Estimate: sizeOf(sm.path) + prefix,
			Load: func(ctx context.Context) (serve.Config, int64, func() error, error) {
				start := time.Now()
				m, err := loadModel(func() (*gpurun.Model, error) {
					return gpurun.Open(ctx, sm.path, append(o.mf.options(cmd), gpurun.WithParallel(o.parallel))...)
				})
				if err != nil {
					return serve.Config{}, 0, nil, pathError("load", sm.path, err)
				}
				printLoaded(errOut, m.Pipeline(), m.Format(), time.Since(start))
				if !m.HasTokenizer() {
					err := noTokenizer(m)
					m.Close()
					return serve.Config{}, 0, nil, err
				}
				var tpl *chat.Template
				if tpl, _, err = o.tf.parse(m, source, vars); err != nil {
					m.Close()
					return serve.Config{}, 0, nil, err
				}
				cfg := serve.Config{Model: m.Pipeline(), Template: tpl, MaxQueue: cmp.Or(o.queue, -1),
					ReasoningFormat: o.reasoning, ReasoningBudget: max(o.rbudget, 0), NoThinking: o.rbudget == 0}
				n := serve.ModelBytes(cfg) + prefix
				return cfg, max(n, sizeOf(sm.path)), m.Close, nil
			}})
	}
	ka := o.keepAlive
	srv, err := serve.NewMulti(serve.MultiConfig{Models: sources, Budget: int64(o.budgetMB) << 20, KeepAlive: ka, NoKeepAlive: ka == 0,
		APIKey: o.apiKey, CORSOrigin: o.cors, Log: func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) }})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("--addr %s: %w", o.addr, err)
	}
	defer ln.Close()
	printServing(errOut, o, ln.Addr())
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = srv.Serve(ctx, ln, o.grace)
	fmt.Fprintln(errOut, "server stopped")
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: requests still running after --grace %s were cancelled", o.grace)
	}
	return err
}

func printServing(w io.Writer, o multiServe, addr net.Addr) {
	budget := "no memory budget"
	if o.budgetMB > 0 {
		budget = fmt.Sprintf("within %d MiB", o.budgetMB)
	}
	keep := "kept " + o.keepAlive.String() + " idle"
	switch {
	case o.keepAlive < 0:
		keep = "never unloaded"
	case o.keepAlive == 0:
		keep = "unloaded after each request"
	}
	ids := make([]string, len(o.models))
	for i, m := range o.models {
		ids[i] = fmt.Sprintf("%q", m.id)
	}
	fmt.Fprintf(w, "serving %d models on http://%s, each loaded on its first request (%s, %s, %d parallel): %s\n",
		len(o.models), addr, budget, keep, o.parallel, strings.Join(ids, ", "))
}
