//go:build cgo && !js

package webgpu

// replay is nothing natively: wgpu-native's calls cost no crossing.
type replay struct{}

// submitReplay leaves every submission to Submit's generic path.
func submitReplay(*Device, []*commands) (bool, error) { return false, nil }
