package checkpoint

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestParseMatchesLoad: a checkpoint parsed from memory is the one Load
// reads from the file, tokenizer included.
func TestParseMatchesLoad(t *testing.T) {
	for _, tc := range []struct{ model, tok string }{
		{testmodels.Path(t, "stories260K.bin"), testmodels.Path(t, "tok512.bin")},
		{testmodels.Path(t, "stories260K.bin"), testmodels.Path(t, "tok512.model")},
		{testmodels.Path(t, "arch", "gemma.gguf"), ""},
	} {
		want, err := Load(tc.model, Options{Tokenizer: tc.tok})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		var tok []byte
		if tc.tok != "" {
			if tok, err = os.ReadFile(tc.tok); err != nil {
				t.Fatal(err)
			}
		}
		got, err := Parse(data, tok)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if !reflect.DeepEqual(got.Config, want.Config) || !reflect.DeepEqual(got.Vocab, want.Vocab) || string(got.Tokenizer) != string(want.Tokenizer) || len(got.Tensors) != len(want.Tensors) {
			t.Fatalf("%s: Parse and Load differ", tc.model)
		}
		for i := range got.Tensors {
			g, w := got.Tensors[i], want.Tensors[i]
			if g.Name != w.Name || !reflect.DeepEqual(g.Shape, w.Shape) || g.DType != w.DType || string(g.Data) != string(w.Data) {
				t.Fatalf("%s: tensor %d (%s) differs", tc.model, i, g.Name)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	stories, err := os.ReadFile(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		data, tok []byte
		want      error
	}{
		{"empty", nil, nil, ErrUnknownFormat},
		{"text", []byte("hello, this is not a model file at all"), nil, ErrUnknownFormat},
		{"bad tokenizer", stories, []byte("\x01\x02\x03"), nil},
		{"truncated gguf", []byte("GGUF\x03\x00"), nil, nil},
	} {
		_, err := Parse(tc.data, tc.tok)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
