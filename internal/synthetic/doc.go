// Package synthetic builds random-weight checkpoints at the real shapes of
// published models (TinyLlama-1.1B, Gemma-2B, Phi-2, a Falcon-class 1B,
// StableLM-3B and llama2.c's 110M), so that the runtime can prove it compiles and runs big
// architectures, and measure them, without downloading weights.
//
// Weights are drawn directly in their stored form (int4 or int8 codes with
// scales, f16 or f32), never through a float32 copy, so building a 2.8B-parameter
// int4 model takes about its 1.5 GB of weights and a few seconds.
package synthetic
