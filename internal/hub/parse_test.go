package hub

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Ref
		wantErr string
	}{
		{in: "hf.co/ggml-org/gemma-3-1b-it-GGUF", want: Ref{Repo: "ggml-org/gemma-3-1b-it-GGUF"}},
		{in: "hf.co/unsloth/Qwen3-0.6B-GGUF:Q4_K_M", want: Ref{Repo: "unsloth/Qwen3-0.6B-GGUF", Quant: "Q4_K_M"}},
		{in: "HF.CO/a/b:q8_0", want: Ref{Repo: "a/b", Quant: "q8_0"}},
		{in: "huggingface.co/a/b", want: Ref{Repo: "a/b"}},
		{in: "https://huggingface.co/a/b:sub/x-Q2_K.gguf", want: Ref{Repo: "a/b", Quant: "sub/x-Q2_K.gguf"}},
		{in: "hf.co/a", wantErr: "want ORG/REPO"},
		{in: "hf.co/a/b/c", wantErr: "want ORG/REPO"},
		{in: "hf.co/a/b:", wantErr: "empty quant"},
		{in: "hf.co/../b", wantErr: `".."`},
		{in: "hf.co/a/.b", wantErr: "starts or ends"},
		{in: "hf.co/a b/c", wantErr: "not allowed"},
		{in: "hf.co/a/b:../../etc/passwd", wantErr: "'..'"},
		{in: "hf.co/a/b:x:y", wantErr: "not allowed"},
		{in: "hf.co//b", wantErr: "empty"},
		{in: "model.gguf", wantErr: "not a hub reference"},
		{in: "hf.co/", wantErr: "not a hub reference"},
	} {
		got, err := ParseRef(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrBadRef) {
				t.Errorf("ParseRef(%q) = %+v, %v; want an error with %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if !IsRef(c.in) {
			t.Errorf("IsRef(%q) = false", c.in)
		}
		if back, err := ParseRef(got.String()); err != nil || back != got {
			t.Errorf("ParseRef(%q.String()) = %+v, %v", c.in, back, err)
		}
	}
}

func TestParseListing(t *testing.T) {
	for _, c := range []struct {
		name, in string
		commit   string
		files    []string
		wantErr  string
	}{
		{name: "siblings", in: `{"id":"a/b","sha":"abc123","siblings":[{"rfilename":"README.md"},{"rfilename":"m-Q4_K_M.gguf"}]}`,
			commit: "abc123", files: []string{"README.md", "m-Q4_K_M.gguf"}},
		{name: "tree", in: `[{"type":"directory","path":"sub"},{"type":"file","path":"sub/m-Q8_0.gguf","size":3,"lfs":{"oid":"x"}}]`,
			files: []string{"sub/m-Q8_0.gguf"}},
		{name: "empty siblings", in: `{"siblings":[]}`},
		{name: "no siblings", in: `{"id":"a/b"}`, wantErr: `no "siblings"`},
		{name: "escape", in: `{"siblings":[{"rfilename":"../../x.gguf"}]}`, wantErr: "'..'"},
		{name: "absolute", in: `[{"type":"file","path":"/etc/x.gguf"}]`, wantErr: "absolute"},
		{name: "backslash", in: `{"siblings":[{"rfilename":"a\\b.gguf"}]}`, wantErr: "backslash"},
		{name: "bad sha", in: `{"sha":"../x","siblings":[]}`, wantErr: "not allowed"},
		{name: "not json", in: `<html>`, wantErr: "not a JSON"},
		{name: "truncated", in: `{"siblings":[`, wantErr: "listing"},
		{name: "empty", in: ``, wantErr: "empty"},
	} {
		l, err := ParseListing([]byte(c.in))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: got %+v, %v; want an error with %q", c.name, l, err, c.wantErr)
			}
			continue
		}
		if err != nil || l.Commit != c.commit || !slices.Equal(l.Files, c.files) {
			t.Errorf("%s: got %+v, %v; want commit %q files %v", c.name, l, err, c.commit, c.files)
		}
	}
}

func TestChoose(t *testing.T) {
	repo := []string{".gitattributes", "README.md", "Model-Q2_K.gguf", "Model-Q4_K_M.gguf", "Model-Q4_K_S.gguf",
		"Model-Q8_0.gguf", "Model-IQ4_XS.gguf", "Model-F16.gguf", "mmproj-Model-F16.gguf",
		"BF16/Model-BF16-00001-of-00002.gguf", "BF16/Model-BF16-00002-of-00002.gguf"}
	for _, c := range []struct {
		name    string
		files   []string
		quant   string
		want    []string
		wantErr string
	}{
		{name: "default Q4_K_M", files: repo, want: []string{"Model-Q4_K_M.gguf"}},
		{name: "tag", files: repo, quant: "Q8_0", want: []string{"Model-Q8_0.gguf"}},
		{name: "case-insensitive", files: repo, quant: "q4_k_s", want: []string{"Model-Q4_K_S.gguf"}},
		{name: "Q4_K is not Q4_K_M", files: repo, quant: "Q4_K", wantErr: "Q2_K, Q4_K_M, Q4_K_S, Q8_0, IQ4_XS, F16, BF16"},
		{name: "i-quant", files: repo, quant: "iq4_xs", want: []string{"Model-IQ4_XS.gguf"}},
		{name: "F16 is not the projector", files: repo, quant: "F16", want: []string{"Model-F16.gguf"}},
		{name: "split", files: repo, quant: "BF16", want: []string{"BF16/Model-BF16-00001-of-00002.gguf", "BF16/Model-BF16-00002-of-00002.gguf"}},
		{name: "file name", files: repo, quant: "model-q2_k.gguf", want: []string{"Model-Q2_K.gguf"}},
		{name: "default Q8_0", files: []string{"a.Q5_K_M.gguf", "a.Q8_0.gguf"}, want: []string{"a.Q8_0.gguf"}},
		{name: "default first", files: []string{"x.txt", "a.Q5_K_M.gguf", "a.Q6_K.gguf"}, want: []string{"a.Q5_K_M.gguf"}},
		{name: "split listed out of order", files: []string{"m-Q4_0-00002-of-00002.gguf", "m-Q4_0-00001-of-00002.gguf"},
			want: []string{"m-Q4_0-00001-of-00002.gguf", "m-Q4_0-00002-of-00002.gguf"}},
		{name: "split missing a part", files: []string{"m-Q4_0-00001-of-00003.gguf", "m-Q4_0-00003-of-00003.gguf"}, wantErr: "no GGUF model"},
		{name: "ambiguous", files: []string{"a-Q4_K_M.gguf", "b-Q4_K_M.gguf"}, quant: "Q4_K_M", wantErr: "matches 2 files (a-Q4_K_M.gguf, b-Q4_K_M.gguf)"},
		{name: "ambiguous default takes the first", files: []string{"a-Q2_K.gguf", "b-Q4_K_M.gguf", "c-Q4_K_M.gguf"}, want: []string{"b-Q4_K_M.gguf"}},
		{name: "untagged listed by name", files: []string{"model.gguf"}, quant: "Q4_0", wantErr: "has: model.gguf"},
		{name: "no gguf", files: []string{"model.safetensors", "mmproj-F16.gguf"}, wantErr: "no GGUF model (a .gguf file, or every part of a split one; 2 files listed)"},
		{name: "no files", wantErr: "no GGUF model"},
	} {
		got, err := Choose(c.files, c.quant)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrNoMatch) {
				t.Errorf("%s: Choose = %v, %v; want an error with %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: Choose = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// FuzzParseRef: any string parses or is refused with ErrBadRef, never
// panics, and what parses prints back to itself and names no path that
// leaves the cache.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"hf.co/a/b", "hf.co/a/b:Q4_K_M", "huggingface.co/x/y:sub/f.gguf", "hf.co/a/../b", "hf.co/a/b:..", "hf.co/a/b:c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrBadRef) {
				t.Fatalf("ParseRef(%q): %v does not wrap ErrBadRef", s, err)
			}
			return
		}
		back, err := ParseRef(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRef(%q) = %+v; again: %+v, %v", s, r, back, err)
		}
		if strings.Contains(r.Repo, "..") || strings.Contains(r.Quant, "..") || strings.ContainsAny(r.Repo+r.Quant, "\\\x00") {
			t.Fatalf("ParseRef(%q) = %+v: a path element that leaves the cache", s, r)
		}
	})
}

// FuzzParseListing: any bytes parse or are refused, never panic; every
// file parsed is a safe relative path, and Choose on them answers or
// errors with ErrNoMatch.
func FuzzParseListing(f *testing.F) {
	for _, s := range []string{
		`{"sha":"abc","siblings":[{"rfilename":"m-Q4_K_M.gguf"},{"rfilename":"m-Q8_0.gguf"}]}`,
		`[{"type":"file","path":"a/m-BF16-00001-of-00002.gguf"},{"type":"file","path":"a/m-BF16-00002-of-00002.gguf"}]`,
		`{"siblings":[{"rfilename":"../x.gguf"}]}`,
		`[]`, `{}`, `null`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "Q8_0")
	}
	f.Fuzz(func(t *testing.T, data []byte, quant string) {
		l, err := ParseListing(data)
		if err != nil {
			return
		}
		for _, p := range l.Files {
			if checkPath(p) != nil {
				t.Fatalf("unsafe path %q accepted", p)
			}
		}
		got, err := Choose(l.Files, quant)
		if err != nil {
			if !errors.Is(err, ErrNoMatch) {
				t.Fatalf("Choose: %v does not wrap ErrNoMatch", err)
			}
			return
		}
		if len(got) == 0 {
			t.Fatal("Choose returned no file and no error")
		}
		for _, g := range got {
			if !slices.Contains(l.Files, g) {
				t.Fatalf("Choose returned %q, not in the listing", g)
			}
		}
	})
}
