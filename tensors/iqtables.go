package tensors

// The I-quant grids, sign tables and value tables are llama.cpp's data,
// extracted from its ggml/src/ggml-common.h by ./internal/gentables into
// iqtables_gen.go; iqtables.sha256 holds the SHA-256 of their canonical
// text, which TestIQTablesCurrent recomputes from the Go arrays.
//
//go:generate go run ./internal/gentables -header ${GGML_COMMON_H} -out iqtables_gen.go -sum iqtables.sha256
