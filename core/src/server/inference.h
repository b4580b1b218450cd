// InferenceEngine: the served model — its Weights, the weight cache that owns their loaded form, the tokenizer — and
// the worker threads that run generations. A job's output goes back to the event loop as events (a whole response,
// or a stream's head, data and end), through `post`, which must be thread-safe and wake the loop.
//
// Each worker keeps a Transformer (its own KV cache) whose weights are lent by the cache, never copied. When the
// whole model fits the cache budget (or in CDN mode, where nothing is cached), a generation borrows every weight
// once at its start and gives them back at its end; otherwise the transformer borrows them one step of the forward
// pass at a time (a block), so the cache budget bounds the weights in memory: its entries plus one step per worker.
// A cache too small for the model then loads layers again as they are needed, as the documents' "hot layers" design
// says.
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
    const Weights* weights() const { return m_weights.get(); }
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
    std::shared_ptr<Weights> m_weights;
    std::unique_ptr<WeightCache> m_cache;
    bool m_hold_per_request = true;  // the whole model fits the budget (or nothing is cached): borrow it per request
    std::unique_ptr<Tokenizer> m_tokenizer;
    ModelConfig m_model_config;
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
