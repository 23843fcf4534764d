package spirvgen

import "testing"

func TestForNaga(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"enable subgroups;\nfn f() {}\n", "fn f() {}\n"},
		{"enable subgroups;\nenable f16;\nfn f() {}\n", "enable f16;\nfn f() {}\n"},
		{"enable f16;\nfn f() {}\n", "enable f16;\nfn f() {}\n"},
		{"// enable subgroups;\n", "// enable subgroups;\n"},
		{"fn f() {}\nenable subgroups;\n", "fn f() {}\n"},
	} {
		if got := ForNaga(tc.in); got != tc.want {
			t.Errorf("ForNaga(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
