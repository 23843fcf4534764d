package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
)

// emitReport writes the report's files (--report) and prints it, failing
// when it holds no measured result.
func emitReport(cmd *cobra.Command, bf *benchFlags, rep *benchreport.Report) error {
	measured := 0
	var firstErr string
	for _, r := range rep.Results {
		if r.Error == "" {
			measured++
		} else if firstErr == "" {
			firstErr = r.Error
		}
	}
	if bf.reportDir != "" {
		if err := writeReport(bf.reportDir, rep); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(bf.reportDir, "report.html"))
	}
	out := cmd.OutOrStdout()
	if bf.asJSON {
		if err := rep.WriteJSON(out); err != nil {
			return err
		}
	} else if err := rep.WriteMarkdown(out); err != nil {
		return err
	}
	if measured == 0 {
		return fmt.Errorf("bench: nothing could be measured: %s", firstErr)
	}
	return nil
}

// readReport reads a JSON report file.
func readReport(flag, path string) (*benchreport.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", flag, err)
	}
	defer f.Close()
	r, err := benchreport.ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("bench: %s %s: %w", flag, path, err)
	}
	return r, nil
}

// renderBench is bench --from: an existing report rendered again (after a
// change of the renderers, or to compare two reports without measuring).
func renderBench(cmd *cobra.Command, bf *benchFlags) error {
	var measuring []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "from", "compare", "report", "json":
		default:
			measuring = append(measuring, "--"+f.Name)
		}
	})
	if len(measuring) > 0 {
		return fmt.Errorf("bench: --from renders a report and measures nothing; %s do not apply", strings.Join(measuring, ", "))
	}
	rep, err := readReport("--from", bf.from)
	if err != nil {
		return err
	}
	rep.Baseline = nil
	if bf.compare != "" {
		old, err := readReport("--compare", bf.compare)
		if err != nil {
			return err
		}
		rep.Baseline = compareReports(cmd.ErrOrStderr(), old, rep, bf.compare)
	}
	if bf.reportDir != "" {
		if err := os.MkdirAll(bf.reportDir, 0o755); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
	}
	return emitReport(cmd, bf, rep)
}

// writeReport writes report.json, report.md and report.html into dir.
func writeReport(dir string, rep *benchreport.Report) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"report.json", rep.WriteJSON},
		{"report.md", rep.WriteMarkdown},
		{"report.html", rep.WriteHTML},
	} {
		path := filepath.Join(dir, f.name)
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		err = f.write(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("bench: writing %s: %w", path, err)
		}
	}
	return nil
}

// commandLine is the command as given: gpurun bench, every flag set and
// the positional arguments (models), so that the report's command
// reproduces the run.
func commandLine(cmd *cobra.Command, args []string) []string {
	out := []string{"gpurun", "bench"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return append(out, args...)
}

// benchBar is a progress bar over every run on w when w is a terminal,
// and silent otherwise.
func benchBar(w io.Writer, total int64) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		w = io.Discard
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("bench"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }),
	)
}

// startCPUProfile starts a Go CPU profile written to path; stop ends it
// and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// compareReports relates rep to the earlier report old (--compare path),
// saying on log when no result of rep has a match there, which leaves the
// comparison empty.
func compareReports(log io.Writer, old, rep *benchreport.Report, path string) *benchreport.Baseline {
	b := benchreport.Compare(old, rep, path)
	if len(b.Changes) == 0 {
		fmt.Fprintf(log, "bench: --compare %s: %s\n", path, benchreport.NoMatch(old, rep))
	}
	return b
}
