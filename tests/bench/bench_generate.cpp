// bench_generate: tokens per second of the forward pass — prompt processing (batched, and one position at a
// time for comparison) and generation — on the shared llama2.c checkpoints, a random-weight model of
// llama2.c's stories15M shape (weights too large for the caches), and any model given on the command line;
// single thread and all threads. Each row shows the float32 weight bytes one token reads and the implied
// GB/s, against the memory bandwidth (read, memcpy, memset) measured in the same run. Also factored against
// dense products for the same low-rank matrices. Every number is the median of --runs runs.
//   bench_generate [--runs N] [--quick] [MODEL...]
#include "gkq/model_file.h"
#include "gkq/tensor.h"
#include "gkq/transformer.h"
#include "infer/thread_pool.h"
#include "test_support.h"
#include "tiny_model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace gkq;

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double median_of(int runs, const std::function<double()>& once) {
    std::vector<double> v;
    for (int i = 0; i < runs; ++i) v.push_back(once());
    return median(v);
}

// ---- memory bandwidth baseline ----

struct Bandwidth {
    double read = 0;  // GB/s summing floats
    double copy = 0;  // GB/s memcpy, read + write bytes counted
    double set = 0;   // GB/s memset
};

// Runs fn(begin, end) over [0, n) split across `threads` std::threads; returns seconds.
double split_run(int threads, size_t n, const std::function<void(size_t, size_t)>& fn) {
    const double t0 = now();
    std::vector<std::thread> pool;
    const size_t chunk = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads) / 64 * 64 + 64;
    for (int i = 1; i < threads; ++i) {
        const size_t b = std::min(n, chunk * static_cast<size_t>(i));
        pool.emplace_back([&, b] { fn(b, std::min(n, b + chunk)); });
    }
    fn(0, std::min(n, chunk));
    for (auto& t : pool) t.join();
    return now() - t0;
}

Bandwidth measure_bandwidth(int threads, int runs, size_t bytes) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> a(n, 1.0f);
    std::vector<float> b(n, 2.0f);
    volatile float sink = 0;
    Bandwidth bw;
    const double gb = static_cast<double>(n * sizeof(float)) / 1e9;
    bw.read = gb / median_of(runs, [&]() -> double {
                  return split_run(threads, n, [&](size_t lo, size_t hi) {
                      float acc[16] = {};
                      size_t i = lo;
                      for (; i + 16 <= hi; i += 16)
                          for (int k = 0; k < 16; ++k) acc[k] += a[i + static_cast<size_t>(k)];
                      float s = 0;
                      for (float x : acc) s += x;
                      sink = sink + s;
                  });
              });
    bw.copy = 2 * gb / median_of(runs, [&]() -> double {
                  return split_run(threads, n, [&](size_t lo, size_t hi) {
                      std::memcpy(&b[lo], &a[lo], (hi - lo) * sizeof(float));
                  });
              });
    bw.set = gb / median_of(runs, [&]() -> double {
                 return split_run(threads, n,
                                  [&](size_t lo, size_t hi) { std::memset(&b[lo], 0, (hi - lo) * sizeof(float)); });
             });
    return bw;
}

// ---- models ----

struct ModelCase {
    std::string name;
    ModelConfig config;
    std::function<Result<Transformer>(const TransformerOptions&)> load;
};

// Deterministic pseudo-random weights of a config's shapes; `rank` > 0 hands matrices over as factors.
test::MemoryWeights random_source(const ModelConfig& c, int64_t rank_divisor) {
    test::TinyModel m;
    m.config = c;
    std::vector<std::optional<StoredFactors>> factors;
    auto one = [&](TensorRole role, int32_t layer) {
        int64_t rows = 0, cols = 0;
        switch (role) {
            case TensorRole::TokenEmbd:
            case TensorRole::Output: rows = c.vocab_size, cols = c.dim; break;
            case TensorRole::AttnQ:
            case TensorRole::AttnO: rows = c.dim, cols = c.dim; break;
            case TensorRole::AttnK:
            case TensorRole::AttnV: rows = c.kv_dim(), cols = c.dim; break;
            case TensorRole::FfnGate:
            case TensorRole::FfnUp: rows = c.hidden_dim, cols = c.dim; break;
            case TensorRole::FfnDown: rows = c.dim, cols = c.hidden_dim; break;
            default: rows = c.dim; break;
        }
        const uint64_t seed = static_cast<uint64_t>(role) * 1000 + static_cast<uint64_t>(layer + 1);
        WriteTensor w;
        w.role = role;
        w.layer = layer;
        w.shape = cols == 0 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
        m.tensors.push_back(std::move(w));
        factors.emplace_back();
        if (cols == 0) {
            m.storage.emplace_back(static_cast<size_t>(rows), 1.0f);
            return;
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(cols));
        if (rank_divisor > 0 && role != TensorRole::TokenEmbd) {
            StoredFactors w;
            w.rank = std::max<int64_t>(1, std::min(rows, cols) / rank_divisor);
            w.u = test::random_floats(static_cast<size_t>(rows * w.rank), seed, 1.0f);
            w.s = test::random_floats(static_cast<size_t>(w.rank), seed + 1, 1.0f);
            w.v = test::random_floats(static_cast<size_t>(cols * w.rank), seed + 2, scale);
            factors.back() = std::move(w);
            m.storage.emplace_back();
            return;
        }
        m.storage.push_back(test::random_floats(static_cast<size_t>(rows * cols), seed, scale));
    };
    one(TensorRole::TokenEmbd, -1);
    for (int32_t l = 0; l < c.n_layers; ++l)
        for (TensorRole r :
             {TensorRole::AttnNorm, TensorRole::AttnQ, TensorRole::AttnK, TensorRole::AttnV, TensorRole::AttnO,
              TensorRole::FfnNorm, TensorRole::FfnGate, TensorRole::FfnDown, TensorRole::FfnUp})
            one(r, l);
    one(TensorRole::OutputNorm, -1);
    if (!c.shared_classifier) one(TensorRole::Output, -1);
    test::MemoryWeights w(m);
    w.factors = std::move(factors);
    return w;
}

std::vector<int32_t> tokens_for(const ModelConfig& c, int64_t n) {
    std::vector<int32_t> t;
    t.push_back(1);
    for (int64_t i = 1; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + 13) % c.vocab_size));
    return t;
}

struct Speeds {
    double prompt_batched = 0;  // tokens/s
    double prompt_single = 0;   // tokens/s
    double generation = 0;      // tokens/s
};

Speeds measure(Transformer& t, int runs, int64_t n_prompt, int64_t n_gen) {
    const auto prompt = tokens_for(t.config(), n_prompt);
    const int64_t vocab = t.config().vocab_size;
    Speeds s;
    s.prompt_batched = static_cast<double>(n_prompt) / median_of(runs, [&]() -> double {
                           const double t0 = now();
                           if (!t.forward_batch(prompt.data(), n_prompt, 0)) return INFINITY;
                           return now() - t0;
                       });
    s.prompt_single = static_cast<double>(n_prompt) / median_of(runs, [&]() -> double {
                          const double t0 = now();
                          for (int64_t i = 0; i < n_prompt; ++i)
                              if (!t.forward(prompt[static_cast<size_t>(i)], i)) return INFINITY;
                          return now() - t0;
                      });
    // generation: greedy from BOS, positions 1..n_gen, argmax included
    s.generation = static_cast<double>(n_gen) / median_of(runs, [&]() -> double {
                       auto first = t.forward(1, 0);
                       if (!first) return INFINITY;
                       int32_t token = static_cast<int32_t>(std::max_element(*first, *first + vocab) - *first);
                       const double t0 = now();
                       for (int64_t pos = 1; pos <= n_gen; ++pos) {
                           auto logits = t.forward(token, pos);
                           if (!logits) return INFINITY;
                           token = static_cast<int32_t>(std::max_element(*logits, *logits + vocab) - *logits);
                       }
                       return now() - t0;
                   });
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 5;
    bool quick = false;
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc)
            runs = std::max(1, std::atoi(argv[++i]));
        else if (a == "--quick")
            quick = true;
        else if (a == "-h" || a == "--help") {
            std::printf("usage: bench_generate [--runs N] [--quick] [MODEL...]\n");
            return 0;
        } else
            paths.push_back(a);
    }
    const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<int> thread_counts = {1};
    if (all > 1) thread_counts.push_back(all);

    std::printf("# bench_generate: %d runs per number (median), %d hardware threads\n\n", runs, all);
    // Other processes share the cores; their load is part of what the numbers mean.
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        char line[128] = {};
        if (std::fgets(line, sizeof line, f)) std::printf("load average at start (1, 5, 15 min): %.*s\n\n", 14, line);
        std::fclose(f);
    }

    // ---- baseline ----
    const size_t buffer = quick ? (size_t{64} << 20) : (size_t{256} << 20);
    std::printf(
        "## memory bandwidth (%zu MB buffers)\n\n| threads | read GB/s | memcpy GB/s (r+w) | memset GB/s |\n"
        "|---:|---:|---:|---:|\n",
        buffer >> 20);
    std::vector<Bandwidth> baseline;
    for (int th : thread_counts) {
        baseline.push_back(measure_bandwidth(th, runs, buffer));
        std::printf("| %d | %.2f | %.2f | %.2f |\n", th, baseline.back().read, baseline.back().copy,
                    baseline.back().set);
    }

    // ---- the cost of one parallel dispatch (what a product must outweigh to be split) ----
    std::printf(
        "\n## thread pool: parallel_for over one trivial chunk per participant (chunks are claimed, so the caller "
        "does those no worker reached in time)\n\n| threads | microseconds per call |\n|---:|---:|\n");
    for (int th : thread_counts) {
        ThreadPool pool(th);
        std::atomic<int> touched{0};
        const std::function<void(int64_t, int64_t)> task = [&](int64_t, int64_t) {
            touched.fetch_add(1, std::memory_order_relaxed);
        };
        const double us = 1e6 * median_of(runs, [&]() -> double {
                              const int n = 2000;
                              const double t0 = now();
                              for (int i = 0; i < n; ++i) pool.parallel_for(th, 1, true, task);
                              return (now() - t0) / n;
                          });
        std::printf("| %d | %.2f |\n", th, us);
    }

    // ---- models ----
    std::vector<ModelFile> files;  // kept open while their cases run
    std::vector<ModelCase> cases;
    std::vector<std::string> wanted = paths;
    for (const char* rel : {"llama2xs-279K/model.bin", "babyllama-tok105/model5000.bin"})
        if (auto p = test::shared_model(rel))
            wanted.insert(wanted.begin(), *p);
        else
            std::printf("\n(skipping %s: %s)\n", rel, test::shared_models_skip_reason(rel).c_str());
    files.reserve(wanted.size());
    for (const std::string& p : wanted) {
        auto f = ModelFile::open(p);
        if (!f) {
            std::fprintf(stderr, "bench_generate: %s\n", f.message().c_str());
            return 1;
        }
        files.push_back(std::move(*f));
    }
    for (const ModelFile& f : files) {
        const ModelFile* fp = &f;
        cases.push_back(
            {f.path(), f.config(), [fp](const TransformerOptions& o) { return Transformer::load(*fp, o); }});
    }
    ModelConfig s15;  // llama2.c's stories15M shape: 15.2M parameters, 61 MB of float32
    s15.dim = 288, s15.hidden_dim = 768, s15.n_layers = 6, s15.n_heads = 6, s15.n_kv_heads = 6;
    s15.vocab_size = 32000, s15.context_length = 256;
    if (!quick)
        cases.push_back(
            {"random weights, stories15M shape (dim 288, 6 layers, vocab 32000)", s15,
             [s15](const TransformerOptions& o) { return Transformer::load(s15, random_source(s15, 0), o); }});

    std::printf(
        "\n## forward pass\n\nprompt: positions 0..P-1 as one batch (max_batch 32) and one at a time; "
        "generation: positions 1..G, greedy.\nGB/s = weight bytes per token x generation tokens/s; "
        "vs read = that over the read bandwidth at the same thread count.\n\n"
        "| model | threads | P | prompt tok/s batched | prompt tok/s one by one | G | generation tok/s | "
        "weight MB/token | GB/s | vs read |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const ModelCase& mc : cases) {
        const int64_t ctx = std::min<int64_t>(mc.config.context_length, 256);
        const int64_t n_prompt = std::min<int64_t>(quick ? 32 : 128, ctx / 2);
        const int64_t n_gen = std::min<int64_t>(quick ? 32 : 128, ctx - 1);
        for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
            TransformerOptions o;
            o.n_threads = thread_counts[ti];
            o.max_context = ctx;
            auto t = mc.load(o);
            if (!t) {
                std::fprintf(stderr, "bench_generate: %s\n", t.message().c_str());
                return 1;
            }
            const Speeds s = measure(*t, runs, n_prompt, n_gen);
            const double mb = static_cast<double>(t->weight_bytes_per_token()) / 1e6;
            const double gbs = mb / 1e3 * s.generation;
            std::printf("| %s | %d | %lld | %.0f | %.0f | %lld | %.0f | %.2f | %.1f | %.2fx |\n", mc.name.c_str(),
                        thread_counts[ti], static_cast<long long>(n_prompt), s.prompt_batched, s.prompt_single,
                        static_cast<long long>(n_gen), s.generation, mb, gbs, gbs / baseline[ti].read);
        }
    }

    // ---- factored against dense ----
    std::printf(
        "\n## low-rank matrices: factored x -> U (S V^T x) against the same matrices multiplied out\n\n"
        "Random rank-r factors for every projection and the classifier, r = min(rows, cols) / 8; "
        "generation tok/s.\n\n| shape | threads | r (q) | MMACs/token dense | MMACs/token factored | "
        "dense tok/s | factored tok/s | speedup |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<ModelConfig> shapes;
    for (const ModelCase& mc : cases)
        if (mc.config.dim >= 64) shapes.push_back(mc.config);
    for (ModelConfig c : shapes) {
        c.shared_classifier = false;
        for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
            TransformerOptions o;
            o.n_threads = thread_counts[ti];
            o.max_context = std::min<int64_t>(c.context_length, 256);
            TransformerOptions dense_o = o;
            dense_o.allow_factored = false;
            auto f = Transformer::load(c, random_source(c, 8), o);
            auto d = Transformer::load(c, random_source(c, 8), dense_o);
            if (!f || !d) {
                std::fprintf(stderr, "bench_generate: %s\n", (!f ? f : d).message().c_str());
                return 1;
            }
            const int64_t n_gen = quick ? 32 : 128;
            const double fs = measure(*f, runs, 2, n_gen).generation;
            const double ds = measure(*d, runs, 2, n_gen).generation;
            std::printf(
                "| dim %lld, hidden %lld, %lld layers, vocab %lld | %d | %lld | %.2f | %.2f | %.0f | %.0f | "
                "%.2fx |\n",
                static_cast<long long>(c.dim), static_cast<long long>(c.hidden_dim), static_cast<long long>(c.n_layers),
                static_cast<long long>(c.vocab_size), thread_counts[ti],
                static_cast<long long>(f->weights().layers[0].wq.rank),
                static_cast<double>(d->matrix_macs_per_token()) / 1e6,
                static_cast<double>(f->matrix_macs_per_token()) / 1e6, ds, fs, fs / ds);
        }
    }
    return 0;
}
