// Workflows: what the command line (app/cli) and the workbench (ui/) both do, assembled once here — choose a
// tokenizer, read an evaluation text, evaluate one or several candidates against a base whose logits are computed
// once, profile activation saturation, and write / read an evaluation's report as JSON. The front ends gather the
// inputs and present the results; every number comes from the functions below.
// Contract: every function is synchronous and reports progress on the calling thread (false cancels:
// StatusCode::Cancelled); errors name the file (text, model, tokenizer, saved logits) or the JSON path. A model is
// opened to run in one place only (open_model_to_run: a model file, a folder or a knot). Reports do
// not depend on the thread count. Several candidates evaluated in one session give, field for field (seconds
// aside), the reports separate evaluations give, with one pass of the base over the text: the base's logits of the
// scored positions are kept in memory (n_tokens x n_vocab floats) for the candidates after the first.
#pragma once

#include "gkq/evaluate.h"
#include "gkq/metadata.h"
#include "gkq/progress.h"
#include "gkq/quantize.h"
#include "gkq/saturation.h"
#include "gkq/status.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

// ---- models -------------------------------------------------------------------------------------------------------

// A model loaded to run: its weights (open_weights) and the transformer loaded from them.
struct RunnableModel {
    std::string path;
    bool from_knot = false;
    ModelConfig config;                        // the config the transformer runs with
    Vocabulary vocab;                          // the model's or knot's own vocabulary; empty when it has none
    std::shared_ptr<Weights> weights;          // never null on success; the transformer shares it
    std::unique_ptr<Transformer> transformer;  // never null on success
    std::optional<Tokenizer> tokenizer;        // when open_model_to_run was given a TokenizerChoice
};

struct TokenizerChoice {
    std::string given;        // a llama2.c tokenizer.bin the user chose; empty: automatic
    std::string hint;         // how to choose one, appended (": " + hint) when automatic finds none
    std::string origin;       // the file the model was made from (the knot a decoded model came from); may be empty
    Vocabulary origin_vocab;  // the origin's vocabulary (a knot header's); may be empty
};

// A model file, a folder or a knot, loaded to run: the one place the workflows (and `gkq generate`) open one. With
// `tokenizer`, its tokenizer is chosen (choose_tokenizer) from the opened file's vocabulary and config before the
// weights load, so a missing or wrong tokenizer (a tokenizer.bin of another vocabulary size) fails at once.
Result<RunnableModel> open_model_to_run(const std::string& path, const TransformerOptions& options,
                                        const TokenizerChoice* tokenizer = nullptr);

// ---- tokenizer ----------------------------------------------------------------------------------------------------

// `given`, else the model's own vocabulary, else the origin's vocabulary, else the one tokenizer.bin / tok*.bin
// beside the model, else the one beside the origin (NotFound naming the origin when there is none). Without an
// origin this is tokenizer_for_model().
Result<Tokenizer> choose_tokenizer(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                   const TokenizerChoice& choice);

// ---- text ---------------------------------------------------------------------------------------------------------

// The bytes of a text file: NotFound "PATH: cannot open the text file", IoError "PATH: read failed".
Result<std::string> read_eval_text(const std::string& path);

// How a text is cut into what is scored; every report names it.
struct EvalProtocol {
    // false: llama.cpp's --kl-divergence protocol, the text as one token stream (separators scored as text, and
    // counted); true: the text split at the separators (which, with the whitespace around them, are not scored),
    // each document from BOS, windows never crossing documents.
    bool per_document = false;
    std::vector<std::string> separators;  // the document separators recognised
    int64_t n_separators = 0;             // their occurrences in the text
    int64_t n_documents = 1;              // documents scored (per-document: the non-empty ones)

    std::string name() const;      // "per-document" or "llama.cpp --kl-divergence"
    std::string describe() const;  // one line: what is scored, and what the separators are
};

// The separators recognised when none is given: "<|endoftext|>" and the tokenizer's EOS piece without the
// whitespace around it (llama2.c's tokenizer.bin spells EOS "\n</s>\n": the text between documents is "</s>").
std::vector<std::string> default_doc_separators(const Tokenizer& tokenizer);

// The text as scored: its tokens without BOS (the dummy prefix included), BOS, size and hash (one token stream).
EvalText make_eval_text(const Tokenizer& tokenizer, std::string_view text);
// The text as scored under `protocol`, whose counts are filled in. Per-document: the documents' tokens one after the
// other with EvalText::doc_starts, the bytes of the documents, and a hash over each document and its size (saved
// base logits of another cut do not match).
EvalText make_eval_text(const Tokenizer& tokenizer, std::string_view text, EvalProtocol& protocol);

// ---- evaluation ---------------------------------------------------------------------------------------------------

struct EvalRequest {
    // Model file, folder or knot: the base, or the one model of a perplexity run. Empty with base_logits: the base
    // model those logits were saved with (the file names it; an error when it names none or it is gone).
    std::string base;
    std::string text_path;  // UTF-8 text; the report's text label
    TokenizerChoice tokenizer;
    EvalOptions windows;
    int n_threads = 0;            // threads per matrix product; 0: all cores
    bool q8_activations = false;  // TransformerOptions::q8_activations, for the base and every candidate
    std::string save_base;        // write the base logits here after the first comparison that runs the base
    std::string base_logits;      // reuse these saved base logits instead of running the base
    bool per_document = false;    // the per-document protocol (EvalProtocol)
    std::string doc_separator;    // the one document separator; empty: default_doc_separators()
    // The default holds one model at a time: the base runs over the text first, its logits kept compactly
    // (BaseLogits: the top base_top_k a position), then the base is released and each candidate runs. exact_base:
    // both models in memory, window by window, KLD over the full distributions (the base runs once per candidate).
    bool exact_base = false;
    int64_t base_top_k = kDefaultBaseTopK;
};

// One evaluation: the models as given and the core's report.
struct EvalRun {
    std::string model;      // the base (or the single model)
    std::string candidate;  // empty for a perplexity run
    EvalProtocol protocol;  // how the text was cut
    EvalReport report;
};

// A text, its tokenizer and a loaded base, against which candidates are evaluated one after the other.
class EvalSession {
public:
    // Reads the text, loads the base (named by request.base_logits when request.base is empty), chooses the
    // tokenizer and tokenizes the text under the request's protocol, in that order.
    static Result<EvalSession> open(const EvalRequest& request);

    EvalSession(EvalSession&&) noexcept;
    EvalSession& operator=(EvalSession&&) noexcept;
    ~EvalSession();

    // Perplexity and bits per byte of the base alone.
    Result<EvalRun> perplexity(const ProgressFn& progress = {});
    // The candidate (model file, folder or knot) against the base. The base's compact logits are computed on the
    // first comparison, the base model released, and every later candidate reuses them (the base runs over the
    // text once per session); with request.base_logits they are read from that file and the base never runs;
    // request.save_base writes them after the first pass that computes them, naming the base model (its absolute
    // path). With request.exact_base both models run each window (the base stays loaded) and `keep_base` keeps the
    // compact logits of that pass for later candidates.
    Result<EvalRun> compare(const std::string& candidate, const ProgressFn& progress = {}, bool keep_base = false);

    int64_t base_passes() const;  // times the base ran over the text (perplexity runs included)
    const EvalText& text() const;
    const EvalProtocol& protocol() const;
    const std::string& base() const;  // the base model (request.base, or the one the saved logits name)

private:
    struct State;
    explicit EvalSession(std::unique_ptr<State> state);
    std::unique_ptr<State> m_state;
};

// Every candidate against the base in one session (the base runs once; progress split evenly); no candidates:
// the base's perplexity. `base_passes` (optional) receives the session's count.
Result<std::vector<EvalRun>> evaluate_candidates(const EvalRequest& request, const std::vector<std::string>& candidates,
                                                 const ProgressFn& progress = {}, int64_t* base_passes = nullptr);

// ---- output sensitivities (quantize --target-bpw --sensitivity-text) ------------------------------------------------

struct OutputProbeRequest {
    std::string text_path;  // the calibration text
    TokenizerChoice tokenizer;
    EvalOptions windows;     // as gkq eval's (0: its defaults)
    int n_threads = 0;       // threads per matrix product; 0: all cores
    int64_t max_tokens = 0;  // score only the text's first N tokens (0: all)
};

// A BpwOutputProbe over `model` (gkq/quantize.h: plan_target_bpw): the model runs over the text once and its logits
// are kept compactly (as gkq eval keeps a base's); each call then loads the model with that one matrix replaced by
// the given values and returns the mean KLD of its logits against the kept ones on the same windows. `model` must
// outlive the probe.
Result<BpwOutputProbe> make_output_probe(const Weights& model, const OutputProbeRequest& request,
                                         const ProgressFn& progress = {});

// ---- the report as JSON -------------------------------------------------------------------------------------------

// The document `gkq eval --json` prints (two-space indent, no trailing newline).
std::string eval_run_json(const EvalRun& run);
// Reads such a document back; every missing or mistyped field is an error naming `label` and the JSON path.
Result<EvalRun> parse_eval_run_json(std::string_view json, const std::string& label);

// ---- saturation profile -------------------------------------------------------------------------------------------

struct ProfileRequest {
    std::string model_label;  // the model as the user named it (the profile's "model"); empty: model.label()
    std::string text_path;    // calibration text
    TokenizerChoice tokenizer;
    int64_t max_tokens = 0;  // profile only the first N tokens, BOS included (0: all)
    double threshold = 1.0;  // saturated when |a| > threshold x the block's activation RMS
    double min_frequency = 0.0;
    int n_threads = 0;
};

// BOS + the text's tokens (the first max_tokens) through `model` (a model file or a knot), one threshold; the profile's
// model, text and the `gkq profile` command that reproduces it are filled in.
Result<SaturationProfile> profile_model(const Weights& model, const ProfileRequest& request,
                                        const ProgressFn& progress = {});

}  // namespace gkq
