// Evaluation: how much worse is a compressed model? Over sliding windows of a text, the next-token distributions of
// a base and a candidate model are compared with the quantities of llama.cpp's `perplexity --kl-divergence`
// report: mean KL divergence (base || candidate) with its standard error, median / 99th / 99.9th percentile and
// maximum KLD, top-token agreement ("same top p"), RMS of the change of the correct token's probability, perplexity
// of both and their ratio — plus bits per byte of both.
//
// Windows: each window runs BOS + up to n_ctx - 1 text tokens at positions 0..n_ctx-1 and predicts the n_ctx
// tokens after BOS; windows start every `stride` text tokens; a window scores only the tokens no earlier window
// scored (with stride n_ctx / 2: all of the first window, then the second half of each later one, the first
// half being context). Every text token is scored exactly once, so bits per byte = total NLL in bits / bytes of
// the text.
// Statistics follow llama.cpp's definitions: mean ± sqrt(var / (n - 1)) with var = E[x^2] - E[x]^2; percentiles
// interpolate linearly between sorted values at fraction * (n - 1); PPL(Q)/PPL(base) = exp(mean(nll_Q - nll_base))
// with the SE of ln ratio propagated to the ratio; RMS dp = sqrt(mean(dp^2)), SE by the delta method.
// Contract: every sum runs in token order in double, and the transformer's logits do not depend on the thread
// count, so a report is identical whatever the threads. Progress is reported per window; returning false stops
// with StatusCode::Cancelled. Base logits can be saved once (BaseLogits file, written atomically) and reused:
// reading checks magic, version, sizes, the vocabulary, windowing and hashes of the tokens and of the text, and
// every error names the file.
#pragma once

#include "gkq/progress.h"
#include "gkq/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

class Transformer;
struct BaseLogits;

struct EvalOptions {
    int64_t n_ctx = 0;   // positions per window, BOS included; 0: the model's context length, at most 512
    int64_t stride = 0;  // text tokens between window starts, 1..n_ctx; 0: n_ctx / 2
};

// The scored text: its tokens (no BOS; the tokenizer's dummy prefix included), BOS, and its size in bytes.
struct EvalText {
    std::vector<int32_t> tokens;
    // The per-document protocol: the index in `tokens` where each document starts (ascending, the first 0). Windows
    // then never cross a document boundary, so every document is scored from BOS. Empty: one token stream
    // (llama.cpp's --kl-divergence protocol), windows running across whatever separators the text holds.
    std::vector<int64_t> doc_starts;
    int32_t bos_id = 1;
    uint64_t n_bytes = 0;    // UTF-8 bytes of the text
    uint64_t text_hash = 0;  // FNV-1a 64 of the text bytes
};

uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

struct PerplexityStats {
    int64_t n_tokens = 0;
    uint64_t n_bytes = 0;
    double mean_nll = 0.0;  // nats per token
    double mean_nll_se = 0.0;
    double perplexity = 0.0;     // exp(mean_nll)
    double bits_per_byte = 0.0;  // sum nll / ln 2 / n_bytes
};

struct CompareStats {
    PerplexityStats base;
    PerplexityStats candidate;
    double mean_kld = 0.0;
    double mean_kld_se = 0.0;
    double median_kld = 0.0;
    double kld_p99 = 0.0;
    double kld_p999 = 0.0;
    double max_kld = 0.0;
    double same_top = 0.0;  // fraction of tokens whose argmax agrees (ties: the lowest id)
    double same_top_se = 0.0;
    double rms_delta_p = 0.0;  // sqrt(mean((p_Q(correct) - p_base(correct))^2)), a probability (not %)
    double rms_delta_p_se = 0.0;
    double ln_ppl_ratio = 0.0;  // mean(nll_Q - nll_base)
    double ln_ppl_ratio_se = 0.0;
    double ppl_ratio = 0.0;  // exp(ln_ppl_ratio) = PPL(Q) / PPL(base)
    double ppl_ratio_se = 0.0;
    // Over what the KLD was summed: the vocabulary size and the base tokens kept a position (BaseLogits::top_k, the
    // rest as one bucket). kld_top_k == n_vocab (the exact path, or a compact base that kept every token): KLD over
    // the whole distribution.
    int64_t n_vocab = 0;
    int64_t kld_top_k = 0;
    bool kld_exact() const { return kld_top_k >= n_vocab; }
};

// Running sums over scored tokens. add() takes each model's logits for one position and the token that follows.
class EvalAccumulator {
public:
    explicit EvalAccumulator(bool compare);

    void add_single(const float* logits, int64_t n_vocab, int32_t target);
    void add_pair(const float* base_logits, const float* candidate_logits, int64_t n_vocab, int32_t target);
    // Row `row` of compact base logits against the candidate's full logits (n_vocab = base.n_vocab).
    void add_kept(const BaseLogits& base, int64_t row, const float* candidate_logits, int32_t target);

    int64_t n_tokens() const { return m_count; }
    PerplexityStats perplexity(uint64_t n_bytes) const;  // of the base (or single) model
    CompareStats compare(uint64_t n_bytes) const;        // needs a comparing accumulator

private:
    bool m_compare;
    int64_t m_count = 0;
    double m_nll_b = 0, m_nll_b2 = 0, m_nll_q = 0, m_nll_q2 = 0;
    double m_diff = 0, m_diff2 = 0;
    double m_kld = 0, m_kld2 = 0;
    double m_dp2 = 0, m_dp4 = 0;
    int64_t m_same_top = 0;
    std::vector<float> m_klds;
    std::vector<double> m_scratch_b, m_scratch_q;
    std::vector<uint8_t> m_kept;
};

struct EvalReport {
    std::string text_label;
    int64_t n_ctx = 0;
    int64_t stride = 0;
    int64_t n_windows = 0;
    int64_t n_tokens = 0;
    uint64_t n_bytes = 0;
    bool compared = false;
    PerplexityStats single;  // when !compared
    CompareStats compare;    // when compared
    double seconds = 0.0;
};

// The base's logits, kept compactly: for each scored position (token order) the top_k largest logits (ties: the
// lowest id), stored in ascending id order, the logit of the token that follows, the log-sum-exp of all n_vocab
// logits (log Z, in double, summed in id order as the statistics do) and the log of the probability mass of the
// tokens not kept (-inf when top_k covers the vocabulary). From these the base's NLL, its top token and its
// probability of the correct token are exact; KLD (base || candidate) is computed over the kept tokens plus one
// bucket for the rest (the coarsened distributions' divergence: a lower bound of the full one, equal to it when
// top_k >= n_vocab; docs/eval.md gives the measured difference).
// The file (version 3, written atomically):
//   offset 0: magic "GKQBASE\0", u32 version 3, u32 n_vocab, u32 n_ctx, u32 stride, u64 n_tokens, i32 bos,
//   u32 n_model_bytes, u64 n_bytes, u64 token hash (FNV-1a of the int32 tokens), u64 text hash; at offset 64 the
//   base model's path (n_model_bytes of UTF-8, at most 4096); then u32 top_k, u32 0; the n_tokens int32 tokens;
//   n_tokens f64 log Z; n_tokens f64 log rest mass; n_tokens f32 target logits; (n_tokens, top_k) int32 ids;
//   (n_tokens, top_k) f32 logits. All little-endian; the file is exactly that long. Versions 1 and 2 (full float32
//   logits, (n_tokens, n_vocab) after the tokens; version 1 without the model path) are still read and compacted
//   as they are read.
constexpr int64_t kDefaultBaseTopK = 512;

struct BaseLogits {
    std::string path;
    std::string model;  // the base model the logits came from, as given to eval; empty in version-1 files
    int64_t n_vocab = 0;
    int64_t n_ctx = 0;
    int64_t stride = 0;
    int64_t top_k = 0;  // tokens kept per position, 1..n_vocab (0 before the first row: kDefaultBaseTopK)
    EvalText text;
    std::vector<double> log_z;        // (n_tokens)
    std::vector<double> rest_logp;    // (n_tokens) log of the mass outside the kept tokens; -inf: none
    std::vector<float> target_logit;  // (n_tokens) the logit of the token that follows
    std::vector<int32_t> ids;         // (n_tokens, top_k) ascending within a row
    std::vector<float> logits;        // (n_tokens, top_k)

    int64_t n_rows() const { return static_cast<int64_t>(log_z.size()); }
    // Appends one position's full logits (n_vocab of them) and the token that follows, kept as described above.
    void add_row(const float* full_logits, int32_t target);
    uint64_t bytes() const;  // the memory the kept rows take
};

Status save_base_logits(const std::string& path, const BaseLogits& b);
// The base model a saved file names (empty for a version-1 file, which names none); the header alone is read.
Result<std::string> base_logits_model(const std::string& path);
// Reads and checks the file against the run it is to be reused in: every mismatch is an error naming the file.
// A version 1 / 2 file is compacted to `top_k` tokens a position (0: kDefaultBaseTopK) as it is read.
Result<BaseLogits> load_base_logits(const std::string& path, const EvalText& text, int64_t n_vocab,
                                    const EvalOptions& options, int64_t top_k = 0);

// Resolves defaults and checks n_ctx / stride against the model's context.
Result<EvalOptions> resolve_eval_options(const EvalOptions& options, int64_t context_length);

// Perplexity and bits per byte of one model.
Result<EvalReport> evaluate_perplexity(Transformer& model, const EvalText& text, const EvalOptions& options,
                                       const ProgressFn& progress = {});

// Base against candidate with both models' full logits, window by window (both models in memory: the exact
// path). `save_base` (optional) receives the base logits, compacted to its top_k (0: kDefaultBaseTopK).
Result<EvalReport> evaluate_compare(Transformer& base, Transformer& candidate, const EvalText& text,
                                    const EvalOptions& options, const ProgressFn& progress = {},
                                    BaseLogits* save_base = nullptr);

// The base alone over every window, its logits compacted to top_k tokens a position (0: kDefaultBaseTopK): what
// evaluate_compare_saved needs, so that a comparison holds one model at a time.
Result<BaseLogits> compute_base_logits(Transformer& base, const EvalText& text, const EvalOptions& options,
                                       int64_t top_k = 0, const ProgressFn& progress = {});

// Saved base logits against a candidate (the text's tokens must be the saved ones).
Result<EvalReport> evaluate_compare_saved(const BaseLogits& base, Transformer& candidate,
                                          const ProgressFn& progress = {});

}  // namespace gkq
