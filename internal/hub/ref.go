// Package hub downloads GGUF model files from a Hugging Face-compatible
// hub into a cache laid out as huggingface_hub lays out its own
// (HF_HUB_CACHE), so that files either one pulled serve the other.
//
// A reference is hf.co/ORG/REPO[:QUANT]. The repository's listing
// (/api/models/ORG/REPO) names its files; the quant tag picks one GGUF (or
// the parts of a split one), which is fetched from
// /ORG/REPO/resolve/main/FILE into blobs/<etag>.incomplete, resumed with
// HTTP ranges after a cut, checked against its ETag (the sha256 of an LFS
// file, the git blob hash of a small one) and only then renamed to
// blobs/<etag> and linked from snapshots/<commit>/FILE. Nothing in the
// cache that looks complete is ever partial or unverified.
package hub

import (
	"errors"
	"fmt"
	"strings"
)

// Ref is a parsed hub reference.
type Ref struct {
	// Repo is "ORG/REPO".
	Repo string
	// Quant is the quant tag (Q4_K_M) or a file name in the repository;
	// "" picks the default (Q4_K_M, then Q8_0, then the first GGUF).
	Quant string
}

// String is the reference as ParseRef takes it.
func (r Ref) String() string {
	s := "hf.co/" + r.Repo
	if r.Quant != "" {
		s += ":" + r.Quant
	}
	return s
}

// refPrefixes are the prefixes that make a model argument a hub reference.
var refPrefixes = []string{"hf.co/", "huggingface.co/", "https://huggingface.co/", "https://hf.co/"}

// IsRef reports whether s is written as a hub reference (hf.co/...), valid
// or not: ParseRef says what is wrong with one that is not valid.
func IsRef(s string) bool {
	for _, p := range refPrefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// ErrBadRef is wrapped by every error ParseRef returns.
var ErrBadRef = errors.New("not a hub reference")

// ParseRef parses hf.co/ORG/REPO[:QUANT] (also huggingface.co/...).
func ParseRef(s string) (Ref, error) {
	rest := ""
	for _, p := range refPrefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			rest = s[len(p):]
			break
		}
	}
	if rest == "" {
		return Ref{}, fmt.Errorf("%q: %w (want hf.co/ORG/REPO[:QUANT])", s, ErrBadRef)
	}
	var r Ref
	repo, quant, hasQuant := strings.Cut(rest, ":")
	if hasQuant {
		if quant == "" {
			return Ref{}, fmt.Errorf("%q: %w: an empty quant after ':'", s, ErrBadRef)
		}
		if err := checkQuant(quant); err != nil {
			return Ref{}, fmt.Errorf("%q: %w: quant %q: %v", s, ErrBadRef, quant, err)
		}
		r.Quant = quant
	}
	parts := strings.Split(repo, "/")
	if len(parts) != 2 {
		return Ref{}, fmt.Errorf("%q: %w: want ORG/REPO after hf.co/, got %q", s, ErrBadRef, repo)
	}
	for _, p := range parts {
		if err := checkName(p); err != nil {
			return Ref{}, fmt.Errorf("%q: %w: %q: %v", s, ErrBadRef, p, err)
		}
	}
	r.Repo = repo
	return r, nil
}

// checkName accepts a Hugging Face organization or repository name: ASCII
// letters, digits, '-', '_' and '.', not starting or ending with '-' or
// '.', no "..", at most 96 characters.
func checkName(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case len(p) > 96:
		return errors.New("longer than 96 characters")
	case strings.Contains(p, ".."):
		return errors.New(`contains ".."`)
	case strings.IndexByte("-.", p[0]) >= 0 || strings.IndexByte("-.", p[len(p)-1]) >= 0:
		return errors.New("starts or ends with '-' or '.'")
	}
	for _, c := range []byte(p) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("character %q not allowed (letters, digits, '-', '_', '.')", c)
		}
	}
	return nil
}

// checkQuant accepts a quant tag or a file path in the repository.
func checkQuant(q string) error {
	if len(q) > 255 {
		return errors.New("longer than 255 characters")
	}
	for _, c := range []byte(q) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return fmt.Errorf("character %q not allowed", c)
		}
	}
	return checkPath(q)
}
