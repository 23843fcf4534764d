package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gpurun/gpurun"
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

// stageSpinner returns a gpurun.WithProgress callback that shows, on a
// terminal, a spinner with the elapsed time once a stage of loading has
// taken more than a moment (importing a large checkpoint, uploading
// weights). Each new stage ends the previous one's spinner.
func stageSpinner(w io.Writer) func(gpurun.Progress) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(gpurun.Progress) {}
	}
	var stop chan struct{}
	var done sync.WaitGroup
	return func(p gpurun.Progress) {
		if stop != nil {
			close(stop)
			done.Wait()
		}
		if p.Stage == "done" {
			stop = nil
			return
		}
		stop = make(chan struct{})
		desc := map[string]string{"import": "importing the checkpoint", "lora": "merging LoRA adapters", "load": "loading"}[p.Stage]
		done.Add(1)
		go func(stop chan struct{}) {
			defer done.Done()
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
			}
			bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
				progressbar.OptionSpinnerType(14), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					_ = bar.Finish()
					return
				case <-t.C:
					_ = bar.Add(1)
				}
			}
		}(stop)
	}
}
