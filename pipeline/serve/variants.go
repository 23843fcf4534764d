package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/gpurun/gpurun/pipeline"
)

// routeKey carries a request's model in its context.
type routeKey struct{}

type route struct {
	m  *pipeline.Model
	id string
}

// route picks the model a request body names: a variant, or the main
// model otherwise. It returns the model's id and the name the body gives
// ("" when it gives none or is not JSON, which decoding then reports): a
// name other than the id is a model this server does not serve. The
// choice rides in r's context.
func (s *Server) route(r *http.Request, body []byte) (*http.Request, *pipeline.Model, string, string) {
	rt := route{m: s.cfg.Model, id: s.cfg.ModelID}
	var head struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &head) == nil {
		if m, ok := s.cfg.Variants[head.Model]; ok {
			rt = route{m: m, id: head.Model}
		}
	}
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)), rt.m, rt.id, head.Model
}

// routed is the model route chose for r.
func routed(r *http.Request, s *Server) (*pipeline.Model, string) {
	if rt, ok := r.Context().Value(routeKey{}).(route); ok {
		return rt.m, rt.id
	}
	return s.cfg.Model, s.cfg.ModelID
}

// ids are the served model ids: the main one, then the variants sorted.
func (s *Server) ids() []string {
	var vs []string
	for id := range s.cfg.Variants {
		vs = append(vs, id)
	}
	slices.Sort(vs)
	return append([]string{s.cfg.ModelID}, vs...)
}

// slots is how many requests run at once over all models.
func (s *Server) slots() int {
	n := s.cfg.Model.Slots()
	for _, m := range s.cfg.Variants {
		n += m.Slots()
	}
	return n
}
