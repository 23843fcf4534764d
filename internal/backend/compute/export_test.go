package compute

import "github.com/gpurun/gpurun/internal/tuning"

// The test-only knobs of internal/tuning under the names this
// package's tests use.
type (
	Options       = tuning.Options
	AttentionKind = tuning.AttentionKind
	F16Mode       = tuning.F16Mode
	SubgroupMode  = tuning.SubgroupMode
)

const (
	AttentionAuto    = tuning.AttentionAuto
	AttentionPerHead = tuning.AttentionPerHead
	AttentionSplit   = tuning.AttentionSplit
	AttentionTiled   = tuning.AttentionTiled
	F16Auto          = tuning.F16Auto
	F16Off           = tuning.F16Off
	SubgroupsAuto    = tuning.SubgroupsAuto
	SubgroupsOff     = tuning.SubgroupsOff
)
