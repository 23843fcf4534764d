package shaders

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPosAtRow: row_pos's POS_AT_ROW is PosAtRow, the value the planner
// passes for a self-attention's rows.
func TestPosAtRow(t *testing.T) {
	src, err := os.ReadFile("wgsl/lib/row_pos.wgsl")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("const POS_AT_ROW: u32 = %#xu;", uint32(PosAtRow))
	if !strings.Contains(string(src), want) {
		t.Errorf("wgsl/lib/row_pos.wgsl does not declare %q", want)
	}
}
