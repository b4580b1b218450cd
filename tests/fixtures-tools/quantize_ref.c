/* Writes the llama-quantize fixtures of tests/data/kquant/ (see the README there): for each GGUF given and each of
 * llama.cpp's k-quant mixtures Q2_K, Q3_K_M, Q4_K_M, Q5_K_M and Q6_K, quantized by llama.cpp's own
 * llama_model_quantize (what llama-quantize runs) without and with an importance matrix, the type, size and FNV-1a
 * hash of every tensor of the result. Not part of the build: compile it against llama.cpp's shared libraries
 * (node-llama-cpp ships prebuilt CPU ones), e.g.
 *
 *   BINS=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   cc -O2 -I LLAMA/include -I LLAMA/ggml/include tests/fixtures-tools/quantize_ref.c \
 *      $BINS/libllama.v0.5.0.so $BINS/libggml.v0.5.0.so $BINS/libggml-base.so -Wl,-rpath,$BINS -o /tmp/quantize_ref
 *   build/tests/test_kquant_mix --write-models /tmp/kquant     # the GGUFs, from the test's fixed seeds
 *   /tmp/quantize_ref $BINS tests/data/kquant /tmp/kquant/k256.gguf /tmp/kquant/k64.gguf
 *
 * Called without arguments it prints this usage and exits 77 (nothing to do without llama.cpp).
 *
 * For MODEL.gguf and mixture M (lower case, "q4_k_m") it writes OUT/MODEL.M.tensors and OUT/MODEL.M.imatrix.tensors:
 * one line per tensor of llama.cpp's output, in its order: "NAME TYPE BYTES FNV1A64" (TYPE as ggml names it, the
 * hash of the tensor's data bytes in hex). The importance matrix gives column j of the 2-D tensor NAME the weight
 * 1 + ((37 j + 11 strlen(NAME)) mod 17) / 8 (tests/core/test_kquant_mix.cpp computes the same). */
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float importance(const char* name, int64_t j) {
    return 1.0f + (float)((37 * j + 11 * (int64_t)strlen(name)) % 17) / 8.0f;
}

static const struct {
    const char* name;
    enum llama_ftype ftype;
} kMixtures[] = {
    {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},     {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},
};

/* The importance matrix for every 2-D tensor of `path`, terminated by a null name; NULL on failure. */
static struct llama_model_imatrix_data* make_imatrix(const char* path) {
    struct ggml_context* meta = NULL;
    struct gguf_init_params gp = {true, &meta};
    struct gguf_context* g = gguf_init_from_file(path, gp);
    if (g == NULL) return NULL;
    const int64_t n = gguf_get_n_tensors(g);
    struct llama_model_imatrix_data* out = calloc((size_t)n + 1, sizeof *out);
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) {
        const char* name = gguf_get_tensor_name(g, i);
        const struct ggml_tensor* t = ggml_get_tensor(meta, name);
        if (t == NULL || ggml_n_dims(t) < 2) continue;
        const int64_t cols = t->ne[0];
        float* w = malloc((size_t)cols * sizeof *w);
        for (int64_t j = 0; j < cols; ++j) w[j] = importance(name, j);
        out[k].name = strdup(name);
        out[k].data = w;
        out[k].size = (size_t)cols;
        ++k;
    }
    gguf_free(g);
    ggml_free(meta);
    return out;
}

static uint64_t fnv1a64(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Lists the tensors of the GGUF at `path` into `out_path`. */
static int list_tensors(const char* path, const char* out_path) {
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context* g = gguf_init_from_file(path, gp);
    if (g == NULL) return fprintf(stderr, "%s: not a GGUF llama.cpp reads\n", path), 1;
    FILE* in = fopen(path, "rb");
    FILE* out = fopen(out_path, "w");
    if (in == NULL || out == NULL) return fprintf(stderr, "%s: cannot open\n", in ? out_path : path), 1;
    const size_t base = gguf_get_data_offset(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const size_t size = gguf_get_tensor_size(g, i);
        unsigned char* buf = malloc(size);
        if (fseek(in, (long)(base + gguf_get_tensor_offset(g, i)), SEEK_SET) != 0 || fread(buf, 1, size, in) != size)
            return fprintf(stderr, "%s: tensor %lld is truncated\n", path, (long long)i), 1;
        fprintf(out, "%s %s %zu %016llx\n", gguf_get_tensor_name(g, i), ggml_type_name(gguf_get_tensor_type(g, i)),
                size, (unsigned long long)fnv1a64(buf, size));
        free(buf);
    }
    fclose(in);
    fclose(out);
    gguf_free(g);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: quantize_ref BACKEND_DIR OUT_DIR MODEL.gguf...\n");
        return 77;
    }
    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    for (int a = 3; a < argc; ++a) {
        const char* model = argv[a];
        const char* slash = strrchr(model, '/');
        char stem[256];
        snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : model);
        char* dot = strstr(stem, ".gguf");
        if (dot) *dot = '\0';
        struct llama_model_imatrix_data* im = make_imatrix(model);
        if (im == NULL) return fprintf(stderr, "%s: cannot read\n", model), 1;
        for (size_t m = 0; m < sizeof kMixtures / sizeof kMixtures[0]; ++m) {
            for (int with_im = 0; with_im < 2; ++with_im) {
                char tmp[512], list[512];
                snprintf(tmp, sizeof tmp, "%s/%s.%s.tmp.gguf", argv[2], stem, kMixtures[m].name);
                snprintf(list, sizeof list, "%s/%s.%s%s.tensors", argv[2], stem, kMixtures[m].name,
                         with_im ? ".imatrix" : "");
                struct llama_model_quantize_params p = llama_model_quantize_default_params();
                p.nthread = 1;
                p.ftype = kMixtures[m].ftype;
                p.imatrix = with_im ? im : NULL;
                if (llama_model_quantize(model, tmp, &p) != 0)
                    return fprintf(stderr, "%s: llama_model_quantize %s failed\n", model, kMixtures[m].name), 1;
                if (list_tensors(tmp, list) != 0) return 1;
                remove(tmp);
                printf("%s\n", list);
            }
        }
    }
    llama_backend_free();
    return 0;
}
