// InferenceEngine: weights, cache, tokenizer and worker threads (see inference.h).
#include "server/inference.h"

#include "gkq/generate.h"
#include "gkq/model_check.h"
#include "gkq/sampler.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gkq::server {

using json = nlohmann::json;

namespace {

std::string dump(const json& j) {
    try {
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (...) {
        return "null";
    }
}

double ms(double seconds) {
    return seconds * 1e3;
}

// Holds back the bytes of an unfinished UTF-8 character at the end of a piece, so a streamed character split over
// two byte-fallback tokens reaches the client whole.
class Utf8Joiner {
public:
    std::string push(std::string_view piece) {
        m_pending.append(piece.data(), piece.size());
        size_t keep = 0;
        // Look back over at most 3 bytes for a lead byte whose sequence is not complete yet.
        for (size_t back = 1; back <= 3 && back <= m_pending.size(); ++back) {
            const auto c = static_cast<unsigned char>(m_pending[m_pending.size() - back]);
            if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking
            const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (need > back) keep = back;
            break;
        }
        std::string out = m_pending.substr(0, m_pending.size() - keep);
        m_pending.erase(0, m_pending.size() - keep);
        return out;
    }
    std::string flush() { return std::exchange(m_pending, {}); }

private:
    std::string m_pending;
};

}  // namespace

double InferenceEngine::now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string default_model_id(const std::string& weights_path) {
    std::string name = weights_path;
    if (const size_t q = name.find_first_of("?#"); q != std::string::npos && name.find("://") != std::string::npos)
        name.resize(q);
    while (!name.empty() && name.back() == '/') name.pop_back();
    if (const size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
    for (const char* ext : {".gz", ".knot", ".gguf", ".safetensors", ".bin"})
        if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
            name.resize(name.size() - std::strlen(ext));
    return name.empty() ? "gkq-model" : name;
}

struct InferenceEngine::Worker {
    explicit Worker(WeightCache& cache) : lender(cache) {}
    CacheLender lender;  // this worker's borrowing, with its own lookup counts
    std::optional<Transformer> model;
};

InferenceEngine::InferenceEngine(const ServerConfig& config, Metrics& metrics, PostFn post)
    : m_config(config), m_metrics(metrics), m_post(std::move(post)) {}

InferenceEngine::~InferenceEngine() {
    stop();
}

Status InferenceEngine::load() {
    const ServerConfig& c = m_config;
#if defined(__GLIBC__)
    // Loaded weights are megabyte buffers that the LRU frees and allocates again: with glibc's sliding mmap
    // threshold they would come from the heap after the first free and stay resident when freed, so the budget would
    // bound the live weights but not the process. Fixing the threshold keeps every such buffer its own mapping.
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
    Result<std::unique_ptr<Weights>> weights = error(StatusCode::Internal, "unset");
    if (c.use_cdn_fallback) {
        weights = open_remote_knot(c.weights_path);
    } else {
        WeightsOpenOptions o;
        o.memory_resident = c.memory_resident;
        weights = open_weights(c.weights_path, o);
    }
    if (!weights) return weights.status();
    m_weights = std::move(*weights);

    m_model_config = m_weights->config();
    // A model with its own classifier uses it whatever the header says (as Transformer::load does).
    m_model_config.shared_classifier = m_weights->index_of(TensorRole::Output, -1) < 0;
    // An architecture the forward pass cannot compute, named with what it lacks before its tensors are listed.
    if (const std::string problem = architecture_problem(m_model_config); !problem.empty())
        return error(StatusCode::Unsupported, m_weights->label() + ": " + problem);
    {
        std::vector<TensorInfo> shapes;
        for (size_t i = 0; i < m_weights->n_tensors(); ++i) shapes.push_back(m_weights->tensor_info(i));
        if (Status s = check_model(m_weights->label(), m_model_config, shapes); !s) return s;
    }

    // The tokenizer as generate finds it: --tokenizer, else the model's own vocabulary, else tok*.bin beside it.
    auto t =
        tokenizer_for_model(m_weights->label(), m_weights->vocabulary(), m_model_config.vocab_size, c.tokenizer_path);
    if (!t) {
        if (!c.tokenizer_path.empty()) return t.status();
        return error(t.status().code(), t.status().message() + ": pass a llama2.c tokenizer.bin (--tokenizer)");
    }
    m_tokenizer = std::make_unique<Tokenizer>(std::move(*t));

    WeightCacheOptions co;
    co.budget_bytes = c.cache_budget_mb << 20;
    co.policy = c.cache_policy;
    co.max_age_seconds = c.max_age_seconds;
    co.keep_reconstructions = !c.use_cdn_fallback;
    co.on_reconstruct = [this](double seconds, uint64_t) { m_metrics.reconstruction(seconds); };
    m_cache = std::make_unique<WeightCache>(m_weights, co);
    m_model_id = c.model_id.empty() ? default_model_id(c.weights_path) : c.model_id;

    // Build one Transformer now: a model the transformer cannot run fails here, not on the first request. Every
    // other worker shares its weights (lent by the same cache) with a KV cache of its own.
    TransformerOptions to;
    to.n_threads = c.n_threads;
    to.q8_activations = c.q8_activations;
    to.max_context = c.max_context;
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < std::max(1, c.n_workers); ++i) workers.push_back(std::make_unique<Worker>(*m_cache));
    {
        auto t = Transformer::load(workers[0]->lender, to);  // its errors name the weights
        if (!t) return t.status();
        workers[0]->model.emplace(std::move(*t));
        m_hold_per_request = c.use_cdn_fallback || workers[0]->model->loaded_weight_bytes() <= co.budget_bytes;
    }
    for (size_t i = 1; i < workers.size(); ++i) {
        auto t = workers[0]->model->share(to, &workers[i]->lender);
        if (!t) return t.status();
        workers[i]->model.emplace(std::move(*t));
    }
    m_weights_loaded = m_weights->n_tensors();

    std::lock_guard lock(m_mutex);
    for (auto& w : workers) m_workers.push_back(std::move(w));
    for (auto& w : m_workers) m_threads.emplace_back([this, wp = w.get()] { worker_main(*wp); });
    return Status::ok();
}

bool InferenceEngine::submit(InferenceJob job) {
    {
        std::lock_guard lock(m_mutex);
        if (m_stop || m_queue.size() >= static_cast<size_t>(std::max(0, m_config.max_queue))) return false;
        m_queue.push_back(std::move(job));
    }
    m_cv.notify_one();
    return true;
}

void InferenceEngine::stop() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        for (auto& j : m_queue) j.cancelled->store(true);
        for (auto& c : m_running) c->store(true);
    }
    m_cv.notify_all();
    for (auto& t : m_threads)
        if (t.joinable()) t.join();
    m_threads.clear();
}

size_t InferenceEngine::queue_depth() const {
    std::lock_guard lock(m_mutex);
    return m_queue.size();
}

size_t InferenceEngine::in_flight() const {
    std::lock_guard lock(m_mutex);
    return m_running.size();
}

size_t InferenceEngine::weights_loaded() const {
    return m_weights_loaded.load();
}

void InferenceEngine::worker_main(Worker& w) {
    for (;;) {
        InferenceJob job;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
            if (m_stop) return;
            job = std::move(m_queue.front());
            m_queue.pop_front();
            m_running.push_back(job.cancelled);
        }
        run(w, job);
        std::lock_guard lock(m_mutex);
        std::erase(m_running, job.cancelled);
    }
}

void InferenceEngine::run(Worker& w, InferenceJob& job) {
    const double t_start = now_seconds();
    const double queue_s = t_start - job.enqueued_at;
    if (m_config.on_inference_start) m_config.on_inference_start();
    const CompletionParams& p = job.params;
    auto respond = [&](Response r) {
        InferenceEvent e;
        e.conn_id = job.conn_id;
        e.job_id = job.job_id;
        e.response = std::move(r);
        m_post(std::move(e));
    };
    auto fail = [&](Response r) {
        m_metrics.inference(Metrics::InferenceResult::Failed, queue_s, now_seconds() - t_start, 0, 0);
        respond(std::move(r));
    };
    if (job.cancelled->load()) {
        m_metrics.inference(Metrics::InferenceResult::Cancelled, queue_s, 0, 0, 0);
        return;
    }

    // ---- the weights, lent by the cache: all of them for this request, or block by block while it runs
    Transformer& model = *w.model;
    w.lender.lookups = 0;
    w.lender.hits = 0;
    struct GiveBack {
        Transformer& t;
        ~GiveBack() { t.release_weights(); }
    } give_back{model};
    if (m_hold_per_request)
        if (Status s = model.hold_weights(); !s)
            return fail(api_error(500, "weights: " + s.message(), "server_error", "", "weights_unavailable"));
    const double t_loaded = now_seconds();

    // ---- prompt and limits
    const std::vector<int32_t> tokens = m_tokenizer->encode(p.prompt, true, false);
    const auto n_prompt = static_cast<int64_t>(tokens.size());
    const int64_t n_ctx = model.n_context();
    if (n_prompt >= n_ctx)
        return fail(api_error(400,
                              "the prompt is " + std::to_string(n_prompt) +
                                  " tokens (BOS included); the context "
                                  "holds " +
                                  std::to_string(n_ctx) + " positions, leaving none to generate",
                              "invalid_request_error", "prompt", "context_length_exceeded"));
    GenerateOptions go;
    go.steps = std::min(n_ctx, n_prompt + p.max_tokens - 1);
    const uint64_t seed = p.seed ? *p.seed
                                 : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                                       (job.job_id * 0x9E3779B97F4A7C15ull);
    SamplerOptions so;
    so.temperature = p.temperature;
    so.top_p = p.top_p;
    so.seed = seed;
    Sampler sampler(m_tokenizer->vocab_size(), so);

    const std::string id = "cmpl-" + std::to_string(job.job_id);
    const int64_t created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto sse = [&](const std::string& text, const json& finish, const json* usage) {
        json choice = {{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
        json event = {{"id", id},
                      {"object", "text_completion"},
                      {"created", created},
                      {"model", m_model_id},
                      {"choices", json::array({choice})}};
        if (usage != nullptr) event["usage"] = *usage;
        InferenceEvent e;
        e.kind = InferenceEvent::Kind::StreamData;
        e.conn_id = job.conn_id;
        e.job_id = job.job_id;
        e.data = "data: " + dump(event) + "\n\n";
        m_post(std::move(e));
    };
    if (p.stream) {
        InferenceEvent e;
        e.kind = InferenceEvent::Kind::StreamHead;
        e.conn_id = job.conn_id;
        e.job_id = job.job_id;
        m_post(std::move(e));
    }

    // ---- generate: the first n_prompt - 1 pieces are the prompt's own
    std::string text;
    int64_t n_pieces = 0, n_completion = 0;
    std::vector<int32_t> generated;
    Utf8Joiner joiner;
    auto collect = [&generated](int32_t id) { generated.push_back(id); };
    auto stats = generate(
        model, *m_tokenizer, sampler, tokens, go,
        [&](std::string_view piece) {
            if (n_pieces++ < n_prompt - 1) return !job.cancelled->load();
            n_completion++;
            text.append(piece.data(), piece.size());
            if (p.stream) {
                std::string whole = joiner.push(piece);
                if (!whole.empty()) sse(whole, nullptr, nullptr);
            }
            return !job.cancelled->load();
        },
        collect);
    const double t_end = now_seconds();
    if (job.cancelled->load()) {
        m_metrics.inference(Metrics::InferenceResult::Cancelled, queue_s, t_end - t_start, n_prompt, n_completion);
        return;
    }
    if (!stats) {
        m_metrics.inference(Metrics::InferenceResult::Failed, queue_s, t_end - t_start, n_prompt, n_completion);
        Response err = api_error(500, "generation failed: " + stats.message(), "server_error");
        if (!p.stream) return respond(std::move(err));
        // Headers are gone already: the error travels as an event of the stream, as OpenAI's own do.
        InferenceEvent e;
        e.kind = InferenceEvent::Kind::StreamData;
        e.conn_id = job.conn_id;
        e.job_id = job.job_id;
        e.data = "data: " + err.body + "\n\n";
        m_post(std::move(e));
    } else {
        m_metrics.inference(Metrics::InferenceResult::Ok, queue_s, t_end - t_start, n_prompt, n_completion);
        const char* finish = stats->stopped ? "stop" : "length";
        json usage = {{"prompt_tokens", n_prompt},
                      {"completion_tokens", n_completion},
                      {"total_tokens", n_prompt + n_completion}};
        if (p.stream) {
            if (std::string rest = joiner.flush(); !rest.empty()) sse(rest, nullptr, nullptr);
            sse("", finish, &usage);
        } else if (p.openai) {
            json choice = {{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
            Response r;
            r.body = dump({{"id", id},
                           {"object", "text_completion"},
                           {"created", created},
                           {"model", m_model_id},
                           {"choices", json::array({choice})},
                           {"usage", usage}});
            return respond(std::move(r));
        } else {
            const double gen_s = stats->generate_seconds;
            Response r;
            json body = {{"text", text},
                         {"model", m_model_id},
                         {"prompt_tokens", n_prompt},
                         {"completion_tokens", n_completion},
                         {"finish_reason", finish},
                         {"seed", seed},
                         {"timings",
                          {{"queue_ms", ms(queue_s)},
                           {"weights_ms", ms(t_loaded - t_start)},
                           {"prompt_ms", ms(stats->prompt_seconds)},
                           {"generate_ms", ms(gen_s)},
                           {"total_ms", ms(t_end - job.enqueued_at)},
                           {"tokens_per_second", gen_s > 0 ? double(stats->n_generate_forwards) / gen_s : 0.0}}},
                         {"cache",
                          {{"lookups", w.lender.lookups},
                           {"hits", w.lender.hits},
                           {"misses", w.lender.lookups - w.lender.hits},
                           {"model_rebuilt", w.lender.lookups > w.lender.hits}}}};
            if (p.return_tokens) {
                body["tokens"] = generated;
                body["prompt_ids"] = tokens;
            }
            r.body = dump(body);
            return respond(std::move(r));
        }
    }
    // the end of a stream
    InferenceEvent e;
    e.kind = InferenceEvent::Kind::StreamData;
    e.conn_id = job.conn_id;
    e.job_id = job.job_id;
    e.data = "data: [DONE]\n\n";
    m_post(std::move(e));
    InferenceEvent end;
    end.kind = InferenceEvent::Kind::StreamEnd;
    end.conn_id = job.conn_id;
    end.job_id = job.job_id;
    m_post(std::move(end));
}

}  // namespace gkq::server
