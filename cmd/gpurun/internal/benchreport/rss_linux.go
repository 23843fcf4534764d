package benchreport

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PeakRSS is the process's peak resident memory in bytes since the last
// ResetPeakRSS (or since it started): VmHWM of /proc/self/status.
func PeakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}

// ResetPeakRSS sets the peak to the current resident memory (writing 5 to
// /proc/self/clear_refs), so that the next PeakRSS covers what follows. It
// reports whether the kernel allowed it.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
