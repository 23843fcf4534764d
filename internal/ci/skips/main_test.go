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
