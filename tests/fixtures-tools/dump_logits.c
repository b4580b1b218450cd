/* Writes the llama.cpp forward-pass fixtures of tests/data/forward/ (see the README there): for each GGUF given,
 * the logits llama.cpp computes for every position of a fixed token sequence and its 16-token greedy continuation.
 * Not part of the build: compile it against llama.cpp's shared libraries (node-llama-cpp ships prebuilt CPU ones),
 * e.g.
 *
 *   BINS=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   cc -O2 -I LLAMA/include -I LLAMA/ggml/include tests/fixtures-tools/dump_logits.c \
 *      $BINS/libllama.v0.5.0.so $BINS/libggml.v0.5.0.so $BINS/libggml-base.so -Wl,-rpath,$BINS -o /tmp/dump_logits
 *   build/tests/test_forward_fixtures --write-models /tmp/forward    # the GGUFs, from the test's fixed seeds
 *   /tmp/dump_logits $BINS tests/data/forward /tmp/forward/llama.gguf /tmp/forward/qwen2.gguf ...
 *
 * Called without arguments it prints this usage and exits 77 (nothing to do without llama.cpp).
 *
 * llama.cpp runs on one thread with an f32 KV cache and no flash attention.
 *
 * For MODEL.gguf it writes OUT/MODEL.logits (little-endian): "GKQL", u32 version 1, u32 n_tokens, u32 n_vocab,
 * u32 n_generated, then n_tokens i32 token ids, n_tokens * n_vocab f32 logits (position by position), n_generated
 * i32 ids of the greedy continuation (argmax, lowest id on ties; each fed back at the next position). */
#include "ggml-backend.h"
#include "llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sequence every fixture runs (tests/core/test_forward_fixtures.cpp runs the same). */
static const int32_t kTokens[] = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 200};
enum { kNTokens = sizeof kTokens / sizeof kTokens[0], kNGenerated = 16 };

static int32_t argmax(const float* v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static int put_u32(FILE* f, uint32_t v) {
    return fwrite(&v, sizeof v, 1, f) == 1;
}

static int dump(const char* out_dir, const char* path) {
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model* model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "%s: llama.cpp cannot load it\n", path);
        return 0;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_ubatch = 64;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32; /* the default f16 cache rounds keys and values (~1e-3 relative in the logits) */
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: no llama.cpp context\n", path);
        llama_model_free(model);
        return 0;
    }
    float* logits = malloc(sizeof(float) * (size_t)n_vocab * kNTokens);
    int32_t generated[kNGenerated];
    struct llama_batch batch = llama_batch_init(kNTokens, 0, 1);
    int ok = logits != NULL;
    batch.n_tokens = kNTokens;
    for (int32_t i = 0; i < kNTokens; i++) {
        batch.token[i] = kTokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    ok = ok && llama_decode(ctx, batch) == 0;
    for (int32_t i = 0; ok && i < kNTokens; i++)
        memcpy(logits + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i), sizeof(float) * n_vocab);
    int32_t next = ok ? argmax(logits + (size_t)(kNTokens - 1) * n_vocab, n_vocab) : 0;
    for (int32_t g = 0; ok && g < kNGenerated; g++) {
        generated[g] = next;
        batch.n_tokens = 1;
        batch.token[0] = next;
        batch.pos[0] = kNTokens + g;
        batch.logits[0] = 1;
        ok = llama_decode(ctx, batch) == 0;
        if (ok) next = argmax(llama_get_logits_ith(ctx, 0), n_vocab);
    }
    if (!ok) fprintf(stderr, "%s: llama_decode failed\n", path);

    char out_path[4096];
    const char* base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strlen(base);
    if (stem > 5 && strcmp(base + stem - 5, ".gguf") == 0) stem -= 5;
    snprintf(out_path, sizeof out_path, "%s/%.*s.logits", out_dir, (int)stem, base);
    FILE* f = ok ? fopen(out_path, "wb") : NULL;
    if (ok && !f) fprintf(stderr, "%s: cannot create\n", out_path);
    ok = f != NULL;
    ok = ok && fwrite("GKQL", 4, 1, f) == 1 && put_u32(f, 1) && put_u32(f, kNTokens) && put_u32(f, (uint32_t)n_vocab) &&
         put_u32(f, kNGenerated);
    ok = ok && fwrite(kTokens, sizeof kTokens[0], kNTokens, f) == kNTokens;
    ok = ok && fwrite(logits, sizeof(float), (size_t)n_vocab * kNTokens, f) == (size_t)n_vocab * kNTokens;
    ok = ok && fwrite(generated, sizeof generated[0], kNGenerated, f) == kNGenerated;
    if (f && fclose(f) != 0) ok = 0;
    if (ok) printf("%s: %d positions x %d logits, continuation written to %s\n", path, kNTokens, n_vocab, out_path);
    llama_batch_free(batch);
    free(logits);
    llama_free(ctx);
    llama_model_free(model);
    return ok;
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dump_logits GGML_BACKEND_DIR OUT_DIR MODEL.gguf...\n");
        return 77;
    }
    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    int failed = 0;
    for (int i = 3; i < argc; i++) failed += !dump(argv[2], argv[i]);
    llama_backend_free();
    return failed ? 1 : 0;
}
