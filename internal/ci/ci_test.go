package ci

import (
	"testing"
)

// fakeTB records how Missing ended a test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = format }
func (f *fakeTB) Skipf(format string, args ...any)  { f.skip = format }

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		env       string
		wantFatal bool
	}{{"true", true}, {"", false}, {"false", false}} {
		t.Setenv("CI", tc.env)
		f := &fakeTB{}
		Missing(f, "naga (see README)")
		if got := f.fatal != ""; got != tc.wantFatal {
			t.Errorf("CI=%q: fatal %v, want %v", tc.env, got, tc.wantFatal)
		}
		if (f.skip != "") == tc.wantFatal {
			t.Errorf("CI=%q: skip %q with fatal %v", tc.env, f.skip, tc.wantFatal)
		}
		if Enabled() != tc.wantFatal {
			t.Errorf("CI=%q: Enabled() = %v", tc.env, Enabled())
		}
	}
}
