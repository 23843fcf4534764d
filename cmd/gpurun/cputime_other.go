//go:build !unix

package main

import "time"

// processCPU is 0 where the process's CPU time is not read (bench-image
// reports wall time there).
func processCPU() time.Duration { return 0 }
