// The workflows of gkq/workflows.h: tokenizer choice, the evaluation text, the evaluation session (base logits
// computed once for any number of candidates) and the saturation profile of a calibration text.
#include "gkq/workflows.h"

#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/transformer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

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

namespace {

// Control characters as \n, \t, \xNN, so that a description stays one line.
std::string shown(const std::string& s) {
    std::string out;
    for (unsigned char ch : s) {
        if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch < 0x20 || ch == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out += buf;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out;
}

// The earliest occurrence at or after `from` of any separator (the longest one there): (position, length), or npos.
std::pair<size_t, size_t> find_separator(std::string_view text, const std::vector<std::string>& seps, size_t from) {
    std::pair<size_t, size_t> best{std::string_view::npos, 0};
    for (const std::string& s : seps) {
        const size_t at = text.find(s, from);
        if (at != std::string_view::npos && (at < best.first || (at == best.first && s.size() > best.second)))
            best = {at, s.size()};
    }
    return best;
}

std::string_view trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const size_t a = s.find_first_not_of(ws);
    if (a == std::string_view::npos) return {};
    return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

}  // namespace

std::string EvalProtocol::name() const {
    return per_document ? "per-document" : "llama.cpp --kl-divergence";
}

std::string EvalProtocol::describe() const {
    std::string seps;
    for (const std::string& x : separators) seps += (seps.empty() ? "'" : ", '") + shown(x) + "'";
    if (per_document)
        return "per-document: " + std::to_string(n_documents) + " documents split at " + seps +
               " (separators and the whitespace around them not scored), BOS at each document's start, windows "
               "never cross documents";
    std::string s = "llama.cpp --kl-divergence: the text as one token stream, BOS at each window's start";
    if (n_separators > 0)
        s += "; its " + std::to_string(n_separators) + " document separators (" + seps +
             ") are scored as text and documents get no BOS: --per-document scores each document on its own";
    return s;
}

std::vector<std::string> default_doc_separators(const Tokenizer& tokenizer) {
    std::vector<std::string> seps = {"<|endoftext|>"};
    const std::string eos(trim(tokenizer.piece(tokenizer.eos_id())));
    if (!eos.empty() && eos != seps.front()) seps.push_back(eos);
    return seps;
}

EvalText make_eval_text(const Tokenizer& tokenizer, std::string_view text) {
    EvalProtocol stream;
    return make_eval_text(tokenizer, text, stream);
}

EvalText make_eval_text(const Tokenizer& tokenizer, std::string_view text, EvalProtocol& protocol) {
    EvalText et;
    et.bos_id = tokenizer.bos_id();
    std::vector<std::string_view> docs;
    protocol.n_separators = 0;
    for (size_t from = 0;;) {
        const auto [at, len] = find_separator(text, protocol.separators, from);
        docs.push_back(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
        if (at == std::string_view::npos) break;
        ++protocol.n_separators;
        from = at + len;
    }
    if (!protocol.per_document) {
        protocol.n_documents = 1;
        et.tokens = tokenizer.encode(text, false, false);
        et.n_bytes = text.size();
        et.text_hash = fnv1a64(text.data(), text.size());
        return et;
    }
    // The hash covers each document and where it ends, so saved base logits of another cut do not match.
    et.text_hash = fnv1a64("per-document", 12);
    protocol.n_documents = 0;
    for (std::string_view d : docs) {
        d = trim(d);
        if (d.empty()) continue;
        ++protocol.n_documents;
        et.doc_starts.push_back(static_cast<int64_t>(et.tokens.size()));
        const std::vector<int32_t> t = tokenizer.encode(d, false, false);
        et.tokens.insert(et.tokens.end(), t.begin(), t.end());
        et.n_bytes += d.size();
        et.text_hash = fnv1a64(d.data(), d.size(), et.text_hash);
        const uint64_t size = d.size();
        et.text_hash = fnv1a64(&size, sizeof size, et.text_hash);
    }
    return et;
}

// ---- evaluation ---------------------------------------------------------------------------------------------------

Result<RunnableModel> open_model_to_run(const std::string& path, const TransformerOptions& options,
                                        const TokenizerChoice* tokenizer) {
    auto opened = open_weights(path);
    if (!opened) return opened.status();
    std::shared_ptr<Weights> weights = std::move(*opened);
    // An architecture the forward pass cannot compute is refused first, naming what it lacks.
    if (const std::string problem = architecture_problem(weights->config()); !problem.empty())
        return error(StatusCode::Unsupported, weights->label() + ": " + problem);
    std::optional<Tokenizer> tok;
    if (tokenizer != nullptr) {  // from the header: nothing of the weights read yet
        auto chosen = choose_tokenizer(path, weights->vocabulary(), weights->config().vocab_size, *tokenizer);
        if (!chosen) return chosen.status();
        tok.emplace(std::move(*chosen));
    }
    auto t = Transformer::load(std::shared_ptr<const Weights>(weights), options);  // a model file stays mapped
    if (!t) return t.status();
    RunnableModel m;
    m.tokenizer = std::move(tok);
    m.path = path;
    m.from_knot = weights->kind() != "model-file";
    m.config = t->config();
    m.vocab = weights->vocabulary();
    m.weights = std::move(weights);
    m.transformer = std::make_unique<Transformer>(std::move(*t));
    return m;
}

namespace {

// Evaluations run 64 positions per forward_batch block.
Result<RunnableModel> open_runnable(const std::string& path, const EvalRequest& request,
                                    const TokenizerChoice* tokenizer = nullptr) {
    TransformerOptions options;
    options.n_threads = request.n_threads;
    options.q8_activations = request.q8_activations;
    options.release_mapped = true;  // one block of a mapped model resident at a time
    options.max_batch = 64;
    return open_model_to_run(path, options, tokenizer);
}

}  // namespace

struct EvalSession::State {
    EvalRequest request;
    RunnableModel base;        // released (transformer and weights) once the compact base logits are computed
    int64_t base_context = 0;  // the base's usable context, kept past its release
    EvalText text;
    EvalProtocol protocol;
    std::optional<BaseLogits> kept;  // the base's logits, once computed (or read from request.base_logits)
    bool saved = false;              // request.save_base written
    int64_t base_passes = 0;
};

EvalSession::EvalSession(std::unique_ptr<State> state) : m_state(std::move(state)) {}
EvalSession::EvalSession(EvalSession&&) noexcept = default;
EvalSession& EvalSession::operator=(EvalSession&&) noexcept = default;
EvalSession::~EvalSession() = default;

namespace {

// The base model saved base logits name (version 2 files), when the request names none.
Result<std::string> base_named_by(const std::string& base_logits) {
    auto named = base_logits_model(base_logits);
    if (!named) return named.status();
    if (named->empty())
        return error(StatusCode::InvalidArgument, base_logits +
                                                      " does not name its base model (saved by an older gkq): pass "
                                                      "--base MODEL, the model it was saved with");
    std::error_code ec;
    if (!std::filesystem::exists(*named, ec))
        return error(StatusCode::NotFound, base_logits + " was saved with base model " + *named +
                                               ", which is not there: pass --base MODEL with that model");
    return named;
}

}  // namespace

Result<EvalSession> EvalSession::open(const EvalRequest& request) {
    auto state = std::make_unique<State>();
    state->request = request;
    if (request.base.empty() && !request.base_logits.empty()) {
        auto named = base_named_by(request.base_logits);
        if (!named) return named.status();
        state->request.base = std::move(named).value();
    }
    auto text = read_eval_text(request.text_path);
    if (!text) return text.status();
    auto base = open_runnable(state->request.base, request, &request.tokenizer);
    if (!base) return base.status();
    const Tokenizer* tokenizer = &*base->tokenizer;
    state->protocol.per_document = request.per_document;
    state->protocol.separators = request.doc_separator.empty() ? default_doc_separators(*tokenizer)
                                                               : std::vector<std::string>{request.doc_separator};
    state->text = make_eval_text(*tokenizer, *text, state->protocol);
    state->base_context = std::min(base->config.context_length, base->transformer->n_context());
    state->base = std::move(base).value();
    return EvalSession(std::move(state));
}

int64_t EvalSession::base_passes() const {
    return m_state->base_passes;
}

const EvalText& EvalSession::text() const {
    return m_state->text;
}

const EvalProtocol& EvalSession::protocol() const {
    return m_state->protocol;
}

const std::string& EvalSession::base() const {
    return m_state->request.base;
}

namespace {

// The base model, reopened when an earlier comparison released it.
Status ensure_base(RunnableModel& base, const EvalRequest& request) {
    if (base.transformer) return Status::ok();
    auto reopened = open_runnable(request.base, request);
    if (!reopened) return reopened.status();
    base = std::move(reopened).value();
    return Status::ok();
}

}  // namespace

Result<EvalRun> EvalSession::perplexity(const ProgressFn& progress) {
    State& s = *m_state;
    if (Status st = ensure_base(s.base, s.request); !st) return st;
    auto report = evaluate_perplexity(*s.base.transformer, s.text, s.request.windows, progress);
    if (!report) return report.status();
    ++s.base_passes;
    report->text_label = s.request.text_path;
    return EvalRun{s.request.base, "", s.protocol, std::move(report).value()};
}

Result<EvalRun> EvalSession::compare(const std::string& candidate, const ProgressFn& progress, bool keep_base) {
    State& s = *m_state;
    auto save = [&s](BaseLogits& logits) -> Status {
        if (s.request.save_base.empty() || s.saved) return Status::ok();
        const std::string kept_path = logits.path;
        logits.path = s.request.save_base;
        std::error_code ec;  // the file names its base model, which later runs without --base then use
        const std::filesystem::path abs = std::filesystem::absolute(s.request.base, ec);
        logits.model = ec ? s.request.base : abs.lexically_normal().string();
        if (Status st = save_base_logits(s.request.save_base, logits); !st) return st;
        logits.path = kept_path;
        s.saved = true;
        return Status::ok();
    };
    if (!s.kept && !s.request.base_logits.empty()) {
        auto cand = open_runnable(candidate, s.request);  // its errors first, as with a running base
        if (!cand) return cand.status();
        auto resolved = resolve_eval_options(s.request.windows, s.base_context);
        if (!resolved) return resolved.status();
        auto saved =
            load_base_logits(s.request.base_logits, s.text, cand->config.vocab_size, *resolved, s.request.base_top_k);
        if (!saved) return saved.status();
        saved->text.doc_starts = s.text.doc_starts;  // the tokens and the cut (in the text hash) are the saved ones
        s.kept = std::move(saved).value();
    }
    Result<EvalReport> report = error(StatusCode::Internal, "eval: not run");
    if (s.kept) {
        auto cand = open_runnable(candidate, s.request);
        if (!cand) return cand.status();
        report = evaluate_compare_saved(*s.kept, *cand->transformer, progress);
    } else if (s.request.exact_base) {
        auto cand = open_runnable(candidate, s.request);
        if (!cand) return cand.status();
        if (Status st = ensure_base(s.base, s.request); !st) return st;
        const bool keep = keep_base || !s.request.save_base.empty();
        BaseLogits logits;
        logits.top_k = s.request.base_top_k;
        report = evaluate_compare(*s.base.transformer, *cand->transformer, s.text, s.request.windows, progress,
                                  keep ? &logits : nullptr);
        if (!report) return report.status();
        ++s.base_passes;
        logits.path = s.request.base;  // errors of later comparisons name the base
        if (Status st = save(logits); !st) return st;
        if (keep_base) s.kept = std::move(logits);
    } else {
        // One model at a time: the base over every window (half the progress), released, then the candidate.
        std::error_code ec;
        if (!std::filesystem::exists(candidate, ec)) {  // a missing candidate fails before the base runs
            auto cand = open_runnable(candidate, s.request);
            if (!cand) return cand.status();
        }
        if (Status st = ensure_base(s.base, s.request); !st) return st;
        const ProgressFn first = [&progress](double f, std::string_view what) {
            return report_progress(progress, 0.5 * f, std::string("base: ") + std::string(what));
        };
        auto logits = compute_base_logits(*s.base.transformer, s.text, s.request.windows, s.request.base_top_k, first);
        if (!logits) return logits.status();
        ++s.base_passes;
        s.base = RunnableModel();
        logits->path = s.request.base;
        if (Status st = save(*logits); !st) return st;
        s.kept = std::move(logits).value();
        auto cand = open_runnable(candidate, s.request);
        if (!cand) return cand.status();
        const ProgressFn second = [&progress](double f, std::string_view what) {
            return report_progress(progress, 0.5 + 0.5 * f, what);
        };
        report = evaluate_compare_saved(*s.kept, *cand->transformer, second);
    }
    if (!report) return report.status();
    report->text_label = s.request.text_path;
    return EvalRun{s.request.base, candidate, s.protocol, std::move(report).value()};
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

Result<SaturationProfile> profile_model(const Weights& model, const ProfileRequest& request,
                                        const ProgressFn& progress) {
    const std::string label = request.model_label.empty() ? model.label() : request.model_label;
    auto tokenizer = choose_tokenizer(model.label(), model.vocabulary(), model.config().vocab_size, request.tokenizer);
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
