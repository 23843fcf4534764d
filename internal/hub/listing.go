package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Listing is what a repository listing says: its commit and file paths.
type Listing struct {
	// Commit is the listing's "sha" ("" when it gives none).
	Commit string
	// Files are the repository's file paths, in the listing's order.
	Files []string
}

// ParseListing reads a listing: the JSON object of /api/models/ORG/REPO
// ("sha", "siblings": [{"rfilename"}]) or the JSON array of
// /api/models/ORG/REPO/tree/main ([{"type": "file", "path"}]). A path that
// could leave the snapshot directory (absolute, "..", a backslash) is an
// error, so that no listing can make the cache write outside itself.
func ParseListing(data []byte) (Listing, error) {
	data = []byte(strings.TrimSpace(string(data)))
	if len(data) == 0 {
		return Listing{}, errors.New("listing: empty")
	}
	var l Listing
	var names []string
	switch data[0] {
	case '{':
		var obj struct {
			SHA      string `json:"sha"`
			Siblings *[]struct {
				RFilename string `json:"rfilename"`
			} `json:"siblings"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return Listing{}, fmt.Errorf("listing: %w", err)
		}
		if obj.Siblings == nil {
			return Listing{}, errors.New("listing: no \"siblings\" (the repository's files)")
		}
		l.Commit = obj.SHA
		for _, s := range *obj.Siblings {
			names = append(names, s.RFilename)
		}
	case '[':
		var arr []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		}
		if err := json.Unmarshal(data, &arr); err != nil {
			return Listing{}, fmt.Errorf("listing: %w", err)
		}
		for _, e := range arr {
			if e.Type == "file" || e.Type == "" {
				names = append(names, e.Path)
			}
		}
	default:
		return Listing{}, fmt.Errorf("listing: not a JSON object or array (starts with %q)", data[0])
	}
	if l.Commit != "" {
		if err := checkCommit(l.Commit); err != nil {
			return Listing{}, fmt.Errorf("listing: sha %q: %w", l.Commit, err)
		}
	}
	for _, n := range names {
		if err := checkPath(n); err != nil {
			return Listing{}, fmt.Errorf("listing: file %q: %w", n, err)
		}
		l.Files = append(l.Files, n)
	}
	return l, nil
}

// checkPath accepts a relative slash-separated path with no empty, "." or
// ".." element and no backslash or NUL.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if len(p) > 1024 {
		return errors.New("path longer than 1024 bytes")
	}
	if strings.ContainsAny(p, "\\\x00:") {
		return errors.New("path contains a backslash, ':' or NUL")
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return errors.New("path has an empty, '.' or '..' element (or is absolute)")
		}
	}
	return nil
}

// checkCommit accepts a commit id or ref as a single path element.
func checkCommit(c string) error {
	if len(c) > 128 {
		return errors.New("longer than 128 characters")
	}
	for _, b := range []byte(c) {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return fmt.Errorf("character %q not allowed", b)
		}
	}
	if c == "" {
		return errors.New("empty")
	}
	return nil
}

// splitRE matches a split GGUF's part: NAME-00001-of-00003.gguf.
var splitRE = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// quantRE finds a quant tag in a file's path: a tag between separators
// ('-', '.', '/', start, '_' before it only) and '-', '.' or the end.
var quantRE = regexp.MustCompile(`(?i)(?:^|[-._/])((?:I?Q[1-8](?:_[A-Z0-9]+)*)|(?:TQ[12]_0)|BF16|F16|F32|MXFP4(?:_MOE)?)(?:[-.]|$)`)

// model is one GGUF model in a listing: one file, or the parts of a split one.
type model struct {
	name  string   // the file, or the first part
	parts []string // every file, in order
}

// quant is the model's quant tag as the file names it ("" when none).
func (m model) quant() string {
	stem := strings.TrimSuffix(m.name, ".gguf")
	if s := splitRE.FindStringSubmatch(m.name); s != nil {
		stem = s[1]
	}
	if i := strings.LastIndexByte(stem, '/'); i >= 0 && quantRE.FindString(stem[i:]) != "" {
		stem = stem[i:]
	}
	all := quantRE.FindAllStringSubmatch(stem, -1)
	if len(all) == 0 {
		return ""
	}
	return strings.ToUpper(all[len(all)-1][1])
}

// models groups a listing's GGUF files into models: a split GGUF's parts
// make one model when every part is listed; vision projectors (mmproj) are
// left out.
func models(files []string) []model {
	var out []model
	groups := map[string][]string{}
	for _, f := range files {
		if !strings.HasSuffix(strings.ToLower(f), ".gguf") || strings.Contains(strings.ToLower(f), "mmproj") {
			continue
		}
		s := splitRE.FindStringSubmatch(f)
		if s == nil {
			out = append(out, model{name: f, parts: []string{f}})
			continue
		}
		key := s[1] + "\x00" + s[3]
		if groups[key] == nil {
			out = append(out, model{name: key})
		}
		groups[key] = append(groups[key], f)
	}
	var kept []model
	for _, m := range out {
		parts, split := groups[m.name]
		if !split {
			kept = append(kept, m)
			continue
		}
		slices.Sort(parts)
		s := splitRE.FindStringSubmatch(parts[0])
		n := 0
		fmt.Sscan(strings.TrimLeft(s[3], "0"), &n)
		complete := len(parts) == n
		for i, p := range parts {
			if complete && p != fmt.Sprintf("%s-%05d-of-%s.gguf", s[1], i+1, s[3]) {
				complete = false
			}
		}
		if complete {
			kept = append(kept, model{name: parts[0], parts: parts})
		}
	}
	return kept
}

// defaultQuants are tried in order when a reference names no quant.
var defaultQuants = []string{"Q4_K_M", "Q8_0"}

// ErrNoMatch is wrapped by Choose's errors when no file, or more than one,
// fits the reference.
var ErrNoMatch = errors.New("no single GGUF file matches")

// Choose picks the files of the model quant names among a listing's files:
// the model whose quant tag equals quant (case-insensitively), or whose
// file name (or its last element) is quant; with quant "", the first
// Q4_K_M, else the first Q8_0, else the first GGUF listed. The result is one file, or every part
// of a split GGUF in order. None or several matching is an error listing
// the quants there are.
func Choose(files []string, quant string) ([]string, error) {
	ms := models(files)
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: the repository has no GGUF model (a .gguf file, or every part of a split one; %d files listed)", ErrNoMatch, len(files))
	}
	if quant == "" {
		for _, q := range defaultQuants {
			if got := matching(ms, q); len(got) > 0 {
				return got[0].parts, nil
			}
		}
		return ms[0].parts, nil
	}
	got := matching(ms, quant)
	switch len(got) {
	case 1:
		return got[0].parts, nil
	case 0:
		return nil, fmt.Errorf("%w quant %q; the repository has: %s", ErrNoMatch, quant, available(ms))
	}
	var names []string
	for _, m := range got {
		names = append(names, m.name)
	}
	return nil, fmt.Errorf("%w quant %q: it matches %d files (%s); give one's file name as the quant", ErrNoMatch, quant, len(got), strings.Join(names, ", "))
}

// matching returns the models quant names: by file name first, else by tag.
func matching(ms []model, quant string) []model {
	var byName, byTag []model
	for _, m := range ms {
		base := m.name[strings.LastIndexByte(m.name, '/')+1:]
		if strings.EqualFold(m.name, quant) || strings.EqualFold(base, quant) {
			byName = append(byName, m)
		} else if strings.EqualFold(m.quant(), quant) {
			byTag = append(byTag, m)
		}
	}
	if len(byName) > 0 {
		return byName
	}
	return byTag
}

// available lists the models' quant tags (or file names, for a model
// without one), each once.
func available(ms []model) string {
	var out []string
	for _, m := range ms {
		q := m.quant()
		if q == "" {
			q = m.name
		}
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return strings.Join(out, ", ")
}
