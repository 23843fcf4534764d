//go:build !race

package webgpu

const raceEnabled = false
