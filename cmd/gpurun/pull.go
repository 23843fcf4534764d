package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpurun/gpurun/internal/hub"
)

func newPull() *cobra.Command {
	var offline, quiet bool
	cmd := &cobra.Command{
		Use:   "pull hf.co/ORG/REPO[:QUANT]",
		Short: "Download a GGUF model from Hugging Face (or a compatible hub) into the Hugging Face cache",
		Long: `Pull downloads a GGUF model from a Hugging Face-compatible hub and prints
the path of its file on stdout (the first part's, for a split GGUF).

QUANT picks the file by the quant tag in its name, case-insensitively
(Q4_K_M, q8_0, IQ4_XS, BF16), or names the file itself (a path in the
repository); without it, Q4_K_M, then Q8_0, then the first GGUF listed.
None or several matching is an error listing the quants the repository
has. A split GGUF (NAME-00001-of-0000N.gguf) is pulled whole, every part.

The files go into the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub,
else ~/.cache/huggingface/hub) in huggingface_hub's layout:
models--ORG--REPO/blobs/<etag>, snapshots/<commit>/FILE linked to the blob,
refs/main. Files pulled by huggingface_hub are used as they are, and the
other way round. A download is written to blobs/<etag>.incomplete and
renamed only once its sha256 (the hub's ETag) matches, so a cut or failed
download never leaves a file that looks complete; an interrupted one
(Ctrl-C, a lost connection, a full disk) resumes where it stopped on the
next pull; one whose content is wrong is removed. Failed requests (500s,
lost connections) are retried with backoff.

The hub is $HF_ENDPOINT (default https://huggingface.co); the token for
gated and private repositories is $HF_TOKEN, else the file $HF_HOME/token
(as huggingface-cli login writes it), sent as a Bearer header. --offline
(or HF_HUB_OFFLINE=1) uses only the cache; when the hub cannot be reached,
what the cache holds is used, with a note on stderr.

run, chat, serve and bench take the same reference wherever they take a
model, pulling it first: gpurun run hf.co/ORG/REPO:Q4_K_M -p "Hello".`,
		Args: nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := hub.ParseRef(args[0])
			if err != nil {
				return err
			}
			c := newHubClient(cmd, quiet)
			if offline {
				c.Offline = true
			}
			r, err := c.Pull(cmd.Context(), ref)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), r.Files[0])
			return err
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "use only what the cache holds, without the network (also HF_HUB_OFFLINE=1)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// newHubClient is a hub client configured from the environment, reporting
// on cmd's stderr: a progress bar on a terminal, plain lines otherwise.
func newHubClient(cmd *cobra.Command, quiet bool) *hub.Client {
	c := hub.New(os.Getenv)
	w := cmd.ErrOrStderr()
	if quiet {
		return c
	}
	c.Log = func(s string) { fmt.Fprintln(w, "pull: "+s) }
	c.Progress = pullProgress(w)
	return c
}

// pullProgress shows downloads: on a terminal a bar with bytes, rate and
// time left; otherwise a line at the start, every 10% and at the end.
func pullProgress(w io.Writer) func(hub.Progress) {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	var bar *progressbar.ProgressBar
	var file string
	var start time.Time
	var startDone int64
	lastTenth := int64(-1)
	return func(p hub.Progress) {
		if p.File != file {
			if bar != nil {
				_ = bar.Finish()
			}
			file, bar, lastTenth, start, startDone = p.File, nil, -1, time.Now(), p.Done
			if tty {
				bar = progressbar.NewOptions64(p.Total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("pulling "+p.File),
					progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionSetPredictTime(true), progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }))
			}
		}
		if bar != nil {
			_ = bar.Set64(p.Done)
			return
		}
		tenth := int64(0)
		if p.Total > 0 {
			tenth = p.Done * 10 / p.Total
		}
		if tenth == lastTenth {
			return
		}
		lastTenth = tenth
		line := fmt.Sprintf("pull: %s: %s", p.File, mib(p.Done))
		if p.Total >= 0 {
			line += fmt.Sprintf(" of %s (%d%%)", mib(p.Total), tenth*10)
		}
		if s := time.Since(start).Seconds(); s > 0.5 && p.Done > startDone {
			line += fmt.Sprintf(", %s/s", mib(int64(float64(p.Done-startDone)/s)))
		}
		fmt.Fprintln(w, line)
	}
}

// mib writes a byte count in KiB, MiB or GiB.
func mib(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// resolveModel returns path, or, for a hub reference (hf.co/ORG/REPO[:QUANT])
// that is not a local path, the file it pulls (the first part of a split
// GGUF).
func resolveModel(ctx context.Context, cmd *cobra.Command, path string) (string, error) {
	if !hub.IsRef(path) {
		return path, nil
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil // a local directory that happens to be named hf.co/...
	}
	ref, err := hub.ParseRef(path)
	if err != nil {
		return "", err
	}
	r, err := newHubClient(cmd, false).Pull(ctx, ref)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return "", err
		}
		return "", fmt.Errorf("pulling the model: %w", err)
	}
	if len(r.Files) > 1 {
		return "", fmt.Errorf("%s is a GGUF split in %d parts (pulled into %s), which gpurun does not load yet: "+
			"merge them into one file (llama-gguf-split --merge FIRST-PART OUT.gguf) and give that", ref, len(r.Files), filepath.Dir(r.Files[0]))
	}
	return r.Files[0], nil
}

// resolveBenchModels pulls bench's hub references, replacing each with its file.
func resolveBenchModels(cmd *cobra.Command, rf *benchModelFlags) error {
	models := splitList(rf.model)
	for i, m := range models {
		p, err := resolveModel(cmd.Context(), cmd, m)
		if err != nil {
			return err
		}
		models[i] = p
	}
	rf.model = strings.Join(models, ",")
	return nil
}
