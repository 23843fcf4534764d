package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestBenchImage: bench-image times the tiny gemma3 projector's encode of
// the vision set's image (one untimed encode, then --reps timed ones,
// each with its wall and CPU time) and refuses missing flags, a file that
// is not a projector and an image it cannot decode, with clear errors.
func TestBenchImage(t *testing.T) {
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	img := testmodels.Path(t, "vision", "image.png")
	out := mustRun(t, "", "bench-image", "--mmproj", mmproj, "--image", img, "--backend", "cpu", "--threads", "1", "--reps", "2", "--warmup", "1", "--json")
	var r imageBench
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench-image --json: %q: %v", out, err)
	}
	if r.Tokens != 16 || r.Backend != "cpu" || r.Device == "" || len(r.EncodeMs) != 2 || len(r.CPUMs) != 2 {
		t.Fatalf("report %+v: want 16 embeddings and 2 timed encodes on the cpu backend", r)
	}
	for i, ms := range r.EncodeMs {
		if !(ms > 0) {
			t.Errorf("encode %d: %v ms", i+1, ms)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench-image", "--image", img}, "--mmproj"},
		{[]string{"bench-image", "--mmproj", text, "--image", img}, "clip"},
		{[]string{"bench-image", "--mmproj", mmproj, "--image", text}, text},
		{[]string{"bench-image", "--mmproj", mmproj, "--image", img, "--reps", "0"}, "--reps"},
	} {
		if _, _, err := runCLI(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
