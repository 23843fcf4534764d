// Command skips reads the JSON event stream of `go test -json` (as
// gotestsum's --jsonfile writes it) and prints how many tests each package
// skipped. It exits 1 when a test skipped because a tool was missing
// (internal/ci.Missing's skip message), which cannot happen under CI=true
// unless a test bypasses ci.Missing. Its last line counts the tests that
// passed, failed and skipped; a test that started and never ended in a
// package that failed (the test binary timed out or panicked: test2json
// writes no fail event for the tests then running) counts as failed, and
// so does a failed package none of whose tests failed (a build failure, a
// failing TestMain), as one.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is the part of test2json's record this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// result holds, per package, its skipped tests and whether any skip was for
// a missing tool.
type result struct {
	skipped        map[string][]string // package -> test names
	tool           []string            // package.test whose skip named a missing tool
	passed, failed int                 // tests (subtests included)
	// unfinished: tests that started with no pass, fail or skip event
	// (yet), per package; failedPkgs the packages with a test that failed.
	unfinished map[string]map[string]bool
	failedPkgs map[string]bool
}

func scan(r io.Reader) (*result, error) {
	res := &result{skipped: map[string][]string{}, unfinished: map[string]map[string]bool{}, failedPkgs: map[string]bool{}}
	toolSkip := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("skips: bad event %q: %w", sc.Text(), err)
		}
		if e.Test == "" {
			if e.Action == "fail" {
				res.packageFailed(e.Package)
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "pass", "fail", "skip":
			delete(res.unfinished[e.Package], e.Test)
		}
		switch e.Action {
		case "run":
			if res.unfinished[e.Package] == nil {
				res.unfinished[e.Package] = map[string]bool{}
			}
			res.unfinished[e.Package][e.Test] = true
		case "output":
			if strings.Contains(e.Output, "skipped, not installed:") {
				toolSkip[key] = true
			}
		case "pass":
			res.passed++
		case "fail":
			res.failed++
			res.failedPkgs[e.Package] = true
		case "skip":
			res.skipped[e.Package] = append(res.skipped[e.Package], e.Test)
			if toolSkip[key] {
				res.tool = append(res.tool, key)
			}
		}
	}
	return res, sc.Err()
}

// packageFailed counts what a package-level fail event leaves uncounted:
// the package's tests still running when its binary ended (a timeout or a
// panic), each a failure, or the package itself when none of its tests
// failed at all.
func (res *result) packageFailed(pkg string) {
	n := len(res.unfinished[pkg])
	delete(res.unfinished, pkg)
	if n == 0 && !res.failedPkgs[pkg] {
		n = 1
	}
	res.failed += n
	res.failedPkgs[pkg] = true
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skips GOTEST.json")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	res, err := scan(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pkgs := make([]string, 0, len(res.skipped))
	total := 0
	for p, tests := range res.skipped {
		pkgs = append(pkgs, p)
		total += len(tests)
	}
	sort.Strings(pkgs)
	fmt.Printf("skipped tests: %d in all, %d for a missing tool\n", total, len(res.tool))
	for _, p := range pkgs {
		fmt.Printf("  %3d  %s\n", len(res.skipped[p]), p)
	}
	code := 0
	if len(res.tool) > 0 {
		fmt.Printf("skipped for a missing tool (must be 0 under CI): %s\n", strings.Join(res.tool, ", "))
		code = 1
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", res.passed, res.failed, total)
	os.Exit(code)
}
