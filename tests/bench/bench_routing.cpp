// bench_routing: what FFN routing by saturation masks buys and costs. The text's first --calib tokens profile the
// model (gkq/saturation.h) at each threshold; on the next --eval tokens (disjoint) every threshold's masks route
// the FFN, and the table shows the hot neurons, decode speed (one position at a time, median of --runs), its
// ratio against the unrouted model measured in the same run, and the mean KL divergence of the routed model's
// next-token distribution from the unrouted one's (with its standard error), top-token agreement and PPL ratio.
//   bench_routing MODEL TEXT [--tokenizer F] [--calib N] [--eval N] [--thresholds a,b,...] [--threads N]
//                 [--runs N] [--min-frequency F]
#include "gkq/evaluate.h"
#include "gkq/model_file.h"
#include "gkq/saturation.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "bench_routing: %s\n", msg.c_str());
    std::exit(1);
}

// Decode speed: positions 0..n-1 one at a time, median tokens/s of `runs` runs.
double decode_tokens_per_s(Transformer& t, const std::vector<int32_t>& tokens, int64_t n, int runs) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
        const double t0 = now();
        for (int64_t p = 0; p < n; ++p)
            if (!t.forward(tokens[static_cast<size_t>(p)], p)) die("forward failed");
        rates.push_back(static_cast<double>(n) / (now() - t0));
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

// All logits of the eval tokens, window by window (each window from position 0, BOS first).
std::vector<float> window_logits(Transformer& t, const std::vector<int32_t>& windows_flat, int64_t window) {
    const int64_t vocab = t.config().vocab_size;
    std::vector<float> all(windows_flat.size() * static_cast<size_t>(vocab));
    for (size_t at = 0; at < windows_flat.size(); at += static_cast<size_t>(window))
        if (!t.forward_batch(windows_flat.data() + at, window, 0, all.data() + at * static_cast<size_t>(vocab)))
            die("forward_batch failed");
    return all;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, text_path, tokenizer_path;
    int64_t n_calib = 8192, n_eval = 4096, threads = 1, runs = 9;
    double min_frequency = 0.0;
    std::vector<double> thresholds = {0.5, 1, 2, 3, 4, 6, 8};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + a);
            return argv[++i];
        };
        if (a == "--tokenizer")
            tokenizer_path = next();
        else if (a == "--calib")
            n_calib = std::stoll(next());
        else if (a == "--eval")
            n_eval = std::stoll(next());
        else if (a == "--threads")
            threads = std::stoll(next());
        else if (a == "--runs")
            runs = std::max<int64_t>(1, std::stoll(next()));
        else if (a == "--min-frequency")
            min_frequency = std::stod(next());
        else if (a == "--thresholds") {
            thresholds.clear();
            std::stringstream ss(next());
            for (std::string x; std::getline(ss, x, ',');) thresholds.push_back(std::stod(x));
        } else if (model_path.empty())
            model_path = a;
        else if (text_path.empty())
            text_path = a;
        else
            die("unexpected argument " + a);
    }
    if (model_path.empty() || text_path.empty())
        die("usage: bench_routing MODEL TEXT [--tokenizer F] [--calib N] [--eval N] [--thresholds a,b] [--threads N]");

    auto model = ModelFile::open(model_path);
    if (!model) die(model.message());
    Result<Tokenizer> tok = error(StatusCode::NotFound, "no tokenizer");
    if (!tokenizer_path.empty())
        tok = Tokenizer::load_llama2c(tokenizer_path, model->config().vocab_size);
    else if (!model->vocabulary().empty())
        tok = Tokenizer::from_vocabulary(model->vocabulary(), model->path());
    else {
        namespace fs = std::filesystem;
        const fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
        tok = Tokenizer::load_llama2c((dir / "tokenizer.bin").string(), model->config().vocab_size);
    }
    if (!tok) die(tok.message());
    std::ifstream in(text_path, std::ios::binary);
    if (!in) die(text_path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::vector<int32_t> tokens = tok->encode(ss.str(), true, false);
    if (static_cast<int64_t>(tokens.size()) < n_calib + 2)
        die("the text has only " + std::to_string(tokens.size()) + " tokens");
    n_eval = std::min<int64_t>(n_eval, static_cast<int64_t>(tokens.size()) - n_calib);

    TransformerOptions topt;
    topt.n_threads = static_cast<int>(threads);
    auto loaded = Transformer::load(*model, topt);
    if (!loaded) die(loaded.message());
    Transformer& t = *loaded;
    const ModelConfig& c = t.config();
    const int64_t window = std::min<int64_t>(t.n_context(), 256);

    const std::vector<int32_t> calib(tokens.begin(), tokens.begin() + n_calib);
    SaturationOptions so;
    so.thresholds = thresholds;
    so.min_frequency = min_frequency;
    auto profiles = profile_saturation(t, calib, so);
    if (!profiles) die(profiles.message());

    // eval windows: BOS + window - 1 text tokens each; targets are the next text tokens
    std::vector<int32_t> flat, targets;
    const int64_t per = window - 1;
    const int64_t n_windows = (n_eval - 1) / per;
    if (n_windows < 1) die("--eval too small for one window of " + std::to_string(window));
    for (int64_t w = 0; w < n_windows; ++w) {
        flat.push_back(tok->bos_id());
        for (int64_t i = 0; i < per; ++i) flat.push_back(tokens[static_cast<size_t>(n_calib + w * per + i)]);
        // position p (BOS at 0) predicts text token p of the window; the last one predicts the next window's first
        for (int64_t p = 0; p <= per; ++p) {
            const int64_t at = n_calib + w * per + p;
            targets.push_back(at < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(at)] : -1);
        }
    }
    int64_t n_scored = 0;
    for (int32_t x : targets) n_scored += x >= 0 ? 1 : 0;
    const std::vector<float> base = window_logits(t, flat, window);
    const std::vector<int32_t> speed_tokens(flat.begin(), flat.begin() + window);
    const double base_tps = decode_tokens_per_s(t, speed_tokens, window, static_cast<int>(runs));

    std::printf("model %s: dim %lld, hidden %lld, %lld blocks; %s; threads %lld\n", model_path.c_str(),
                static_cast<long long>(c.dim), static_cast<long long>(c.hidden_dim), static_cast<long long>(c.n_layers),
                model->format_detail().c_str(), static_cast<long long>(threads));
    std::printf(
        "calibration: text tokens 0..%lld; evaluation: the next %lld tokens in %lld windows of %lld "
        "(scored %lld); decode speed: %lld positions one at a time, median of %lld runs, each routed run paired "
        "with an unrouted one, in alternating order (ratio = median of the pairs' ratios)\n"
        "saturated: |silu(gate)*up| > T x block RMS; hot: saturated on a fraction of the calibration tokens above "
        "%g\n\n",
        static_cast<long long>(n_calib), static_cast<long long>(n_windows * per), static_cast<long long>(n_windows),
        static_cast<long long>(window), static_cast<long long>(n_scored), static_cast<long long>(window),
        static_cast<long long>(runs), min_frequency);
    std::printf(
        "| T | hot neurons | matrix MACs/token | decode tok/s | vs unrouted | mean KLD | top-1 agree | PPL ratio |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    const auto all_macs = static_cast<double>(t.matrix_macs_per_token());
    std::printf("| off | %lld (100%%) | %.0f (100%%) | %.0f | 1.00x | 0 | 1 | 1 |\n",
                static_cast<long long>(c.n_layers * c.hidden_dim), all_macs, base_tps);
    const int64_t vocab = c.vocab_size;
    for (size_t k = 0; k < profiles->size(); ++k) {
        const SaturationProfile& p = (*profiles)[k];
        if (Status s = t.set_ffn_routing(routing_masks(p)); !s) die(s.message());
        const int64_t n_hot = t.n_active_ffn_neurons();
        const std::vector<float> routed = window_logits(t, flat, window);
        EvalAccumulator acc(true);
        for (size_t i = 0; i < targets.size(); ++i)
            if (targets[i] >= 0)
                acc.add_pair(base.data() + i * static_cast<size_t>(vocab),
                             routed.data() + i * static_cast<size_t>(vocab), vocab, targets[i]);
        const CompareStats st = acc.compare(1);
        // speed paired with the unrouted model: alternate runs, so load from other processes hits both alike
        std::vector<double> ratios, rates;
        for (int64_t r = 0; r < runs; ++r) {
            // alternate which one runs first, so that neither profits from the other's warm caches
            double off = 0.0, on = 0.0;
            for (int half = 0; half < 2; ++half) {
                const bool routed_now = (half == 0) == (r % 2 == 1);
                if (Status s = t.set_ffn_routing(routed_now ? routing_masks(p) : std::vector<std::vector<uint8_t>>{});
                    !s)
                    die(s.message());
                (routed_now ? on : off) = decode_tokens_per_s(t, speed_tokens, window, 1);
            }
            ratios.push_back(on / off);
            rates.push_back(on);
        }
        std::sort(ratios.begin(), ratios.end());
        std::sort(rates.begin(), rates.end());
        const double tps = rates[rates.size() / 2];
        const double ratio = ratios[ratios.size() / 2];
        const double frac = static_cast<double>(n_hot) / static_cast<double>(c.n_layers * c.hidden_dim);
        // a cold neuron saves its row of w1 and w3 and its column of w2: 3 * dim multiply-adds per token
        const double macs =
            all_macs - 3.0 * static_cast<double>(c.dim) * static_cast<double>(c.n_layers * c.hidden_dim - n_hot);
        std::printf("| %g | %lld (%.1f%%) | %.0f (%.1f%%) | %.0f | %.2fx | %.4g ± %.2g | %.4f | %.4f |\n", p.threshold,
                    static_cast<long long>(n_hot), 100.0 * frac, macs, 100.0 * macs / all_macs, tps, ratio, st.mean_kld,
                    st.mean_kld_se, st.same_top, st.ppl_ratio);
        if (Status s = t.set_ffn_routing({}); !s) die(s.message());
    }
    return 0;
}
