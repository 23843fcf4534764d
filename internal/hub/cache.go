package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Env is the environment hub reads its settings from (os.Getenv in use).
type Env func(string) string

// DefaultEndpoint is the hub's address when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// hfHome is $HF_HOME, or ~/.cache/huggingface ($XDG_CACHE_HOME/huggingface).
func hfHome(env Env) string {
	if h := env("HF_HOME"); h != "" {
		return h
	}
	if x := env("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "huggingface")
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// CacheDir is huggingface_hub's cache directory: $HF_HUB_CACHE, else
// $HF_HOME/hub, else ~/.cache/huggingface/hub.
func CacheDir(env Env) string {
	if d := env("HF_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(hfHome(env), "hub")
}

// Token is the access token: $HF_TOKEN, else the file $HF_TOKEN_PATH, else
// $HF_HOME/token ("" when none).
func Token(env Env) string {
	if t := strings.TrimSpace(env("HF_TOKEN")); t != "" {
		return t
	}
	path := env("HF_TOKEN_PATH")
	if path == "" {
		path = filepath.Join(hfHome(env), "token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Offline reports whether HF_HUB_OFFLINE asks for no network.
func Offline(env Env) bool {
	switch strings.ToLower(strings.TrimSpace(env("HF_HUB_OFFLINE"))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// repoDir is the repository's folder in the cache: models--ORG--REPO.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// ErrNotCached is wrapped by the error of an offline pull of a reference
// the cache does not hold.
var ErrNotCached = errors.New("not in the cache")

// cachedFiles lists the files of the snapshot refs/main names, for an
// offline pull: the commit and the file paths (relative, slash-separated).
func cachedFiles(cache, repo string) (string, []string, error) {
	dir := repoDir(cache, repo)
	b, err := os.ReadFile(filepath.Join(dir, "refs", "main"))
	if err != nil {
		return "", nil, fmt.Errorf("%w (%s has no refs/main: pull it once online)", ErrNotCached, dir)
	}
	commit := strings.TrimSpace(string(b))
	if err := checkCommit(commit); err != nil {
		return "", nil, fmt.Errorf("%s: refs/main %q: %w", dir, commit, err)
	}
	snap := filepath.Join(dir, "snapshots", commit)
	var files []string
	err = filepath.WalkDir(snap, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil // a dangling link: its blob is gone
		}
		rel, err := filepath.Rel(snap, path)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("%w: snapshot %s: %w", ErrNotCached, snap, err)
	}
	return commit, files, nil
}

// link makes snapshots/<commit>/file point at blobs/<etag>: a relative
// symbolic link as huggingface_hub makes, or a copy where links cannot be
// made (Windows without the privilege).
func link(dir, commit, file, etag string) (string, error) {
	dst := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(file))
	blob := filepath.Join(dir, "blobs", etag)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), blob)
	if err != nil {
		return "", err
	}
	if cur, err := os.Readlink(dst); err == nil && cur == rel {
		return dst, nil
	}
	if st, err := os.Lstat(dst); err == nil && st.Mode().IsRegular() {
		if bst, err := os.Stat(blob); err == nil && bst.Size() == st.Size() {
			return dst, nil // a copy made where links cannot be
		}
	}
	_ = os.Remove(dst)
	if err := os.Symlink(rel, dst); err == nil {
		return dst, nil
	}
	// No symbolic links: copy through a temporary name, so that dst is
	// whole when it exists.
	tmp := dst + ".incomplete"
	if err := copyFile(blob, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeRef records the commit main resolved to in refs/main.
func writeRef(dir, commit string) error {
	if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "refs", "main.incomplete")
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "refs", "main"))
}
