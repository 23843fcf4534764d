package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestTemplateVars: --chat-template-var values are JSON where they parse as
// JSON, text otherwise; a flag without KEY= or with a KEY that is not a
// template variable name is refused (by chat and serve before the model
// loads).
func TestTemplateVars(t *testing.T) {
	got, err := templateVars([]string{"enable_thinking=false", "n=3", "effort=low", `s="quoted"`, "list=[1, \"a\"]", "empty=", "two=1 2", "x_1=true", "x_1=null"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enable_thinking": false, "n": json.Number("3"), "effort": "low", "s": "quoted",
		"list": []any{json.Number("1"), "a"}, "empty": "", "two": "1 2", "x_1": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vars %#v, want %#v", got, want)
	}
	for _, bad := range []string{"novalue", "=x", "1a=x", "a-b=x", "a b=1"} {
		if _, err := templateVars([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
		for _, cmd := range []string{"chat", "serve"} {
			_, _, err := runCLI(t, "", cmd, testmodels.Path(t, "stories260K.bin"), "--chat-template-var", bad)
			if err == nil || !strings.Contains(err.Error(), "--chat-template-var") {
				t.Errorf("%s --chat-template-var %q: %v", cmd, bad, err)
			}
		}
	}
}
