// Command vs-llamacpp measures gpurun's CPU backend against llama.cpp's
// llama-bench on the same GGUF files, in alternating rounds, and prints the
// medians and their ratios as a Markdown table (the method of the figures
// in docs/benchmarks.md):
//
//	go run ./scripts/vs-llamacpp -llama-bench /path/to/llama-bench \
//	    -pp 512 -tg 128 -rounds 3 m110-Q4_K_M.gguf m110-Q6_K.gguf
//
// Each round runs, for every file in turn, `llama-bench -m FILE -p PP -n TG
// -t THREADS -r 1 -o json` and then `gpurun bench -m FILE --backend cpu
// --tests ppPP,tgTG --reps 1 --warmup 1 --json`, so both see the same
// machine state; the table reports each side's median over the rounds.
// gpurun is built from the working tree unless -gpurun names a binary.
// llama.cpp is not built here: see ../shared/docs/anchors.md.
//
// Measure on a quiet machine: llama.cpp's worker threads spin, so another
// busy process on a core collapses its speed. The command prints the load
// average before it starts and warns when the machine looks busy.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vs-llamacpp:", err)
		os.Exit(1)
	}
}

type config struct {
	llamaBench, gpurun string
	pp, tg, rounds     int
	threads            int
	files              []string
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vs-llamacpp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.llamaBench, "llama-bench", os.Getenv("LLAMA_BENCH"), "llama.cpp's llama-bench binary (default $LLAMA_BENCH)")
	fs.StringVar(&c.gpurun, "gpurun", "", "gpurun binary (default: build ./cmd/gpurun from the working tree)")
	fs.IntVar(&c.pp, "pp", 512, "prompt tokens of the prefill test (0: none)")
	fs.IntVar(&c.tg, "tg", 128, "generated tokens of the decode test (0: none)")
	fs.IntVar(&c.rounds, "rounds", 3, "alternating rounds")
	fs.IntVar(&c.threads, "threads", 2, "threads for llama.cpp (gpurun uses every core, as its bench reports)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.files = fs.Args()
	switch {
	case len(c.files) == 0:
		return errors.New("no GGUF files given")
	case c.llamaBench == "":
		return errors.New("-llama-bench (or $LLAMA_BENCH) is required")
	case c.pp < 0 || c.tg < 0 || c.pp+c.tg == 0:
		return fmt.Errorf("-pp %d -tg %d: want at least one test and no negative counts", c.pp, c.tg)
	case c.rounds < 1:
		return fmt.Errorf("-rounds %d: want at least 1", c.rounds)
	}
	if c.gpurun == "" {
		dir, err := os.MkdirTemp("", "vs-llamacpp")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.gpurun = filepath.Join(dir, "gpurun")
		build := exec.Command("go", "build", "-o", c.gpurun, "./cmd/gpurun")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building gpurun: %w", err)
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stderr, "load average before: %s", load)
		if f := strings.Fields(string(load)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > 0.5 {
				fmt.Fprintln(stderr, "warning: the machine looks busy; llama.cpp's spinning threads make contended figures meaningless")
			}
		}
	}
	res := results{}
	for r := range c.rounds {
		for _, f := range c.files {
			fmt.Fprintf(stderr, "round %d/%d: %s\n", r+1, c.rounds, filepath.Base(f))
			out, err := output(exec.Command(c.llamaBench, "-m", f, "-p", strconv.Itoa(c.pp), "-n", strconv.Itoa(c.tg),
				"-t", strconv.Itoa(c.threads), "-r", "1", "-o", "json"))
			if err != nil {
				return fmt.Errorf("llama-bench on %s: %w", f, err)
			}
			if err := res.addLlama(f, out); err != nil {
				return fmt.Errorf("llama-bench on %s: %w", f, err)
			}
			out, err = output(exec.Command(c.gpurun, "bench", "-m", f, "--backend", "cpu", "--tests", tests(c.pp, c.tg),
				"--reps", "1", "--warmup", "1", "--json"))
			if err != nil {
				return fmt.Errorf("gpurun bench on %s: %w", f, err)
			}
			if err := res.addGpurun(f, out); err != nil {
				return fmt.Errorf("gpurun bench on %s: %w", f, err)
			}
		}
	}
	res.table(stdout, c)
	return nil
}

func tests(pp, tg int) string {
	var t []string
	if pp > 0 {
		t = append(t, "pp"+strconv.Itoa(pp))
	}
	if tg > 0 {
		t = append(t, "tg"+strconv.Itoa(tg))
	}
	return strings.Join(t, ",")
}

func output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tail := stderr.String()
		if len(tail) > 600 {
			tail = tail[len(tail)-600:]
		}
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(tail))
	}
	return out, nil
}

// key names one series: a file, a test kind ("pp" or "tg") and a side.
type key struct{ file, kind, side string }

type results map[key][]float64

// addLlama reads llama-bench's JSON array: n_prompt > 0 is the prefill
// test, n_gen > 0 the decode test, avg_ts their tokens per second.
func (r results) addLlama(file string, out []byte) error {
	var rows []struct {
		NPrompt int     `json:"n_prompt"`
		NGen    int     `json:"n_gen"`
		AvgTS   float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return fmt.Errorf("reading its JSON: %w", err)
	}
	if len(rows) == 0 {
		return errors.New("no results in its JSON")
	}
	for _, row := range rows {
		kind := "tg"
		if row.NPrompt > 0 {
			kind = "pp"
		}
		r[key{file, kind, "llama.cpp"}] = append(r[key{file, kind, "llama.cpp"}], row.AvgTS)
	}
	return nil
}

// addGpurun reads `gpurun bench --json`: each result's test kind and the
// median prefill or decode rate.
func (r results) addGpurun(file string, out []byte) error {
	type stat struct {
		Median float64 `json:"median"`
	}
	var rep struct {
		Results []struct {
			Test struct {
				Kind string `json:"kind"`
			} `json:"test"`
			Prefill *stat `json:"prefill_tokens_per_sec"`
			Decode  *stat `json:"decode_tokens_per_sec"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("reading its JSON: %w", err)
	}
	if len(rep.Results) == 0 {
		return errors.New("no results in its JSON")
	}
	for _, res := range rep.Results {
		s := res.Decode
		if res.Test.Kind == "pp" {
			s = res.Prefill
		}
		if s == nil {
			return fmt.Errorf("test kind %q has no rate", res.Test.Kind)
		}
		k := key{file, res.Test.Kind, "gpurun"}
		r[k] = append(r[k], s.Median)
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r results) table(w io.Writer, c config) {
	fmt.Fprintf(w, "| file | test | llama.cpp tok/s | gpurun tok/s | ratio | rounds (llama.cpp ; gpurun) |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- |\n")
	for _, f := range c.files {
		for _, kind := range []string{"tg", "pp"} {
			n := c.tg
			if kind == "pp" {
				n = c.pp
			}
			if n == 0 {
				continue
			}
			l, g := r[key{f, kind, "llama.cpp"}], r[key{f, kind, "gpurun"}]
			ratio := "-"
			if ml := median(l); ml > 0 {
				ratio = fmt.Sprintf("%.2fx", median(g)/ml)
			}
			fmt.Fprintf(w, "| %s | %s%d | %.1f | %.1f | %s | %s ; %s |\n", filepath.Base(f), kind, n,
				median(l), median(g), ratio, list(l), list(g))
		}
	}
}

func list(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(s, " ")
}
