// Evaluation: per-token statistics (EvalAccumulator) and the sliding-window runs over one or two models.
#include "gkq/evaluate.h"

#include "gkq/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <new>

namespace gkq {

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// ---- statistics ------------------------------------------------------------------------------------------------

namespace {

// log-softmax of `logits` into `out`, in double.
void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
    out.resize(static_cast<size_t>(n));
    double mx = logits[0];
    for (int64_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double log_z = mx + std::log(sum);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(logits[i]) - log_z;
}

int64_t argmax(const float* logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

// llama.cpp's mean_and_uncertainty: the mean and sqrt(var / (n - 1)), var = E[x^2] - E[x]^2.
void mean_and_se(double sum, double sum2, int64_t n, double& mean, double& se) {
    mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
    const double var = n > 0 ? sum2 / static_cast<double>(n) - mean * mean : 0.0;
    se = n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
}

// Linear interpolation at fraction * (n - 1) of sorted values (llama.cpp's percentile()).
double percentile(const std::vector<float>& sorted, double fraction) {
    if (sorted.empty()) return 0.0;
    const double p = fraction * static_cast<double>(sorted.size() - 1);
    const auto ip = static_cast<size_t>(p);
    const double f = p - static_cast<double>(ip);
    const size_t next = std::min(ip + 1, sorted.size() - 1);
    return (1.0 - f) * sorted[ip] + f * sorted[next];
}

PerplexityStats ppl_stats(double sum, double sum2, int64_t n, uint64_t n_bytes) {
    PerplexityStats s;
    s.n_tokens = n;
    s.n_bytes = n_bytes;
    mean_and_se(sum, sum2, n, s.mean_nll, s.mean_nll_se);
    s.perplexity = std::exp(s.mean_nll);
    s.bits_per_byte = n_bytes > 0 ? sum / std::log(2.0) / static_cast<double>(n_bytes) : 0.0;
    return s;
}

}  // namespace

EvalAccumulator::EvalAccumulator(bool compare) : m_compare(compare) {}

void EvalAccumulator::add_single(const float* logits, int64_t n_vocab, int32_t target) {
    log_softmax(logits, n_vocab, m_scratch_b);
    const double nll = -m_scratch_b[static_cast<size_t>(target)];
    m_nll_b += nll;
    m_nll_b2 += nll * nll;
    ++m_count;
}

void EvalAccumulator::add_pair(const float* base_logits, const float* candidate_logits, int64_t n_vocab,
                               int32_t target) {
    log_softmax(base_logits, n_vocab, m_scratch_b);
    log_softmax(candidate_logits, n_vocab, m_scratch_q);
    const auto t = static_cast<size_t>(target);
    const double nll_b = -m_scratch_b[t];
    const double nll_q = -m_scratch_q[t];
    double kld = 0.0;
    for (size_t i = 0; i < static_cast<size_t>(n_vocab); ++i)
        kld += std::exp(m_scratch_b[i]) * (m_scratch_b[i] - m_scratch_q[i]);
    const double dp = std::exp(-nll_q) - std::exp(-nll_b);
    m_nll_b += nll_b;
    m_nll_b2 += nll_b * nll_b;
    m_nll_q += nll_q;
    m_nll_q2 += nll_q * nll_q;
    m_diff += nll_q - nll_b;
    m_diff2 += (nll_q - nll_b) * (nll_q - nll_b);
    m_kld += kld;
    m_kld2 += kld * kld;
    m_dp2 += dp * dp;
    m_dp4 += dp * dp * dp * dp;
    if (argmax(base_logits, n_vocab) == argmax(candidate_logits, n_vocab)) ++m_same_top;
    m_klds.push_back(static_cast<float>(kld));
    ++m_count;
}

void EvalAccumulator::add_kept(const BaseLogits& base, int64_t row, const float* candidate_logits, int32_t target) {
    const int64_t n_vocab = base.n_vocab;
    const auto r = static_cast<size_t>(row);
    const auto k = static_cast<size_t>(base.top_k);
    const int32_t* ids = base.ids.data() + r * k;
    const float* kept = base.logits.data() + r * k;
    const double log_z = base.log_z[r];
    log_softmax(candidate_logits, n_vocab, m_scratch_q);
    const auto t = static_cast<size_t>(target);
    const double nll_b = -(static_cast<double>(base.target_logit[r]) - log_z);
    const double nll_q = -m_scratch_q[t];
    // Over the kept tokens in id order (with top_k = n_vocab the sum add_pair forms, term for term), then the rest
    // as one bucket.
    double kld = 0.0;
    int64_t top = 0;
    for (size_t j = 0; j < k; ++j) {
        const double lb = static_cast<double>(kept[j]) - log_z;
        kld += std::exp(lb) * (lb - m_scratch_q[static_cast<size_t>(ids[j])]);
        if (kept[j] > kept[top]) top = static_cast<int64_t>(j);
    }
    const double rest = base.rest_logp[r];
    if (std::isfinite(rest)) {
        m_kept.assign(static_cast<size_t>(n_vocab), 0);
        for (size_t j = 0; j < k; ++j) m_kept[static_cast<size_t>(ids[j])] = 1;
        double q_rest = 0.0;
        for (size_t i = 0; i < static_cast<size_t>(n_vocab); ++i)
            if (m_kept[i] == 0) q_rest += std::exp(m_scratch_q[i]);
        kld += std::exp(rest) * (rest - std::log(std::max(q_rest, std::numeric_limits<double>::min())));
    }
    const double dp = std::exp(-nll_q) - std::exp(-nll_b);
    m_nll_b += nll_b;
    m_nll_b2 += nll_b * nll_b;
    m_nll_q += nll_q;
    m_nll_q2 += nll_q * nll_q;
    m_diff += nll_q - nll_b;
    m_diff2 += (nll_q - nll_b) * (nll_q - nll_b);
    m_kld += kld;
    m_kld2 += kld * kld;
    m_dp2 += dp * dp;
    m_dp4 += dp * dp * dp * dp;
    if (ids[top] == argmax(candidate_logits, n_vocab)) ++m_same_top;
    m_klds.push_back(static_cast<float>(kld));
    ++m_count;
}

void BaseLogits::add_row(const float* full, int32_t target) {
    if (top_k <= 0) top_k = kDefaultBaseTopK;
    top_k = std::min(top_k, n_vocab);
    const auto k = static_cast<size_t>(top_k);
    const auto n = static_cast<size_t>(n_vocab);
    // log Z exactly as log_softmax forms it.
    double mx = full[0];
    for (size_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(full[i]));
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(full[i]) - mx);
    const double lz = mx + std::log(sum);
    std::vector<int32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    if (k < n) {
        std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k) - 1, order.end(),
                         [full](int32_t a, int32_t b) { return full[a] > full[b] || (full[a] == full[b] && a < b); });
        order.resize(k);
        std::sort(order.begin(), order.end());
    }
    double rest = 0.0;
    if (k < n) {
        size_t j = 0;
        for (size_t i = 0; i < n; ++i) {
            if (j < k && static_cast<size_t>(order[j]) == i) {
                ++j;
                continue;
            }
            rest += std::exp(static_cast<double>(full[i]) - lz);
        }
    }
    log_z.push_back(lz);
    rest_logp.push_back(k < n ? std::log(rest) : -std::numeric_limits<double>::infinity());
    target_logit.push_back(full[target]);
    ids.insert(ids.end(), order.begin(), order.end());
    for (int32_t id : order) logits.push_back(full[id]);
}

uint64_t BaseLogits::bytes() const {
    return log_z.size() * 8 + rest_logp.size() * 8 + target_logit.size() * 4 + ids.size() * 4 + logits.size() * 4 +
           text.tokens.size() * 4;
}

PerplexityStats EvalAccumulator::perplexity(uint64_t n_bytes) const {
    return ppl_stats(m_nll_b, m_nll_b2, m_count, n_bytes);
}

CompareStats EvalAccumulator::compare(uint64_t n_bytes) const {
    CompareStats c;
    c.base = ppl_stats(m_nll_b, m_nll_b2, m_count, n_bytes);
    c.candidate = ppl_stats(m_nll_q, m_nll_q2, m_count, n_bytes);
    if (!m_compare || m_count == 0) return c;
    const auto n = static_cast<double>(m_count);
    mean_and_se(m_kld, m_kld2, m_count, c.mean_kld, c.mean_kld_se);
    std::vector<float> sorted = m_klds;
    std::sort(sorted.begin(), sorted.end());
    c.median_kld = sorted.size() % 2 == 0 ? 0.5 * (static_cast<double>(sorted[sorted.size() / 2]) +
                                                   static_cast<double>(sorted[sorted.size() / 2 - 1]))
                                          : sorted[sorted.size() / 2];
    c.kld_p99 = percentile(sorted, 0.99);
    c.kld_p999 = percentile(sorted, 0.999);
    c.max_kld = sorted.back();
    c.same_top = static_cast<double>(m_same_top) / n;
    c.same_top_se = m_count > 1 ? std::sqrt(c.same_top * (1.0 - c.same_top) / (n - 1.0)) : 0.0;
    double m2 = 0.0, m2_se = 0.0;
    mean_and_se(m_dp2, m_dp4, m_count, m2, m2_se);
    c.rms_delta_p = std::sqrt(m2);
    c.rms_delta_p_se = c.rms_delta_p > 0 ? m2_se / (2.0 * c.rms_delta_p) : 0.0;
    mean_and_se(m_diff, m_diff2, m_count, c.ln_ppl_ratio, c.ln_ppl_ratio_se);
    c.ppl_ratio = std::exp(c.ln_ppl_ratio);
    c.ppl_ratio_se = c.ppl_ratio * c.ln_ppl_ratio_se;
    return c;
}

// ---- windows ---------------------------------------------------------------------------------------------------

namespace {

constexpr int64_t kDefaultMaxCtx = 512;

struct Window {
    int64_t begin = 0;       // first text token predicted (after BOS)
    int64_t end = 0;         // one past the last
    int64_t score_from = 0;  // first token this window scores
};

// The windows over tokens [first, last): each starts with BOS, and scores only what no earlier one scored.
void add_windows(std::vector<Window>& w, int64_t first, int64_t last, int64_t n_ctx, int64_t stride) {
    int64_t prev_end = first;
    for (int64_t b = first; prev_end < last; b += stride) {
        const int64_t e = std::min(b + n_ctx, last);
        if (e > prev_end) w.push_back({b, e, std::max(b, prev_end)});
        prev_end = e;
    }
}

// One token stream, or (doc_starts set) each document on its own.
std::vector<Window> make_windows(const EvalText& text, int64_t n_ctx, int64_t stride) {
    std::vector<Window> w;
    const auto n = static_cast<int64_t>(text.tokens.size());
    if (text.doc_starts.empty()) {
        add_windows(w, 0, n, n_ctx, stride);
        return w;
    }
    for (size_t d = 0; d < text.doc_starts.size(); ++d) {
        const int64_t first = std::clamp<int64_t>(text.doc_starts[d], 0, n);
        const int64_t last = d + 1 < text.doc_starts.size() ? std::clamp<int64_t>(text.doc_starts[d + 1], first, n) : n;
        add_windows(w, first, last, n_ctx, stride);
    }
    return w;
}

Status check_tokens(const EvalText& text, int64_t n_vocab, const std::string& who) {
    if (text.tokens.empty()) return error(StatusCode::InvalidArgument, "eval: the text has no tokens");
    if (text.bos_id < 0 || text.bos_id >= n_vocab)
        return error(StatusCode::InvalidArgument, "eval: BOS id " + std::to_string(text.bos_id) + " is outside " + who +
                                                      "'s vocabulary of " + std::to_string(n_vocab));
    for (size_t i = 0; i < text.tokens.size(); ++i)
        if (text.tokens[i] < 0 || text.tokens[i] >= n_vocab)
            return error(StatusCode::InvalidArgument, "eval: token " + std::to_string(i) + " of the text has id " +
                                                          std::to_string(text.tokens[i]) + ", outside " + who +
                                                          "'s vocabulary of " + std::to_string(n_vocab));
    return Status::ok();
}

// A model a window runs through, and the name its errors carry (empty: none).
struct WindowModel {
    Transformer* model;
    const char* role;
};

// Runs every window through each of `models` in turn: logits[m] holds model m's logits for the window's positions
// ((end - begin), n_vocab), handed to `on_window` before the next window runs.
using WindowFn = std::function<void(const Window& w, const float* const* logits)>;

Status run_windows(const std::vector<Window>& windows, const EvalText& text, const std::vector<WindowModel>& models,
                   const ProgressFn& progress, const WindowFn& on_window) {
    std::vector<int32_t> input;
    std::vector<std::vector<float>> logits(models.size());
    std::vector<const float*> views(models.size());
    for (size_t wi = 0; wi < windows.size(); ++wi) {
        if (!report_progress(progress, static_cast<double>(wi) / static_cast<double>(windows.size()),
                             "window " + std::to_string(wi + 1) + " of " + std::to_string(windows.size())))
            return error(StatusCode::Cancelled, "eval: cancelled");
        const Window& w = windows[wi];
        const int64_t len = w.end - w.begin;
        input.assign(1, text.bos_id);
        input.insert(input.end(), text.tokens.begin() + w.begin, text.tokens.begin() + w.end - 1);
        for (size_t m = 0; m < models.size(); ++m) {
            logits[m].resize(static_cast<size_t>(len * models[m].model->config().vocab_size));
            auto r = models[m].model->forward_batch(input.data(), len, 0, logits[m].data());
            if (!r) return *models[m].role ? r.status().with_context(models[m].role) : r.status();
            views[m] = logits[m].data();
        }
        on_window(w, views.data());
    }
    if (!report_progress(progress, 1.0, "done")) return error(StatusCode::Cancelled, "eval: cancelled");
    return Status::ok();
}

EvalReport start_report(const EvalText& text, const EvalOptions& o, size_t n_windows, bool compared) {
    EvalReport r;
    r.n_ctx = o.n_ctx;
    r.stride = o.stride;
    r.n_windows = static_cast<int64_t>(n_windows);
    r.n_tokens = static_cast<int64_t>(text.tokens.size());
    r.n_bytes = text.n_bytes;
    r.compared = compared;
    return r;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<EvalOptions> resolve_eval_options(const EvalOptions& options, int64_t context_length) {
    EvalOptions o = options;
    if (o.n_ctx == 0) o.n_ctx = std::min(context_length, kDefaultMaxCtx);
    if (o.n_ctx < 2 || o.n_ctx > context_length)
        return error(StatusCode::InvalidArgument, "eval: context " + std::to_string(o.n_ctx) + " is outside 2.." +
                                                      std::to_string(context_length) + " (the model's context length)");
    if (o.stride == 0) o.stride = o.n_ctx / 2;
    if (o.stride < 1 || o.stride > o.n_ctx)
        return error(StatusCode::InvalidArgument, "eval: stride " + std::to_string(o.stride) + " is outside 1.." +
                                                      std::to_string(o.n_ctx) + " (the context)");
    return o;
}

Result<EvalReport> evaluate_perplexity(Transformer& model, const EvalText& text, const EvalOptions& options,
                                       const ProgressFn& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    auto o = resolve_eval_options(options, std::min(model.config().context_length, model.n_context()));
    if (!o) return o.status();
    const int64_t n_vocab = model.config().vocab_size;
    if (Status s = check_tokens(text, n_vocab, "the model"); !s) return s;
    try {
        const std::vector<Window> windows = make_windows(text, o->n_ctx, o->stride);
        EvalAccumulator acc(false);
        Status s =
            run_windows(windows, text, {{&model, ""}}, progress, [&](const Window& w, const float* const* logits) {
                for (int64_t t = w.score_from; t < w.end; ++t)
                    acc.add_single(logits[0] + (t - w.begin) * n_vocab, n_vocab, text.tokens[static_cast<size_t>(t)]);
            });
        if (!s) return s;
        EvalReport r = start_report(text, *o, windows.size(), false);
        r.single = acc.perplexity(text.n_bytes);
        r.seconds = seconds_since(t0);
        return r;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "eval: out of memory");
    }
}

Result<EvalReport> evaluate_compare(Transformer& base, Transformer& candidate, const EvalText& text,
                                    const EvalOptions& options, const ProgressFn& progress, BaseLogits* save_base) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n_vocab = base.config().vocab_size;
    if (candidate.config().vocab_size != n_vocab)
        return error(StatusCode::InvalidArgument, "eval: the base model has " + std::to_string(n_vocab) +
                                                      " tokens, the candidate " +
                                                      std::to_string(candidate.config().vocab_size));
    const int64_t ctx = std::min(
        {base.config().context_length, base.n_context(), candidate.config().context_length, candidate.n_context()});
    auto o = resolve_eval_options(options, ctx);
    if (!o) return o.status();
    if (Status s = check_tokens(text, n_vocab, "the model"); !s) return s;
    try {
        const std::vector<Window> windows = make_windows(text, o->n_ctx, o->stride);
        if (save_base != nullptr) {
            save_base->n_vocab = n_vocab;
            save_base->n_ctx = o->n_ctx;
            save_base->stride = o->stride;
            save_base->text = text;
            save_base->log_z.clear();
            save_base->rest_logp.clear();
            save_base->target_logit.clear();
            save_base->ids.clear();
            save_base->logits.clear();
        }
        EvalAccumulator acc(true);
        // Each window runs the base, then the candidate; the pairs are added in token order.
        Status s = run_windows(windows, text, {{&base, "base model"}, {&candidate, "candidate model"}}, progress,
                               [&](const Window& w, const float* const* logits) {
                                   for (int64_t t = w.score_from; t < w.end; ++t) {
                                       const float* b = logits[0] + (t - w.begin) * n_vocab;
                                       acc.add_pair(b, logits[1] + (t - w.begin) * n_vocab, n_vocab,
                                                    text.tokens[static_cast<size_t>(t)]);
                                       if (save_base != nullptr)
                                           save_base->add_row(b, text.tokens[static_cast<size_t>(t)]);
                                   }
                               });
        if (!s) return s;
        EvalReport r = start_report(text, *o, windows.size(), true);
        r.compare = acc.compare(text.n_bytes);
        r.compare.n_vocab = n_vocab;
        r.compare.kld_top_k = n_vocab;
        r.seconds = seconds_since(t0);
        return r;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "eval: out of memory");
    }
}

Result<BaseLogits> compute_base_logits(Transformer& base, const EvalText& text, const EvalOptions& options,
                                       int64_t top_k, const ProgressFn& progress) {
    auto o = resolve_eval_options(options, std::min(base.config().context_length, base.n_context()));
    if (!o) return o.status();
    const int64_t n_vocab = base.config().vocab_size;
    if (Status s = check_tokens(text, n_vocab, "the model"); !s) return s;
    try {
        const std::vector<Window> windows = make_windows(text, o->n_ctx, o->stride);
        BaseLogits b;
        b.n_vocab = n_vocab;
        b.n_ctx = o->n_ctx;
        b.stride = o->stride;
        b.top_k = top_k;
        b.text = text;
        Status s = run_windows(
            windows, text, {{&base, "base model"}}, progress, [&](const Window& w, const float* const* logits) {
                for (int64_t t = w.score_from; t < w.end; ++t)
                    b.add_row(logits[0] + (t - w.begin) * n_vocab, text.tokens[static_cast<size_t>(t)]);
            });
        if (!s) return s;
        return b;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "eval: out of memory");
    }
}

Result<EvalReport> evaluate_compare_saved(const BaseLogits& base, Transformer& candidate, const ProgressFn& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n_vocab = base.n_vocab;
    if (candidate.config().vocab_size != n_vocab)
        return error(StatusCode::InvalidArgument, base.path + ": holds logits over " + std::to_string(n_vocab) +
                                                      " tokens, the candidate has " +
                                                      std::to_string(candidate.config().vocab_size));
    EvalOptions given;
    given.n_ctx = base.n_ctx;
    given.stride = base.stride;
    auto o = resolve_eval_options(given, std::min(candidate.config().context_length, candidate.n_context()));
    if (!o) return o.status().with_context(base.path);
    const EvalText& text = base.text;
    if (Status s = check_tokens(text, n_vocab, "the candidate"); !s) return s;
    if (base.n_rows() != static_cast<int64_t>(text.tokens.size()) || base.top_k < 1 || base.top_k > n_vocab ||
        base.ids.size() != text.tokens.size() * static_cast<size_t>(base.top_k))
        return error(StatusCode::Internal, base.path + ": logits do not match the token count");
    try {
        const std::vector<Window> windows = make_windows(text, o->n_ctx, o->stride);
        EvalAccumulator acc(true);
        Status s =
            run_windows(windows, text, {{&candidate, ""}}, progress, [&](const Window& w, const float* const* logits) {
                for (int64_t t = w.score_from; t < w.end; ++t)
                    acc.add_kept(base, t, logits[0] + (t - w.begin) * n_vocab, text.tokens[static_cast<size_t>(t)]);
            });
        if (!s) return s;
        EvalReport r = start_report(text, *o, windows.size(), true);
        r.compare = acc.compare(text.n_bytes);
        r.compare.n_vocab = n_vocab;
        r.compare.kld_top_k = base.top_k;
        r.seconds = seconds_since(t0);
        return r;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, "eval: out of memory");
    }
}

}  // namespace gkq
