package cpu

// SetGroupedAttention turns the grouped quantized-value attention on or
// off and returns the previous setting.
func SetGroupedAttention(on bool) (was bool) {
	was, groupedAttention = groupedAttention, on
	return was
}
