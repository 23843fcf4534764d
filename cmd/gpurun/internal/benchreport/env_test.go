package benchreport

import (
	"runtime"
	"testing"
)

func TestHostEnvironment(t *testing.T) {
	e := HostEnvironment()
	if e.GoVersion != runtime.Version() || e.CPUs < 1 || e.CPU == "" || e.Revision == "" || e.OS != runtime.GOOS {
		t.Errorf("%+v", e)
	}
}

// TestPeakRSS: allocating and touching 64 MiB raises the peak by about that
// much, and a reset brings it back below.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read on Linux only")
	}
	if !ResetPeakRSS() {
		t.Fatal("cannot reset the peak (writing /proc/self/clear_refs)")
	}
	before := PeakRSS()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	peak := PeakRSS()
	if peak < before+48<<20 {
		t.Errorf("peak %d after touching 64 MiB, %d before", peak, before)
	}
	runtime.KeepAlive(buf)
	buf = nil
	runtime.GC()
	if !ResetPeakRSS() {
		t.Fatal("reset")
	}
	if after := PeakRSS(); after >= peak {
		t.Logf("peak %d after reset, %d before (the freed memory may not be returned yet)", after, peak)
	}
}
