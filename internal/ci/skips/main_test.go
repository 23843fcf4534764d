package main

import (
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	const stream = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: skipped, not installed: naga\n"}
{"Action":"skip","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: load test\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"q","Test":"TestC"}
{"Action":"skip","Package":"q"}
`
	res, err := scan(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.skipped["p"]; len(got) != 2 {
		t.Errorf("package p skipped %v, want TestA and TestB", got)
	}
	if len(res.skipped["q"]) != 0 {
		t.Errorf("a package-level skip counted as a test: %v", res.skipped["q"])
	}
	if len(res.tool) != 1 || res.tool[0] != "p TestA" {
		t.Errorf("tool skips %v, want [p TestA]", res.tool)
	}
	if res.passed != 1 || res.failed != 0 {
		t.Errorf("passed %d failed %d, want 1 and 0", res.passed, res.failed)
	}
	if _, err := scan(strings.NewReader("not json\n")); err == nil {
		t.Error("a malformed stream was accepted")
	}
}

// TestScanTimeout: a test binary that timed out or panicked ends its
// package with a fail event and no fail event for the tests it was
// running; they count as failed, and a package that failed with no test
// failing (a build failure) counts as one failure.
func TestScanTimeout(t *testing.T) {
	const stream = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestMix"}
{"Action":"run","Package":"p","Test":"TestMix/a"}
{"Action":"pass","Package":"p","Test":"TestMix/a"}
{"Action":"run","Package":"p","Test":"TestMix/b"}
{"Action":"output","Package":"p","Test":"TestMix/b","Output":"panic: test timed out after 25m0s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1500.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1500}
{"Action":"run","Package":"q","Test":"TestC"}
{"Action":"fail","Package":"q","Test":"TestC"}
{"Action":"fail","Package":"q"}
{"Action":"output","Package":"r","Output":"FAIL\tr [build failed]\n"}
{"Action":"fail","Package":"r"}
{"Action":"run","Package":"s","Test":"TestD"}
{"Action":"pass","Package":"s","Test":"TestD"}
{"Action":"pass","Package":"s"}
`
	res, err := scan(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	// p: TestMix and TestMix/b never ended (2); q: TestC (1, its package
	// adds none); r: the package (1).
	if res.passed != 3 || res.failed != 4 {
		t.Errorf("passed %d failed %d, want 3 and 4", res.passed, res.failed)
	}
}
