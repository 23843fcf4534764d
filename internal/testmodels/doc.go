// Package testmodels is the test support shared by the repository's tests:
// it finds the reference data in ../shared/models (beside the repository
// root) and decodes llama.cpp's golden files there into typed structs.
//
// It imports only the standard library, so that the internal tests of any
// package (llama2c, gguf, tensors, ...) can use it without import cycles.
// Loading checkpoints stays with the tests, which import their own loader.
package testmodels
