/* Writes the llama.cpp quantization fixtures of tests/data/quants/ (see the README there) by running ggml's own
 * reference quantizers and dequantizers on fixed rows. Not part of the build: compile it against a ggml build
 * (libggml-base.a and ggml's public headers), e.g.
 *
 *   cc -O2 -I LLAMA/ggml/include tests/fixtures-tools/gen_quant_fixtures.c GGML_BUILD/src/libggml-base.a \
 *      -lstdc++ -lm -lpthread -fopenmp -o /tmp/gen_quant_fixtures
 *   /tmp/gen_quant_fixtures tests/data/quants
 *
 * Called without an output folder it prints this usage and exits 77 (nothing to do without ggml).
 *
 * Files (all little-endian):
 *   inputs.f32      kRows rows of kRowLen f32 values, row after row (the same for every type)
 *   <type>.bin      "GKQQ", u32 version 1, u32 ggml type id, u32 rows, u32 row length, u32 block bytes, then the
 *                   blocks of all rows, then the f32 values those blocks dequantize to
 *   importance.f32  kRowLen f32 per-column weights, as an importance matrix holds them
 *   <type>.weighted the raw blocks of ggml_quantize_chunk(type, inputs, kRows rows, importance): what
 *                   llama-quantize writes with an imatrix (every type but Q8_K, which has no such quantizer)
 *   iq4_nl.unweighted  the same without importance (IQ4_NL's only differs from its reference quantizer)
 *   q4_0.weighted   Q4_0's importance-weighted blocks (its reference blocks are checked against other fixtures)
 * All rows are quantized in ONE call, row 0 first: ggml's IQ4_NL quantizer lets an all-zero block keep the
 * previous block's indices, so the blocks depend on what came before within a call. Output buffers start zeroed
 * (ggml's Q8_K quantizer leaves an all-zero block's sums untouched). */
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not in ggml's public header: ggml-base exports them (ggml-quants.h), the CPU backend's table uses them. */
void quantize_row_q8_K_ref(const float* x, void* y, int64_t k);
void dequantize_row_q8_K(const void* x, float* y, int64_t k);

enum { kRows = 8, kRowLen = 256 };

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(void) { /* [0, 1) with 24 random bits */
    return (float)(next_u64() >> 40) * (1.0f / 16777216.0f);
}

static float gaussianish(void) { /* Irwin-Hall: sum of 4 uniforms, centred; no libm */
    return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f;
}

static void make_inputs(float* x) {
    for (int i = 0; i < kRowLen; ++i) x[0 * kRowLen + i] = gaussianish() * 0.05f; /* weight-like */
    for (int i = 0; i < kRowLen; ++i) {                                           /* scale changes per 16 */
        const float scale = 0.001f + 2.0f * (float)((i / 16) % 5);
        x[1 * kRowLen + i] = (uniform() - 0.3f) * scale;
    }
    for (int i = 0; i < kRowLen; ++i) x[2 * kRowLen + i] = 0.0f;  /* all zeros */
    for (int i = 0; i < kRowLen; ++i) x[3 * kRowLen + i] = 0.75f; /* constant */
    for (int i = 0; i < kRowLen; ++i) x[4 * kRowLen + i] = gaussianish() * 0.01f;
    x[4 * kRowLen + 77] = 9.5f;                                                      /* one outlier */
    for (int i = 0; i < kRowLen; ++i) x[5 * kRowLen + i] = gaussianish() * 3e-6f;    /* tiny: f16 subnormals */
    for (int i = 0; i < kRowLen; ++i) x[6 * kRowLen + i] = gaussianish() * 1.5e4f;   /* huge, within f16 */
    for (int i = 0; i < kRowLen; ++i) x[7 * kRowLen + i] = -0.5f - uniform() * 2.0f; /* negative only */
}

static int write_all(const char* path, const void* p, size_t n, FILE* f) {
    if (fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "%s: write failed\n", path);
        return 0;
    }
    return 1;
}

static int write_raw(const char* dir, const char* name, const void* p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE* f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 0;
    }
    int ok = write_all(path, p, n, f);
    return (fclose(f) == 0) && ok;
}

static int write_weighted(const char* dir, const char* name, uint32_t type_id, const float* x, const float* imp,
                          const char* suffix) {
    const size_t row_bytes = ggml_row_size((enum ggml_type)type_id, kRowLen);
    uint8_t* blocks = calloc(row_bytes * kRows, 1);
    if (!blocks) return 0;
    ggml_quantize_chunk((enum ggml_type)type_id, x, blocks, 0, kRows, kRowLen, imp);
    char file[256];
    snprintf(file, sizeof file, "%s.%s", name, suffix);
    const int ok = write_raw(dir, file, blocks, row_bytes * kRows);
    free(blocks);
    return ok;
}

static int write_type(const char* dir, const char* name, uint32_t type_id, const float* x) {
    const struct ggml_type_traits* tr = ggml_get_type_traits((enum ggml_type)type_id);
    const int64_t n = (int64_t)kRows * kRowLen;
    const size_t block_bytes = tr->type_size;
    const size_t n_bytes = (size_t)(n / tr->blck_size) * block_bytes;
    uint8_t* blocks = calloc(n_bytes, 1);
    float* y = calloc((size_t)n, sizeof(float));
    if (!blocks || !y) return 0;
    if (type_id == GGML_TYPE_Q8_K) {
        quantize_row_q8_K_ref(x, blocks, n);
        dequantize_row_q8_K(blocks, y, n);
    } else {
        tr->from_float_ref(x, blocks, n);
        tr->to_float(blocks, y, n);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE* f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 0;
    }
    const uint32_t header[6] = {0x51514B47u /* "GKQQ" */, 1, type_id, kRows, kRowLen, (uint32_t)block_bytes};
    int ok = write_all(path, header, sizeof header, f) && write_all(path, blocks, n_bytes, f) &&
             write_all(path, y, (size_t)n * sizeof(float), f);
    ok = (fclose(f) == 0) && ok;
    free(blocks);
    free(y);
    if (ok) printf("%s: %s, %zu bytes of blocks\n", path, tr->type_name, n_bytes);
    return ok;
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT_DIR (build against a ggml build; see the comment at the top)\n", argv[0]);
        return 77;
    }
    static float x[kRows * kRowLen];
    make_inputs(x);
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs.f32", argv[1]);
    FILE* f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    int ok = write_all(path, x, sizeof x, f);
    ok = (fclose(f) == 0) && ok;
    struct {
        const char* name;
        uint32_t id;
    } types[] = {
        {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0},     {"q5_1", GGML_TYPE_Q5_1}, {"q2_k", GGML_TYPE_Q2_K},
        {"q3_k", GGML_TYPE_Q3_K}, {"q4_k", GGML_TYPE_Q4_K},     {"q5_k", GGML_TYPE_Q5_K}, {"q6_k", GGML_TYPE_Q6_K},
        {"q8_k", GGML_TYPE_Q8_K}, {"iq4_nl", GGML_TYPE_IQ4_NL},
    };
    static float importance[kRowLen];
    for (int i = 0; i < kRowLen; ++i) importance[i] = (i % 37 == 5) ? 0.0f : 0.05f + 8.0f * uniform() * uniform();
    ok = write_raw(argv[1], "importance.f32", importance, sizeof importance) && ok;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
        ok = write_type(argv[1], types[i].name, types[i].id, x) && ok;
        if (types[i].id != GGML_TYPE_Q8_K)
            ok = write_weighted(argv[1], types[i].name, types[i].id, x, importance, "weighted") && ok;
    }
    ok = write_weighted(argv[1], "iq4_nl", GGML_TYPE_IQ4_NL, x, NULL, "unweighted") && ok;
    /* Q4_0's reference blocks are checked elsewhere (tests/data/llama); its importance-weighted ones here */
    ok = write_weighted(argv[1], "q4_0", GGML_TYPE_Q4_0, x, importance, "weighted") && ok;
    printf("ggml %s (commit %s)\n", ggml_version(), ggml_commit());
    return ok ? 0 : 1;
}
