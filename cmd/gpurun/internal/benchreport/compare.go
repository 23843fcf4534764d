package benchreport

import (
	"fmt"
	"strings"
	"time"
)

// Baseline relates a report to an earlier one (bench --compare).
type Baseline struct {
	Path     string    `json:"path"`
	Created  time.Time `json:"created"`
	Revision string    `json:"revision"`
	Modified bool      `json:"modified"`
	// Changes has one entry per result whose key the earlier report also
	// has, in the order of the results.
	Changes []Change `json:"changes"`
}

// Change is one result against the earlier report's result of the same key.
type Change struct {
	Key                 string `json:"key"`
	TimeToFirstTokenMS  *Ratio `json:"time_to_first_token_ms,omitempty"`
	PrefillTokensPerSec *Ratio `json:"prefill_tokens_per_sec,omitempty"`
	DecodeTokensPerSec  *Ratio `json:"decode_tokens_per_sec,omitempty"`
}

// Verdicts of a Ratio.
const (
	Faster = "faster" // better beyond both runs' spread
	Slower = "slower" // worse beyond both runs' spread
	Same   = "same"   // the two ranges overlap: within the measured spread
)

// Ratio compares one figure's medians.
type Ratio struct {
	Old   float64 `json:"old"`   // the earlier median
	Ratio float64 `json:"ratio"` // new median / old median (0 when the old median is 0)
	// Verdict is Faster or Slower when the ranges [min, max] of the two
	// runs do not overlap, Same otherwise. With a single repetition there
	// is no measured spread, so every difference is flagged.
	Verdict string `json:"verdict"`
}

// Compare relates every result of cur to the result of the same key in old.
// For time to first token lower is better, for the speeds higher.
func Compare(old, cur *Report, path string) *Baseline {
	b := &Baseline{Path: path, Created: old.Created, Revision: old.Environment.Revision, Modified: old.Environment.Modified, Changes: []Change{}}
	byKey := make(map[string]*Result, len(old.Results))
	for i := range old.Results {
		if old.Results[i].Error == "" {
			byKey[old.Results[i].Key()] = &old.Results[i]
		}
	}
	for i := range cur.Results {
		r := &cur.Results[i]
		o, ok := byKey[r.Key()]
		if !ok || r.Error != "" {
			continue
		}
		b.Changes = append(b.Changes, Change{
			Key:                 r.Key(),
			TimeToFirstTokenMS:  ratio(o.TimeToFirstTokenMS, r.TimeToFirstTokenMS, false),
			PrefillTokensPerSec: ratio(o.PrefillTokensPerSec, r.PrefillTokensPerSec, true),
			DecodeTokensPerSec:  ratio(o.DecodeTokensPerSec, r.DecodeTokensPerSec, true),
		})
	}
	return b
}

func ratio(old, cur *Stat, higherBetter bool) *Ratio {
	if old == nil || cur == nil {
		return nil
	}
	r := &Ratio{Old: old.Median, Verdict: Same}
	if old.Median != 0 {
		r.Ratio = cur.Median / old.Median
	}
	switch {
	case cur.Min > old.Max:
		r.Verdict = Slower
		if higherBetter {
			r.Verdict = Faster
		}
	case cur.Max < old.Min:
		r.Verdict = Faster
		if higherBetter {
			r.Verdict = Slower
		}
	}
	return r
}

// change returns the comparison of the result with key k, if any.
func (b *Baseline) change(k string) *Change {
	if b == nil {
		return nil
	}
	for i := range b.Changes {
		if b.Changes[i].Key == k {
			return &b.Changes[i]
		}
	}
	return nil
}

// NoMatch says why comparing cur with old matched nothing: the
// configurations each report measured (results match on model, weights,
// backend, activations, test and speculation), a few of each.
func NoMatch(old, cur *Report) string {
	keys := func(r *Report) string {
		var ks []string
		for i := range r.Results {
			if r.Results[i].Error == "" {
				ks = append(ks, r.Results[i].Key())
			}
		}
		switch {
		case len(ks) == 0:
			return "no measured result"
		case len(ks) > 3:
			return fmt.Sprintf("%s and %d more", strings.Join(ks[:3], "; "), len(ks)-3)
		}
		return strings.Join(ks, "; ")
	}
	return fmt.Sprintf("no result matches the baseline's (model | weights | backend | activations | test): this run has %s; the baseline has %s", keys(cur), keys(old))
}
