// bench_spectrum: gkq's exact spectrum (Gram matrix + dsyevd) against LAPACK's divide-and-conquer SVD
// (sgesdd, values only) on the same float32 matrices, and the randomized top-64 against the full spectrum.
// Every matrix is built as U diag(s) V^T in double from random orthonormal U, V, so the true singular values are
// known and both methods' errors are measured against them. Prints medians; ratios are ours / LAPACK.
//   bench_spectrum           n = 512, 1024, 2048, 4096 and 4096 x 11008 (about 10 minutes on 2 cores)
//   bench_spectrum --quick   n = 256, 512 and 512 x 1376 (seconds)
#include "gkq/spectrum.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace gkq;

namespace {

// The decaying spectrum of every benchmark matrix: s_i = (1 + i)^-1, i = 0..n-1 (Zipf-like: stable rank about
// 1.6, smallest value 1/n of the largest, so LAPACK's float32 accuracy on small values shows).
double spectrum_value(int64_t i) {
    return 1.0 / static_cast<double>(1 + i);
}

// Randomized top-k settings for the 4096 x 11008 case.
constexpr int64_t kTopK = 64;
constexpr int64_t kOversampling = 64;
constexpr int kPowerIterations = 2;

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
};

// (m, k) column-major with orthonormal columns: QR (dgeqrf + dorgqr) of a Gaussian matrix.
std::vector<double> orthonormal(int64_t m, int64_t k, uint64_t seed) {
    SplitMix64 rng{seed};
    std::vector<double> q(static_cast<size_t>(m * k));
    for (size_t i = 0; i < q.size(); i += 2) {
        const double r = std::sqrt(-2.0 * std::log(rng.uniform())), t = 6.283185307179586 * rng.uniform();
        q[i] = r * std::cos(t);
        if (i + 1 < q.size()) q[i + 1] = r * std::sin(t);
    }
    std::vector<double> tau(static_cast<size_t>(k));
    LAPACKE_dgeqrf(LAPACK_COL_MAJOR, int(m), int(k), q.data(), int(m), tau.data());
    LAPACKE_dorgqr(LAPACK_COL_MAJOR, int(m), int(k), int(k), q.data(), int(m), tau.data());
    return q;
}

struct TestMatrix {
    int64_t rows = 0, cols = 0;
    std::vector<float> w;   // (rows, cols) row-major
    std::vector<double> s;  // the true singular values, descending
};

TestMatrix build(int64_t rows, int64_t cols, uint64_t seed) {
    TestMatrix m;
    m.rows = rows;
    m.cols = cols;
    const int64_t n = std::min(rows, cols);
    m.s.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) m.s[i] = spectrum_value(i);
    std::vector<double> us = orthonormal(rows, n, seed);  // (rows, n), then U diag(s)
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) us[j * rows + i] *= m.s[j];
    const std::vector<double> v = orthonormal(cols, n, seed + 1);  // (cols, n)
    // Row-major W (rows, cols) is column-major W^T (cols, rows) = V (U S)^T.
    std::vector<double> wt(static_cast<size_t>(rows * cols));
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, int(cols), int(rows), int(n), 1.0, v.data(), int(cols),
                us.data(), int(rows), 0.0, wt.data(), int(cols));
    m.w.assign(wt.begin(), wt.end());
    return m;
}

double max_rel_error(const std::vector<double>& got, const std::vector<double>& want, size_t n) {
    double e = 0.0;
    for (size_t i = 0; i < n; ++i) e = std::max(e, std::fabs(got[i] - want[i]) / want[i]);
    return e;
}

// One case, measured back to back in each run (ours, LAPACK, then `extra` when given) so that the load of a
// shared machine falls on both alike; times are medians, the ratio is the median of the per-run ratios.
struct Comparison {
    double ours = 0.0, lapack = 0.0, extra = 0.0;  // median seconds
    double ratio = 0.0;                            // median of ours / lapack
    double extra_ratio = 0.0;                      // median of ours / extra
    double ours_error = 0.0, lapack_error = 0.0;   // max relative error against the true values
};

Comparison compare(const TestMatrix& m, int reps, const std::function<void()>& extra = {}) {
    std::vector<double> t_ours, t_lapack, t_extra, ratios, extra_ratios, s;
    std::vector<float> sf(m.s.size());
    for (int r = 0; r < reps; ++r) {
        double t0 = now();
        if (Status st = singular_values(m.w.data(), m.rows, m.cols, s); !st) {
            std::fprintf(stderr, "bench_spectrum: %s\n", st.message().c_str());
            std::exit(1);
        }
        t_ours.push_back(now() - t0);

        std::vector<float> a = m.w;  // sgesdd overwrites its input; the copy is outside the timing
        float dummy = 0.0f;
        t0 = now();
        // Row-major (rows, cols) is column-major (cols, rows): same singular values.
        const lapack_int info = LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'N', int(m.cols), int(m.rows), a.data(), int(m.cols),
                                               sf.data(), &dummy, 1, &dummy, 1);
        t_lapack.push_back(now() - t0);
        if (info != 0) {
            std::fprintf(stderr, "bench_spectrum: sgesdd info %d\n", int(info));
            std::exit(1);
        }
        ratios.push_back(t_ours.back() / t_lapack.back());
        if (extra) {
            t0 = now();
            extra();
            t_extra.push_back(now() - t0);
            extra_ratios.push_back(t_ours.back() / t_extra.back());
        }
    }
    Comparison c;
    c.ours = median(t_ours);
    c.lapack = median(t_lapack);
    c.ratio = median(ratios);
    if (extra) {
        c.extra = median(t_extra);
        c.extra_ratio = median(extra_ratios);
    }
    c.ours_error = max_rel_error(s, m.s, m.s.size());
    c.lapack_error = max_rel_error(std::vector<double>(sf.begin(), sf.end()), m.s, m.s.size());
    return c;
}

// The 1-minute load average: timings on a shared machine mean little without it.
std::string load_average() {
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return "unknown";
    char buf[64] = {};
    const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
    std::fclose(f);
    if (!ok) return "unknown";
    std::string s(buf);
    return s.substr(0, s.find(' '));
}

// Least-squares slope of log t against log n.
double fitted_exponent(const std::vector<double>& n, const std::vector<double>& t) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double k = static_cast<double>(n.size());
    for (size_t i = 0; i < n.size(); ++i) {
        const double x = std::log(n[i]), y = std::log(t[i]);
        sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            std::printf(
                "usage: bench_spectrum [--quick]\n"
                "  full spectrum (Gram + dsyevd) vs LAPACK sgesdd (values only) on square n = 512..4096 and\n"
                "  4096 x 11008 float32 matrices with s_i = 1/(1+i); randomized top-64 vs the full spectrum.\n"
                "  --quick  n = 256, 512 and 512 x 1376 only\n");
            return 0;
        } else {
            std::fprintf(stderr, "bench_spectrum: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    struct Case {
        int64_t rows, cols;
        int reps;
    };
    const std::vector<Case> squares =
        quick ? std::vector<Case>{{256, 256, 5}, {512, 512, 5}}
              : std::vector<Case>{{512, 512, 7}, {1024, 1024, 5}, {2048, 2048, 3}, {4096, 4096, 3}};
    const Case big = quick ? Case{512, 1376, 3} : Case{4096, 11008, 3};

    std::printf("bench_spectrum: OpenBLAS %d thread(s), %u CPU(s), load average %s; singular values s_i = 1/(1+i)\n\n",
                openblas_get_num_threads(), std::thread::hardware_concurrency(), load_average().c_str());
    std::printf("%-14s %5s %12s %12s %8s %14s %14s\n", "shape", "runs", "ours (s)", "sgesdd (s)", "ratio",
                "ours max rel", "sgesdd max rel");
    std::vector<double> ns, t_ours, t_lapack;
    auto print_row = [&](const Case& c, const Comparison& r) {
        const std::string shape = std::to_string(c.rows) + " x " + std::to_string(c.cols);
        std::printf("%-14s %5d %12.4f %12.4f %8.3f %14.2e %14.2e\n", shape.c_str(), c.reps, r.ours, r.lapack, r.ratio,
                    r.ours_error, r.lapack_error);
        std::fflush(stdout);
    };
    for (const Case& c : squares) {
        const Comparison r = compare(build(c.rows, c.cols, 1000 + c.rows + c.cols), c.reps);
        print_row(c, r);
        ns.push_back(double(c.rows));
        t_ours.push_back(r.ours);
        t_lapack.push_back(r.lapack);
    }

    // The big case also times the randomized top-k in each run, right after the two full spectra.
    const TestMatrix m = build(big.rows, big.cols, 1000 + big.rows + big.cols);
    const int64_t k = std::min<int64_t>(kTopK, std::min(m.rows, m.cols));
    RandomizedSvdOptions opt;
    opt.oversampling = kOversampling;
    opt.n_power_iterations = kPowerIterations;
    double top_error = 0.0;
    const Comparison r = compare(m, big.reps, [&] {
        auto top = randomized_svd(m.w.data(), m.rows, m.cols, k, opt);
        if (!top) {
            std::fprintf(stderr, "bench_spectrum: %s\n", top.message().c_str());
            std::exit(1);
        }
        top_error = max_rel_error(top->s, m.s, size_t(k));
    });
    print_row(big, r);
    std::printf("\nratio: ours / sgesdd, the median over runs of the two measured back to back (target <= 1.0)\n");
    std::printf(
        "\nrandomized top-%lld on %lld x %lld (oversampling %lld, %d power iterations, %d runs):\n"
        "  %.4f s vs full spectrum %.4f s: %.1fx faster (median of per-run ratios; target >= 20x);\n"
        "  top-%lld max rel error %.2e (target <= 1e-3)\n",
        (long long)k, (long long)m.rows, (long long)m.cols, (long long)kOversampling, kPowerIterations, big.reps,
        r.extra, r.ours, r.extra_ratio, (long long)k, top_error);

    std::printf("\nscaling with n (square):\n%8s %12s %12s\n", "n", "ours (s)", "sgesdd (s)");
    for (size_t i = 0; i < ns.size(); ++i) std::printf("%8.0f %12.4f %12.4f\n", ns[i], t_ours[i], t_lapack[i]);
    std::printf("fitted exponent (time ~ n^p, least squares over these n): ours p = %.2f, sgesdd p = %.2f\n",
                fitted_exponent(ns, t_ours), fitted_exponent(ns, t_lapack));
    std::printf("load average at the end: %s\n", load_average().c_str());
    return 0;
}
