package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// newBar returns a progress bar on stderr, or a silent one when stderr is
// not a terminal (CI logs) or quiet is set.
func newBar(total int64, desc string, quiet bool) *progressbar.ProgressBar {
	var w io.Writer = os.Stderr
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		w = io.Discard
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }),
	)
}
