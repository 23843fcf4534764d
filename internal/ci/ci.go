// Package ci is the one place tests ask whether they run under CI
// (CI=true, as .ci/run sets it) and the one way a test ends when a tool it
// needs is missing: a skip on a developer's machine, a failure under CI,
// where .ci/setup installs every such tool. So a CI run never skips a test
// for a missing tool, and .ci/run's skip summary lists only skips for
// other reasons (opt-in tests, an architecture, a device capability).
package ci

import (
	"fmt"
	"os"
	"testing"
)

// Enabled reports whether the tests run under CI.
func Enabled() bool { return os.Getenv("CI") == "true" }

// Missing ends t because something it needs is not installed: t.Fatalf
// under CI, t.Skipf elsewhere. The message should name the tool and how to
// install it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Enabled() {
		t.Fatalf("required under CI: %s", msg)
		return
	}
	t.Skipf("skipped, not installed: %s", msg)
}
