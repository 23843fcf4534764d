//go:build !linux

package benchreport

// PeakRSS is not measured on this system.
func PeakRSS() int64 { return 0 }

// ResetPeakRSS cannot reset the peak on this system.
func ResetPeakRSS() bool { return false }
