// golden.c runs llama.cpp (libllama) on a base GGUF with LoRA adapters applied
// at run time (llama_set_adapters_lora, what --lora / --lora-scaled do) and
// prints the logits as JSON in the layout of ../shared/models/arch/*.golden.json:
// the 12 prompt positions decoded in one llama_decode, then greedy steps.
// Built and run by gen.sh; the output is committed.
//
// usage: golden BASE.gguf STEPS [ADAPTER.gguf SCALE]...
#include <stdio.h>
#include <stdlib.h>
#include "llama.h"

static const llama_token prompt[] = {259, 260, 300, 17, 400, 511, 3, 288, 123, 450, 301, 260};
enum { n_prompt = sizeof(prompt) / sizeof(prompt[0]) };

static void row(const float *l, int n) {
	printf("[");
	for (int i = 0; i < n; i++) printf(i ? ",%.6g" : "%.6g", l[i]);
	printf("]");
}

static int argmax(const float *l, int n) {
	int best = 0;
	for (int i = 1; i < n; i++) if (l[i] > l[best]) best = i;
	return best;
}

int main(int argc, char **argv) {
	if (argc < 3 || argc % 2 == 0) { fprintf(stderr, "usage: golden BASE STEPS [ADAPTER SCALE]...\n"); return 2; }
	int steps = atoi(argv[2]);
	llama_backend_init();
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	struct llama_model *model = llama_model_load_from_file(argv[1], mp);
	if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = 128; cp.n_batch = 128; cp.n_ubatch = 128;
	cp.n_threads = 1; cp.n_threads_batch = 1;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx) { fprintf(stderr, "no context\n"); return 1; }
	int na = (argc - 3) / 2;
	struct llama_adapter_lora *ad[8];
	float scales[8];
	for (int i = 0; i < na && i < 8; i++) {
		ad[i] = llama_adapter_lora_init(model, argv[3 + 2 * i]);
		if (!ad[i]) { fprintf(stderr, "cannot load adapter %s\n", argv[3 + 2 * i]); return 1; }
		scales[i] = (float)atof(argv[4 + 2 * i]);
	}
	if (na > 0 && llama_set_adapters_lora(ctx, ad, na, scales) != 0) { fprintf(stderr, "set adapters failed\n"); return 1; }
	int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
	struct llama_batch b = llama_batch_init(128, 0, 1);
	for (int i = 0; i < n_prompt; i++) {
		b.token[i] = prompt[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
	}
	b.n_tokens = n_prompt;
	if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
	printf("{\n \"prompt_ids\": [");
	for (int i = 0; i < n_prompt; i++) printf(i ? ",%d" : "%d", prompt[i]);
	printf("],\n \"logits\": [\n");
	for (int i = 0; i < n_prompt; i++) { printf("  "); row(llama_get_logits_ith(ctx, i), nv); printf(i + 1 < n_prompt ? ",\n" : "\n"); }
	printf(" ],\n");
	int *ids = malloc(sizeof(int) * steps);
	float *gl = malloc(sizeof(float) * steps * nv);
	const float *last = llama_get_logits_ith(ctx, n_prompt - 1);
	for (int s = 0; s < steps; s++) {
		for (int j = 0; j < nv; j++) gl[s * nv + j] = last[j];
		ids[s] = argmax(last, nv);
		b.token[0] = ids[s]; b.pos[0] = n_prompt + s; b.n_seq_id[0] = 1; b.seq_id[0][0] = 0; b.logits[0] = 1;
		b.n_tokens = 1;
		if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
		last = llama_get_logits_ith(ctx, 0);
	}
	printf(" \"greedy_ids\": [");
	for (int s = 0; s < steps; s++) printf(s ? ",%d" : "%d", ids[s]);
	printf("],\n \"greedy_logits\": [\n");
	for (int s = 0; s < steps; s++) { printf("  "); row(gl + s * nv, nv); printf(s + 1 < steps ? ",\n" : "\n"); }
	printf(" ]\n}\n");
	llama_batch_free(b);
	llama_free(ctx);
	llama_model_free(model);
	return 0;
}
