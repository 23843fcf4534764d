package serve

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is an error response in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status     int    `json:"-"`
	RetryAfter int    `json:"-"` // seconds, for 429 and 503
	Message    string `json:"message"`
	Type       string `json:"type"`
	Param      any    `json:"param"`
	Code       any    `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, code, msg string) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg, Code: code}
	if param != "" {
		e.Param = param
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeErrorBody(w, e, struct {
		Error *apiError `json:"error"`
	}{e})
}

// writeErrorBody answers e's status (and Retry-After) with body, e in
// one API's shape.
func writeErrorBody(w http.ResponseWriter, e *apiError, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(body)
}
