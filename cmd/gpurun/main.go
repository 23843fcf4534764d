// Command gpurun converts, inspects and runs large language models on the GPU
// (WebGPU or Vulkan) or the CPU.
//
// Errors are printed as "gpurun: <what failed>: <why>" on stderr with exit
// status 1 (130 after an interrupt).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// Every command writes its output through out, so a failed write (a
	// full disk, > /dev/full) fails the command whichever it is.
	out := &checkedWriter{w: os.Stdout}
	root := newRoot()
	root.SetOut(out)
	root.SetArgs(llamaCacheFlags(os.Args[1:]))
	done := make(chan struct{})
	go interruptWatchdog(ctx, done, interruptGrace, func(since time.Duration) string {
		switch {
		case loadsUnderWay.Load() > 0:
			return "gpurun: interrupted while loading the model"
		case closesUnderWay.Load() > 0:
			// The command's output is written; what is left is the
			// device's queued work, which nobody wants now.
			return "gpurun: interrupted; not waiting for the device's queued work"
		case runsUnderWay.Load() > 0 && since >= interruptLimit:
			// The generation is inside a driver call no context reaches
			// (wgpu-native's submit waits while earlier work runs).
			return "gpurun: interrupted; the device did not give the generation back within a second (the text so far is printed, its metrics are not)"
		}
		return ""
	}, func(why string) {
		fmt.Fprintln(os.Stderr, why)
		os.Exit(130)
	})
	err := root.ExecuteContext(ctx)
	close(done)
	stop()
	if err == nil && out.err != nil {
		err = fmt.Errorf("writing the output: %w", out.err)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpurun: "+errorText(err))
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// interruptGrace is how long a model load may take to return after an
// interrupt before the process exits anyway (status 130): a load can be
// inside one driver call that no context reaches (lavapipe creates a
// pipeline in up to seconds on a loaded machine), and Ctrl-C must end
// gpurun at once. Likewise closing a model after an interrupt: it waits
// for the submissions still queued on the device (a cancelled decode
// leaves up to three, seconds each on a software driver), which nobody
// wants. Generation, which ends on the context by itself (with the text
// so far and its metrics), is not cut short.
const interruptGrace = 500 * time.Millisecond

// interruptLimit is how long run's generation may take to return after an
// interrupt (to print its metrics and result) before the process exits
// anyway: Ctrl-C ends gpurun within a second.
const interruptLimit = 700 * time.Millisecond

// watchdogPoll is how often the watchdog looks again, past the grace,
// for a load, a close or an overdue generation to cut short.
const watchdogPoll = 50 * time.Millisecond

// loadsUnderWay counts the model loads in progress (loadModel),
// closesUnderWay the model closes (closeModel) and runsUnderWay run's
// generations (runGeneration; chat's replies end on Ctrl-C by themselves
// and are not counted).
var loadsUnderWay, closesUnderWay, runsUnderWay atomic.Int32

// runGeneration runs gen, run's generation: an interrupt ends the process
// if gen has not returned interruptLimit after it.
func runGeneration[T any](gen func() (T, error)) (T, error) { return underWay(&runsUnderWay, gen) }

// closeModel runs close, which waits for the device's queued work; an
// interrupt during it ends the process (interruptGrace after the
// interrupt at the earliest), the command's output already written.
func closeModel(close func() error) error {
	_, err := underWay(&closesUnderWay, func() (struct{}, error) { return struct{}{}, close() })
	return err
}

// loadModel runs load, a model load that checks ctx between units of work
// but may sit in one long driver call; an interrupt during it ends the
// process after interruptGrace if it has not returned by then.
func loadModel[T any](load func() (T, error)) (T, error) { return underWay(&loadsUnderWay, load) }

// underWay runs f, counted in n while it runs (the phases the interrupt
// watchdog looks at).
func underWay[T any](n *atomic.Int32, f func() (T, error)) (T, error) {
	n.Add(1)
	defer n.Add(-1)
	return f()
}

// interruptWatchdog calls exit once ctx ended (an interrupt), grace has
// passed and, before the command returned (done closed), cuttable, given
// the time since the interrupt, names a phase to cut short (a load, a
// close, an overdue generation: a non-empty reason, which exit is given);
// it looks every watchdogPoll until then.
func interruptWatchdog(ctx context.Context, done <-chan struct{}, grace time.Duration, cuttable func(since time.Duration) string, exit func(why string)) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	interrupted := time.Now()
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if why := cuttable(time.Since(interrupted)); why != "" {
				exit(why)
				return
			}
			t.Reset(watchdogPoll)
		}
	}
}

func newRoot() *cobra.Command {
	bi, ok := debug.ReadBuildInfo()
	root := &cobra.Command{
		Use:           "gpurun",
		Short:         "Run large language models on the GPU (WebGPU, Vulkan) or the CPU",
		Version:       version(bi, ok),
		SilenceUsage:  true,
		SilenceErrors: true,
		// An unknown command is an error in the usual form.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return fmt.Errorf("%s: unknown command (the commands: %s; see gpurun --help)", args[0], strings.Join(names, ", "))
		},
	}
	// The git fallback runs only when --version is asked for.
	cobra.AddTemplateFunc("gitRevision", func() string { return gitRevision(bi, ok) })
	root.SetVersionTemplate("gpurun {{.Version}}{{gitRevision}}\n")
	root.AddCommand(newConvert(), newBundle(), newInspect(), newTokenize(), newRun(), newChat(), newServe(), newEmbed(), newDevices(), newBench(), newBenchImage(), newPull())
	for _, c := range root.Commands() {
		nameErrors(c)
	}
	return root
}

// nameErrors prefixes the errors of c with its name, so that every error
// says which command failed: "gpurun: run: --top-k -3: want ...".
func nameErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return fmt.Errorf("%s: %w", cmd.Name(), err)
			}
			return nil
		}
	}
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w", cmd.Name(), flagError(cmd, err))
	})
}

// nArgs accepts min to max positional arguments (max < 0: no limit); other
// counts are an error naming the command, what was given and its usage:
// "run: 2 arguments given (a b), want at most 1; usage: gpurun run [MODEL] ...".
func nArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && (max < 0 || len(args) <= max) {
			return nil
		}
		given := "no argument given"
		switch len(args) {
		case 0:
		case 1:
			given = fmt.Sprintf("1 argument given (%s)", args[0])
		default:
			given = fmt.Sprintf("%d arguments given (%s)", len(args), strings.Join(args, " "))
		}
		var want string
		switch {
		case max == 0:
			want = "none"
		case min == max:
			want = fmt.Sprint(min)
		case min == 0:
			want = fmt.Sprintf("at most %d", max)
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		default:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return fmt.Errorf("%s: %s, want %s; usage: %s", cmd.Name(), given, want, cmd.UseLine())
	}
}

// version describes the build: the module version ("(devel)" for a build
// from a work tree) and the VCS revision and state when Go recorded them.
func version(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "(unknown build)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			when = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", revision " + rev
		if modified == "true" {
			v += " with local changes"
		}
		if when != "" {
			v += " of " + when
		}
	}
	return v + ", " + bi.GoVersion
}

// gitRevision is what --version adds for a build without a VCS revision
// stamp (go run, go test, a build in a git worktree, which cmd/go does not
// recognize): the revision of the gpurun checkout the working directory is
// in, read with git, or why there is none.
func gitRevision(bi *debug.BuildInfo, ok bool) string {
	if ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return ""
			}
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return "" // a released module version names the source
		}
	}
	c, found := benchreport.GitCheckout()
	if !found {
		return " (no revision: built without version control stamps, outside a gpurun checkout)"
	}
	rev := c.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	s := " (revision " + rev
	if c.Modified {
		s += " with local changes"
	}
	if c.Time != "" {
		s += " of " + c.Time
	}
	return s + ", from git in the working directory)"
}

// packagePrefixes are the prefixes the project's packages put on their
// errors; errorText keeps the first of each.
var packagePrefixes = map[string]bool{
	"pipeline": true, "gpu": true, "cpu": true, "kernels": true, "webgpu": true, "vulkan": true,
	"backends": true, "convert": true, "checkpoint": true, "gguf": true, "hf": true, "llama2c": true,
	"safetensors": true, "modelfile": true, "tokenizer": true, "model": true, "fusion": true, "arch": true,
	"run": true, "bench": true, "chat": true, "serve": true, "tokenize": true, "bundle": true, "inspect": true, "pull": true,
}

// errorText is err's message with repeated segments dropped: wrapping
// layers that each name their package would otherwise print
// "pipeline: pipeline: invalid prompt".
func errorText(err error) string {
	parts := strings.Split(err.Error(), ": ")
	seen := map[string]bool{}
	out := parts[:0]
	for i, p := range parts {
		if i < len(parts)-1 && packagePrefixes[p] {
			if seen[p] {
				continue
			}
			seen[p] = true
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}
