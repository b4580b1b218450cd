// The workflows of gkq/workflows.h: tokenizer choice, the evaluation text, the evaluation session (base logits
// computed once for any number of candidates) and the saturation profile of a calibration text.
#include "gkq/workflows.h"

#include "gkq/model_file.h"
#include "gkq/transformer.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

namespace gkq {

// ---- tokenizer ----------------------------------------------------------------------------------------------------

namespace {

Result<Tokenizer> with_hint(Result<Tokenizer> t, const TokenizerChoice& c) {
    if (!t && c.given.empty() && !c.hint.empty()) return error(t.status().code(), t.status().message() + ": " + c.hint);
    return t;
}

}  // namespace

Result<Tokenizer> choose_tokenizer(const std::string& model_path, const Vocabulary& vocab, int64_t vocab_size,
                                   const TokenizerChoice& c) {
    const bool has_origin = !c.origin.empty() || !c.origin_vocab.empty();
    if (!c.given.empty() || !vocab.empty() || !has_origin)
        return with_hint(tokenizer_for_model(model_path, vocab, vocab_size, c.given), c);
    if (!c.origin_vocab.empty()) return Tokenizer::from_vocabulary(c.origin_vocab, c.origin);
    auto beside_model = tokenizer_for_model(model_path, vocab, vocab_size, "");
    if (beside_model || c.origin.empty()) return with_hint(std::move(beside_model), c);
    auto beside_origin = tokenizer_for_model(c.origin, {}, vocab_size, "");
    if (beside_origin) return beside_origin;
    // The model is a stand-in (a knot decoded to a temporary file): the error names what the user opened.
    return with_hint(error(StatusCode::NotFound, c.origin + ": no vocabulary and not exactly one tokenizer.bin / "
                                                            "tok*.bin beside it"),
                     c);
}

// ---- text ---------------------------------------------------------------------------------------------------------

Result<std::string> read_eval_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::NotFound, path + ": cannot open the text file");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return error(StatusCode::IoError, path + ": read failed");
    return ss.str();
}

EvalText make_eval_text(const Tokenizer& tokenizer, std::string_view text) {
    EvalText et;
    et.tokens = tokenizer.encode(text, false, false);
    et.bos_id = tokenizer.bos_id();
    et.n_bytes = text.size();
    et.text_hash = fnv1a64(text.data(), text.size());
    return et;
}

// ---- evaluation ---------------------------------------------------------------------------------------------------

Result<LoadedModel> open_model_to_run(const std::string& path, const TransformerOptions& options) {
    return load_model(path, options);
}

namespace {

// Evaluations run 64 positions per forward_batch block.
Result<LoadedModel> open_runnable(const std::string& path, int n_threads) {
    TransformerOptions options;
    options.n_threads = n_threads;
    options.max_batch = 64;
    return open_model_to_run(path, options);
}

}  // namespace

struct EvalSession::State {
    EvalRequest request;
    LoadedModel base;
    EvalText text;
    std::optional<BaseLogits> kept;  // the base's logits, once computed (or read from request.base_logits)
    bool saved = false;              // request.save_base written
    int64_t base_passes = 0;
};

EvalSession::EvalSession(std::unique_ptr<State> state) : m_state(std::move(state)) {}
EvalSession::EvalSession(EvalSession&&) noexcept = default;
EvalSession& EvalSession::operator=(EvalSession&&) noexcept = default;
EvalSession::~EvalSession() = default;

Result<EvalSession> EvalSession::open(const EvalRequest& request) {
    auto text = read_eval_text(request.text_path);
    if (!text) return text.status();
    auto base = open_runnable(request.base, request.n_threads);
    if (!base) return base.status();
    auto tokenizer = choose_tokenizer(base->path, base->vocab, base->config.vocab_size, request.tokenizer);
    if (!tokenizer) return tokenizer.status();
    auto state = std::make_unique<State>();
    state->request = request;
    state->text = make_eval_text(*tokenizer, *text);
    state->base = std::move(base).value();
    return EvalSession(std::move(state));
}

int64_t EvalSession::base_passes() const {
    return m_state->base_passes;
}

const EvalText& EvalSession::text() const {
    return m_state->text;
}

Result<EvalRun> EvalSession::perplexity(const ProgressFn& progress) {
    State& s = *m_state;
    auto report = evaluate_perplexity(*s.base.transformer, s.text, s.request.windows, progress);
    if (!report) return report.status();
    ++s.base_passes;
    report->text_label = s.request.text_path;
    return EvalRun{s.request.base, "", std::move(report).value()};
}

Result<EvalRun> EvalSession::compare(const std::string& candidate, const ProgressFn& progress, bool keep_base) {
    State& s = *m_state;
    auto cand = open_runnable(candidate, s.request.n_threads);
    if (!cand) return cand.status();
    if (!s.kept && !s.request.base_logits.empty()) {
        auto resolved = resolve_eval_options(s.request.windows,
                                             std::min(s.base.config.context_length, s.base.transformer->n_context()));
        if (!resolved) return resolved.status();
        auto saved = load_base_logits(s.request.base_logits, s.text, cand->config.vocab_size, *resolved);
        if (!saved) return saved.status();
        s.kept = std::move(saved).value();
    }
    Result<EvalReport> report = error(StatusCode::Internal, "eval: not run");
    if (s.kept) {
        report = evaluate_compare_saved(*s.kept, *cand->transformer, progress);
    } else {
        const bool keep = keep_base || !s.request.save_base.empty();
        BaseLogits logits;
        report = evaluate_compare(*s.base.transformer, *cand->transformer, s.text, s.request.windows, progress,
                                  keep ? &logits : nullptr);
        if (!report) return report.status();
        ++s.base_passes;
        if (!s.request.save_base.empty() && !s.saved) {
            logits.path = s.request.save_base;
            if (Status st = save_base_logits(s.request.save_base, logits); !st) return st;
            s.saved = true;
        }
        if (keep_base) {
            logits.path = s.request.base;  // errors of later comparisons name the base
            s.kept = std::move(logits);
        }
    }
    if (!report) return report.status();
    report->text_label = s.request.text_path;
    return EvalRun{s.request.base, candidate, std::move(report).value()};
}

Result<std::vector<EvalRun>> evaluate_candidates(const EvalRequest& request, const std::vector<std::string>& candidates,
                                                 const ProgressFn& progress, int64_t* base_passes) {
    auto session = EvalSession::open(request);
    if (!session) return session.status();
    std::vector<EvalRun> runs;
    if (candidates.empty()) {
        auto r = session->perplexity(progress);
        if (!r) return r.status();
        runs.push_back(std::move(r).value());
    }
    const double share = candidates.empty() ? 1.0 : 1.0 / static_cast<double>(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
        const double from = static_cast<double>(i) * share;
        const ProgressFn part = [&progress, from, share](double f, std::string_view what) {
            return report_progress(progress, from + share * f, what);
        };
        auto r = session->compare(candidates[i], part, i + 1 < candidates.size());
        if (!r) return r.status();
        runs.push_back(std::move(r).value());
    }
    if (base_passes != nullptr) *base_passes = session->base_passes();
    return runs;
}

// ---- saturation profile -------------------------------------------------------------------------------------------

Result<SaturationProfile> profile_model(const ModelFile& model, const ProfileRequest& request,
                                        const ProgressFn& progress) {
    const std::string label = request.model_label.empty() ? model.path() : request.model_label;
    auto tokenizer = choose_tokenizer(model.path(), model.vocabulary(), model.config().vocab_size, request.tokenizer);
    if (!tokenizer) return tokenizer.status();
    auto text = read_eval_text(request.text_path);
    if (!text) return text.status();
    std::vector<int32_t> tokens = tokenizer->encode(*text, true, false);
    if (request.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > request.max_tokens)
        tokens.resize(static_cast<size_t>(request.max_tokens));
    if (!report_progress(progress, 0.0, "loading the model")) return error(StatusCode::Cancelled, "cancelled");
    TransformerOptions options;
    options.n_threads = request.n_threads;
    auto transformer = Transformer::load(model, options);
    if (!transformer) return transformer.status();
    SaturationOptions so;
    so.thresholds = {request.threshold};
    so.min_frequency = request.min_frequency;
    auto profiles = profile_saturation(*transformer, tokens, so, progress);
    if (!profiles) return profiles.status();
    SaturationProfile p = std::move(profiles->front());
    p.model = label;
    p.text = request.text_path;
    std::ostringstream cmd;  // the command that reproduces this profile
    cmd << "gkq profile " << label << " --text " << request.text_path << " --threshold " << request.threshold
        << " --min-frequency " << request.min_frequency;
    if (request.max_tokens > 0) cmd << " --max-tokens " << request.max_tokens;
    if (!request.tokenizer.given.empty()) cmd << " --tokenizer " << request.tokenizer.given;
    p.command = cmd.str();
    return p;
}

}  // namespace gkq
