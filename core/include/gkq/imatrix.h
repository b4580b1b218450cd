// Importance matrix: per-tensor statistics of the input activations of every matrix product of the forward pass —
// for each input column j of a weight W (rows, cols), the sum over the calibration tokens of x_j^2 and the number of
// tokens — computed and stored as llama.cpp's llama-imatrix does, so the files are interchangeable both ways.
//
// What llama-imatrix computes (tools/imatrix/imatrix.cpp of the pinned release), and so what compute_imatrix does:
//   - the text is tokenized with BOS (when the tokenizer adds one) and cut into n_chunks = n_tokens / n_ctx chunks
//     of n_ctx tokens (a partial last chunk is dropped; at least 2 * n_ctx tokens are required); the first token of
//     every chunk is replaced by BOS and each chunk runs from position 0 with an empty cache;
//   - every token of every chunk counts (llama-imatrix requests all logits, so no position is skipped; its
//     perplexity, not computed here, scores only the second half of each chunk);
//   - the tensors: every weight multiplied with the activations inside the blocks (blk.N.attn_q / attn_k / attn_v /
//     attn_output / ffn_gate / ffn_up / ffn_down.weight, GGUF names), plus output.weight only with process_output
//     (a classifier tied to token_embd is never collected, nor is the embedding lookup);
//   - per tensor: sums[j] += x_j * x_j in float32, token after token in text order, and count += tokens.
// One rule of llama-imatrix is not repeated: it skips a matrix product over fewer than 16 tokens (a micro-batch of its
// scheduler, at most 512 tokens), which cannot happen when 16 <= n_ctx <= 512 divides its batch (the defaults, 512
// and 2048, or -b n_ctx); gkq counts every token.
// The GGUF file (llama.cpp's default): general.type = "imatrix", imatrix.datasets (string array), imatrix.chunk_count
// and imatrix.chunk_size (u32), then per entry, in byte order of the names, "<name>.in_sum2" (f32, cols x n_mat) and
// "<name>.counts" (f32, 1 x n_mat). The legacy .dat file: i32 entry count, then per entry i32 name length, name, i32
// ncall, i32 n_values, n_values f32 of (sum / count) * ncall; then i32 chunk count, i32 length and the dataset name.
// llama-quantize's importance of column j is sums[j] / count (GGUF) or value[j] / ncall (legacy).
// Contract: readers check every count, size and offset against the file and fail with Corrupt naming the file and
// the entry or field; writers go through AtomicFile. Nothing here depends on the thread count.
#pragma once

#include "gkq/arch.h"
#include "gkq/metadata.h"
#include "gkq/progress.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

class Transformer;
class Weights;

struct ImatrixEntry {
    std::string name;             // the weight's GGUF name, "blk.0.attn_q.weight"
    int64_t n_cols = 0;           // input columns of the weight
    std::vector<float> sums;      // (n_mat, n_cols) sum of x^2 per column (legacy: (sum / count) * ncall)
    std::vector<int64_t> counts;  // (n_mat) tokens seen (legacy: one value, ncall)
};

enum class ImatrixFormat : uint8_t { Gguf, Legacy };

struct Imatrix {
    ImatrixFormat format = ImatrixFormat::Gguf;  // how sums and counts are to be read (see ImatrixEntry)
    std::vector<ImatrixEntry> entries;           // ascending by name (byte order), names unique
    std::vector<std::string> datasets;           // the calibration texts, as named when computed
    int32_t chunk_count = 0;                     // chunks the statistics were computed over
    int32_t chunk_size = 0;                      // tokens per chunk (n_ctx); 0 in a legacy file

    const ImatrixEntry* find(std::string_view name) const;
};

struct ImatrixOptions {
    int64_t n_ctx = 512;          // tokens per chunk (llama-imatrix's default --ctx-size)
    int64_t n_chunks = -1;        // at most this many chunks; -1: every whole chunk of the text
    bool process_output = false;  // also collect output.weight (llama-imatrix --process-output)
    std::string dataset;          // recorded in imatrix.datasets (the text file as given)
};

// Runs `transformer` over `tokens` (the text as tokenized, BOS included when the tokenizer adds one) in chunks of
// options.n_ctx and collects the statistics. `bos` replaces each chunk's first token (-1: keep it). InvalidArgument
// when the text has fewer than 2 * n_ctx tokens or n_ctx exceeds the transformer's context, or when a statistic is
// not finite (naming the tensor); progress after every chunk (false: Cancelled).
struct GramSet;
// With `gram`, the same pass also collects the activation Gram matrices into it (see GramSet).
Result<Imatrix> compute_imatrix(Transformer& transformer, const std::vector<int32_t>& tokens, int32_t bos,
                                const ImatrixOptions& options, const ProgressFn& progress = {},
                                GramSet* gram = nullptr);

// Reads a GGUF imatrix or, when the file is not GGUF, a legacy .dat one (llama.cpp's common_imatrix_load rules).
Result<Imatrix> read_imatrix(const std::string& path);
// Serializes in llama.cpp's layout, byte for byte what llama-imatrix writes for the same statistics.
// InvalidArgument when `format` differs from imatrix.format and no conversion exists (see write_imatrix).
Result<std::string> imatrix_bytes(const Imatrix& imatrix, ImatrixFormat format);
// Writes the file atomically. A GGUF-form imatrix writes either format (legacy: ncall = ceil(max count /
// chunk_size), as llama-imatrix --output-format dat); a legacy one only legacy.
Status write_imatrix(const Imatrix& imatrix, const std::string& path, ImatrixFormat format);

// The per-column importance llama-quantize passes to ggml's quantizers for the weight `name` with `n_cols` columns
// (one matrix): sums / count, columns of a zero count 1 (GGUF); value / ncall (legacy). NotFound when the imatrix has
// no such entry; InvalidArgument naming the tensor, the file's and the model's column counts when they differ.
Result<std::vector<float>> imatrix_importance(const Imatrix& imatrix, std::string_view name, int64_t n_cols);

// The GGUF name an imatrix entry has for the weight (role, layer) of a model of `arch`; empty for roles that are never
// collected. Each part of a fused tensor has the fused tensor's entry (Phi-3's q, k and v: blk.N.attn_qkv.weight), as
// llama-imatrix records its one product.
std::string imatrix_tensor_name(const ArchSpec& arch, TensorRole role, int32_t layer);

// An imatrix matched with the matrices of a model, for quantize (QuantizeOptions::importance and the fields beside it).
struct ModelImportance {
    std::vector<std::vector<float>> by_tensor;  // (n_tensors) each tensor's per-column importance, or empty
    int64_t n_weighted = 0;                     // tensors given importance
    std::vector<std::string> without;           // the model's collected matrices the imatrix has no entry for
    std::string file_name;                      // the file's name without its folder
    std::string sha256;                         // of the file's bytes, lower-case hex
    std::string command;                        // "--imatrix NAME sha256:HEX", for the knot's command line
    Metadata metadata;  // llama-quantize's keys (quantize.imatrix.file, .dataset, .entries_count, .chunks_count)
                        // and gkq.imatrix.sha256
};

// Reads the imatrix `path` and gives each matrix of `weights` whose GGUF name (imatrix_tensor_name of its role and
// layer) has an entry the importance llama-quantize would use. Errors name the file: not an imatrix (Corrupt), an
// entry that names no matrix of the model, or an entry whose column count differs from its matrix's
// (InvalidArgument, naming the entry and both counts).
Result<ModelImportance> load_model_importance(const std::string& path, const Weights& weights);

// ---- activation Gram matrices (for the whitened SVD, CodecParams::whiten) ----------------------------------------
// Per distinct matrix input, G = X^T X (cols, cols) summed in double over every calibration token of the pass above
// (each token's outer product x x^T, in text order), and the token count. Matrices that read the same input share
// one entry: attn_k and attn_v read attn_q's (the attention-normed x), ffn_up reads ffn_gate's (the FFN-normed x);
// attn_output and ffn_down have their own; output.weight only with process_output. All entries are held at once
// while collecting: gram_collect_bytes says how much (for a 4096-wide model, 3 x 4096^2 + 11008^2 doubles = 1.3 GiB
// per layer, so such models need the layers streamed, which is not implemented).
// The file (ours): GGUF version 3, general.type = "gkq.gram", gram.datasets (string array), gram.chunk_count and
// gram.chunk_size (u32), then per entry, in byte order of the names, "<name>.gram" (F64, cols x cols, symmetric)
// and "<name>.count" (F64, 1 value: the tokens summed); <name> is the imatrix name of the entry's matrix.
struct GramEntry {
    std::string name;          // "blk.0.attn_q.weight": the input of attn_q (and attn_k, attn_v)
    int64_t n_cols = 0;        // input columns
    int64_t count = 0;         // tokens summed
    std::vector<double> gram;  // (n_cols, n_cols) row-major, symmetric
};

struct GramSet {
    std::vector<GramEntry> entries;  // ascending by name (byte order), names unique
    std::vector<std::string> datasets;
    int32_t chunk_count = 0;
    int32_t chunk_size = 0;

    const GramEntry* find(std::string_view name) const;
};

// The entry name whose input the matrix (role, layer) reads (K, V -> attn_q; FfnUp -> ffn_gate; the other collected
// roles their own imatrix name; a fused tensor's parts its one entry); empty for roles that are never collected.
std::string gram_input_name(const ArchSpec& arch, TensorRole role, int32_t layer);

// Bytes the Gram matrices of `set` occupy (8 n_cols^2 per entry): the collection's peak beyond the model itself.
uint64_t gram_collect_bytes(const GramSet& set);

Result<GramSet> read_gram(const std::string& path);
Status write_gram(const GramSet& set, const std::string& path);

// The Gram file matched with the matrices of a model, for quantize (QuantizeOptions::gram).
struct ModelGram {
    std::vector<std::shared_ptr<const std::vector<double>>> by_tensor;  // (n_tensors) null where no entry
    int64_t n_matrices = 0;                                             // matrices given a Gram matrix
    std::string sha256;                                                 // of the file's bytes
    std::string command;                                                // "--gram NAME sha256:HEX"
};

// Errors name the file: not a Gram file (Corrupt), an entry naming no input of the model, or a column count that
// differs from its matrices' (InvalidArgument, naming the entry and both counts).
Result<ModelGram> load_model_gram(const std::string& path, const Weights& weights);

}  // namespace gkq
