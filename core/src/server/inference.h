// InferenceEngine: the served model — its weight store, the reconstructed-weight cache, the tokenizer — and the
// worker threads that run generations. A job's output goes back to the event loop as events (a whole response,
// or a stream's head, data and end), through `post`, which must be thread-safe and wake the loop.
//
// Each worker keeps a Transformer (its own KV cache). Before every generation it looks up every weight in the
// cache; when each lookup returns the very reconstruction its Transformer was built from (same serials), the
// Transformer is reused as is, otherwise it is rebuilt from the looked-up values. So a cache too small for the
// model, an expired entry, or CDN mode (nothing cached) costs a rebuild per request, as the documents' design
// implies; the CPU Transformer keeps its own dense copy of the weights while it runs.
#pragma once

#include "gkq/server.h"
#include "gkq/weight_cache.h"
#include "server/api.h"
#include "server/http_response.h"
#include "server/metrics.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gkq {
class Tokenizer;
}

namespace gkq::server {

struct InferenceEvent {
    enum class Kind { Response, StreamHead, StreamData, StreamEnd };
    Kind kind = Kind::Response;
    uint64_t conn_id = 0;
    uint64_t job_id = 0;
    Response response;  // Response
    std::string data;   // StreamData: bytes of the event stream
};

struct InferenceJob {
    uint64_t conn_id = 0;
    uint64_t job_id = 0;
    CompletionParams params;
    double enqueued_at = 0;  // seconds, steady clock
    std::shared_ptr<std::atomic<bool>> cancelled;
};

class InferenceEngine {
public:
    using PostFn = std::function<void(InferenceEvent)>;

    InferenceEngine(const ServerConfig& config, Metrics& metrics, PostFn post);
    ~InferenceEngine();

    // Opens the store, builds the cache and tokenizer, checks the model, starts the workers. Blocking; called
    // once, on the loader thread.
    Status load();

    // Queues a job; false when max_queue jobs already wait.
    bool submit(InferenceJob job);
    // Cancels everything and joins the workers.
    void stop();

    size_t queue_depth() const;
    size_t in_flight() const;
    size_t weights_loaded() const;
    // Valid after load() succeeded.
    const WeightStore* store() const { return m_store.get(); }
    const WeightCache* cache() const { return m_cache.get(); }
    const std::string& model_id() const { return m_model_id; }
    const ModelConfig& model_config() const { return m_model_config; }

    static double now_seconds();

private:
    struct Worker;
    void worker_main(Worker& w);
    void run(Worker& w, InferenceJob& job);

    ServerConfig m_config;
    Metrics& m_metrics;
    PostFn m_post;
    std::shared_ptr<WeightStore> m_store;
    std::unique_ptr<WeightCache> m_cache;
    std::unique_ptr<Tokenizer> m_tokenizer;
    ModelConfig m_model_config;
    std::vector<size_t> m_needed;  // store indices of the weights the transformer takes
    std::string m_model_id;
    std::atomic<size_t> m_weights_loaded{0};

    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<InferenceJob> m_queue;
    std::vector<std::shared_ptr<std::atomic<bool>>> m_running;  // cancel flags of running jobs
    bool m_stop = false;
    std::vector<std::unique_ptr<Worker>> m_workers;
    std::vector<std::thread> m_threads;
};

// The model id a weights path or URL gets by default: its last path segment without .gz / .knot / extension.
std::string default_model_id(const std::string& weights_path);

}  // namespace gkq::server
