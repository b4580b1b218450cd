// analyze_model: the spectrum of every 2-D tensor of a model, several tensors at a time, memory bounded, with a
// progress callback that can cancel. Workers take tensors in order from a shared counter; the calling thread only
// waits, reports progress and raises the stop flag.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/spectrum.h"

#include "common/blas_threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>

namespace gkq {

namespace {

double work_of(const TensorInfo& t) {
    const double r = static_cast<double>(t.rows()), c = static_cast<double>(t.cols());
    return r * c * std::min(r, c) + 1.0;
}

// Rows converted at a time from a model file's mapping (16 MiB of float32).
constexpr uint64_t kConvertChunkBytes = uint64_t{16} << 20;

// Tensor i as float32: a model file's tensor converted as stored (an unsupported type's message names the file's
// type), anything else (a knot record) as its Weights decodes it. A model file's tensor is converted a chunk of rows
// at a time, each chunk's mapped pages leaving the resident set once converted, so the peak is the float32 matrix
// and one chunk of the mapping — not the matrix twice over (without dropping them, analyzing an 8 B bf16 model kept
// all 16 GB it had read resident; converting the whole tensor at once held its bf16 pages beside its float32, 3 GB
// for Llama 3's embedding).
Result<std::vector<float>> values_of(const Weights& weights, size_t i) {
    const auto* file = dynamic_cast<const ModelFile*>(&weights);
    if (file == nullptr) return weights.read_f32(i);
    const Tensor& t = file->tensors()[i];
    const int64_t rows = t.rows(), cols = t.cols();
    std::vector<float> out;
    try {
        out.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Internal, "tensor '" + t.name + "': out of memory for its float32 copy");
    }
    const int64_t chunk_rows =
        std::max<int64_t>(1, static_cast<int64_t>(kConvertChunkBytes / (sizeof(float) * static_cast<uint64_t>(cols))));
    for (int64_t row0 = 0; row0 < rows; row0 += chunk_rows) {
        const int64_t n = std::min(chunk_rows, rows - row0);
        Status s = file->read_rows_f32(i, row0, n, out.data() + row0 * cols);
        if (s.code() == StatusCode::Unsupported && row0 == 0) {  // a type converted only whole (Q8_G)
            auto v = tensor_to_f32(t);
            if (v) file->drop_resident(i, 0, t.n_bytes);
            return v;
        }
        if (!s) return s;
    }
    return out;
}

// One tensor, start to finish. Unsupported types become `skipped`; other failures are returned.
Status analyze_tensor(const Weights& weights, size_t i, const AnalyzeOptions& opt, TensorSpectrum& out) {
    const auto t0 = std::chrono::steady_clock::now();
    const TensorInfo& t = weights.tensor_info(i);
    out.name = t.name;
    out.role = t.role;
    out.layer = t.layer;
    out.rows = t.shape[0];
    out.cols = t.shape[1];
    auto data = values_of(weights, i);
    if (!data) {
        if (data.status().code() == StatusCode::Unsupported) {
            out.skipped = data.message();
            return Status::ok();
        }
        return data.status();
    }
    const float* w = data->data();
    const int64_t rows = out.rows, cols = out.cols, n = std::min(rows, cols);
    out.frobenius_sq = frobenius_sq(w, rows, cols);
    if (!std::isfinite(out.frobenius_sq))
        return error(StatusCode::InvalidArgument, "tensor '" + t.name + "' holds NaN or Inf");
    if (opt.full) {
        if (Status s = singular_values(w, rows, cols, out.singular_values); !s)
            return s.with_context("tensor '" + t.name + "'");
        out.metrics = spectrum_metrics(out.singular_values.data(), n);
        out.heavy_tail = heavy_tail_metrics(out.singular_values.data(), n, rows, cols);
    }
    if (opt.top_k > 0) {
        auto top = randomized_svd(w, rows, cols, std::min(opt.top_k, n), opt.randomized);
        if (!top) return top.status().with_context("tensor '" + t.name + "'");
        out.top_k_values = std::move(top->s);
        if (opt.full) {
            double worst = 0.0;
            for (size_t i = 0; i < out.top_k_values.size(); ++i) {
                const double exact = out.singular_values[i];
                const double diff = std::fabs(out.top_k_values[i] - exact);
                worst = std::max(worst, exact > 0.0 ? diff / exact : diff);
            }
            out.top_k_max_rel_error = worst;
        } else {
            const bool complete = static_cast<int64_t>(out.top_k_values.size()) == n;
            out.metrics = spectrum_metrics(out.top_k_values.data(), static_cast<int64_t>(out.top_k_values.size()),
                                           complete, out.frobenius_sq);
            if (complete) {
                out.heavy_tail = heavy_tail_metrics(out.top_k_values.data(), n, rows, cols);
            } else {
                out.heavy_tail.power_law.reason = "needs the full spectrum (only the top " +
                                                  std::to_string(out.top_k_values.size()) + " values are known)";
                out.heavy_tail.marchenko_pastur.reason = out.heavy_tail.power_law.reason;
                out.heavy_tail.power_law.problem = FitProblem::PartialSpectrum;
                out.heavy_tail.marchenko_pastur.problem = FitProblem::PartialSpectrum;
                out.heavy_tail.lambda_max = out.metrics.s1 * out.metrics.s1;
                if (out.heavy_tail.lambda_max > 0.0)
                    out.heavy_tail.log_spectral_norm = std::log10(out.heavy_tail.lambda_max);
                if (out.frobenius_sq > 0.0) out.heavy_tail.log_norm = std::log10(out.frobenius_sq);
            }
        }
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status::ok();
}

}  // namespace

Result<std::vector<TensorSpectrum>> analyze_model(const Weights& model, const AnalyzeOptions& options,
                                                  const ProgressFn& progress) {
    if (!options.full && options.top_k <= 0)
        return error(StatusCode::InvalidArgument, "analyze_model: neither the full spectrum nor a top-k requested");
    if (options.top_k < 0) return error(StatusCode::InvalidArgument, "analyze_model: negative top_k");
    std::vector<size_t> indices;  // of the 2-D tensors, in tensor order
    std::vector<const TensorInfo*> todo;
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        if (t.n_dims() == 2 && t.shape[0] > 0 && t.shape[1] > 0) {
            indices.push_back(i);
            todo.push_back(&t);
        }
    }

    std::vector<TensorSpectrum> results;
    double total_work = 0.0;
    try {
        results.resize(todo.size());
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Internal, model.label() + ": out of memory");
    }
    for (const TensorInfo* t : todo) total_work += work_of(*t);
    if (todo.empty()) {
        if (!report_progress(progress, 1.0, ""))
            return error(StatusCode::Cancelled, model.label() + ": analysis cancelled");
        return results;
    }

    unsigned n_threads = options.n_threads > 0 ? static_cast<unsigned>(options.n_threads)
                                               : std::max(1u, std::thread::hardware_concurrency());
    n_threads = std::min<unsigned>(n_threads, static_cast<unsigned>(todo.size()));

    std::mutex mutex;
    std::condition_variable cv;
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    size_t n_running = n_threads;
    double done_work = 0.0;
    std::vector<size_t> finished;  // indices finished since the last progress report
    Status failure;

    auto worker = [&] {
        for (;;) {
            if (stop.load()) break;
            const size_t i = next.fetch_add(1);
            if (i >= todo.size()) break;
            Status s;
            try {
                s = analyze_tensor(model, indices[i], options, results[i]);
            } catch (const std::bad_alloc&) {
                s = error(StatusCode::Internal, "tensor '" + todo[i]->name + "': out of memory");
            }
            std::lock_guard<std::mutex> lock(mutex);
            if (!s && failure.is_ok()) {
                // A knot's read_f32 names the knot already.
                failure = s.message().rfind(model.label() + ": ", 0) == 0 ? s : s.with_context(model.label());
                stop = true;
            }
            done_work += work_of(*todo[i]);
            finished.push_back(i);
            cv.notify_one();
        }
        std::lock_guard<std::mutex> lock(mutex);
        --n_running;
        cv.notify_one();
    };

    bool cancelled = false;
    {
        std::optional<SingleThreadedBlas> blas;
        if (n_threads > 1) blas.emplace();
        std::vector<std::thread> threads;
        threads.reserve(n_threads);
        try {
            for (unsigned i = 0; i < n_threads; ++i) threads.emplace_back(worker);
        } catch (const std::system_error&) {
            // Fewer workers than asked for is fine; none at all is not.
            std::lock_guard<std::mutex> lock(mutex);
            n_running -= n_threads - threads.size();
            if (threads.empty()) return error(StatusCode::Internal, model.label() + ": cannot start a worker thread");
        }
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
            cv.wait(lock, [&] { return !finished.empty() || n_running == 0; });
            std::vector<size_t> batch;
            batch.swap(finished);
            const double fraction = done_work / total_work;
            const bool all_exited = n_running == 0;
            lock.unlock();
            // The callback runs on the caller's thread, outside the lock, once per finished tensor.
            for (size_t i : batch)
                if (!cancelled && !stop.load() && !report_progress(progress, std::min(1.0, fraction), todo[i]->name)) {
                    cancelled = true;
                    stop = true;
                }
            lock.lock();
            if (all_exited && finished.empty()) break;
        }
        lock.unlock();
        for (std::thread& th : threads) th.join();
    }
    if (!failure.is_ok()) return failure;
    if (cancelled) return error(StatusCode::Cancelled, model.label() + ": analysis cancelled");
    return results;
}

}  // namespace gkq
