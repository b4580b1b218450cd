// An evaluation's report as JSON (the document `gkq eval --json` prints) and back.
#include "gkq/workflows.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace gkq {

namespace {

using nlohmann::json;

json perplexity_json(const PerplexityStats& s) {
    return {{"tokens", s.n_tokens},         {"bytes", s.n_bytes},         {"mean_nll", s.mean_nll},
            {"mean_nll_se", s.mean_nll_se}, {"perplexity", s.perplexity}, {"bits_per_byte", s.bits_per_byte}};
}

// Reads fields of one document, remembering the first error (label + JSON path).
class Reader {
public:
    explicit Reader(std::string label) : m_label(std::move(label)) {}

    const json* object(const json& parent, const std::string& path, const char* key) {
        const json* v = member(parent, path, key);
        if (v != nullptr && !v->is_object()) return fail(path + "." + key, "is not an object");
        return v;
    }
    template <class T>
    void number(const json& parent, const std::string& path, const char* key, T& out) {
        const json* v = member(parent, path, key);
        if (v == nullptr) return;
        if (!v->is_number()) {
            fail(path + "." + key, "is not a number");
            return;
        }
        out = v->get<T>();
    }
    void string(const json& parent, const std::string& path, const char* key, std::string& out) {
        const json* v = member(parent, path, key);
        if (v == nullptr) return;
        if (!v->is_string()) {
            fail(path + "." + key, "is not a string");
            return;
        }
        out = v->get<std::string>();
    }
    void strings(const json& parent, const std::string& path, const char* key, std::vector<std::string>& out) {
        const json* v = member(parent, path, key);
        if (v == nullptr) return;
        if (!v->is_array()) {
            fail(path + "." + key, "is not an array");
            return;
        }
        out.clear();
        for (size_t i = 0; i < v->size(); ++i) {
            if (!(*v)[i].is_string()) {
                fail(path + "." + key + "[" + std::to_string(i) + "]", "is not a string");
                return;
            }
            out.push_back((*v)[i].get<std::string>());
        }
    }
    void protocol(const json& parent, const std::string& path, const char* key, EvalProtocol& p) {
        const json* o = object(parent, path, key);
        if (o == nullptr) return;
        const std::string at = path + "." + key;
        std::string name, description;
        string(*o, at, "name", name);
        string(*o, at, "description", description);  // derived from the fields below
        strings(*o, at, "separators", p.separators);
        number(*o, at, "n_separators", p.n_separators);
        number(*o, at, "n_documents", p.n_documents);
        if (m_error) return;
        EvalProtocol stream, per_document;
        per_document.per_document = true;
        p.per_document = name == per_document.name();
        if (!p.per_document && name != stream.name())
            fail(at + ".name", "is '" + name + "', not '" + stream.name() + "' or '" + per_document.name() + "'");
    }
    void perplexity(const json& parent, const std::string& path, const char* key, PerplexityStats& s) {
        const json* o = object(parent, path, key);
        if (o == nullptr) return;
        const std::string p = path + "." + key;
        number(*o, p, "tokens", s.n_tokens);
        number(*o, p, "bytes", s.n_bytes);
        number(*o, p, "mean_nll", s.mean_nll);
        number(*o, p, "mean_nll_se", s.mean_nll_se);
        number(*o, p, "perplexity", s.perplexity);
        number(*o, p, "bits_per_byte", s.bits_per_byte);
    }
    const std::optional<Status>& status() const { return m_error; }

private:
    const json* member(const json& parent, const std::string& path, const char* key) {
        if (m_error) return nullptr;
        auto it = parent.find(key);
        if (it == parent.end()) return fail(path + "." + key, "is missing");
        return &*it;
    }
    const json* fail(const std::string& path, const std::string& why) {
        if (!m_error) m_error = error(StatusCode::InvalidArgument, m_label + ": " + path + " " + why);
        return nullptr;
    }

    std::string m_label;
    std::optional<Status> m_error;
};

}  // namespace

std::string eval_run_json(const EvalRun& run) {
    const EvalReport& r = run.report;
    json j = {{"text", r.text_label}, {"ctx", r.n_ctx},     {"stride", r.stride},  {"windows", r.n_windows},
              {"tokens", r.n_tokens}, {"bytes", r.n_bytes}, {"seconds", r.seconds}};
    const EvalProtocol& p = run.protocol;
    j["protocol"] = {{"name", p.name()},
                     {"description", p.describe()},
                     {"separators", p.separators},
                     {"n_separators", p.n_separators},
                     {"n_documents", p.n_documents}};
    if (!r.compared) {
        j["model"] = run.model;
        j["perplexity"] = perplexity_json(r.single);
    } else {
        const CompareStats& c = r.compare;
        j["base"] = run.model;
        j["candidate"] = run.candidate;
        j["base_perplexity"] = perplexity_json(c.base);
        j["candidate_perplexity"] = perplexity_json(c.candidate);
        j["kld"] = {{"mean", c.mean_kld}, {"se", c.mean_kld_se}, {"median", c.median_kld},
                    {"p99", c.kld_p99},   {"p99_9", c.kld_p999}, {"max", c.max_kld}};
        // What the sums ran over: the whole vocabulary, or the compact base's top tokens plus one bucket.
        j["kld"]["over"] = {{"vocab", c.n_vocab}, {"base_top_k", c.kld_top_k}, {"exact", c.kld_exact()}};
        j["same_top"] = {{"fraction", c.same_top}, {"se", c.same_top_se}};
        j["rms_delta_p"] = {{"value", c.rms_delta_p}, {"se", c.rms_delta_p_se}};
        j["ppl_ratio"] = {
            {"value", c.ppl_ratio}, {"se", c.ppl_ratio_se}, {"ln", c.ln_ppl_ratio}, {"ln_se", c.ln_ppl_ratio_se}};
    }
    return j.dump(2);
}

Result<EvalRun> parse_eval_run_json(std::string_view text, const std::string& label) {
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) return error(StatusCode::Corrupt, label + ": not a JSON document");
    if (!j.is_object()) return error(StatusCode::InvalidArgument, label + ": the document is not an object");
    Reader rd(label);
    EvalRun run;
    EvalReport& r = run.report;
    const std::string top = "$";
    rd.string(j, top, "text", r.text_label);
    rd.number(j, top, "ctx", r.n_ctx);
    rd.number(j, top, "stride", r.stride);
    rd.number(j, top, "windows", r.n_windows);
    rd.number(j, top, "tokens", r.n_tokens);
    rd.number(j, top, "bytes", r.n_bytes);
    if (j.contains("seconds")) rd.number(j, top, "seconds", r.seconds);  // dropped by tools that compare reports
    rd.protocol(j, top, "protocol", run.protocol);
    r.compared = !j.contains("model");
    if (!r.compared) {
        rd.string(j, top, "model", run.model);
        rd.perplexity(j, top, "perplexity", r.single);
    } else {
        CompareStats& c = r.compare;
        rd.string(j, top, "base", run.model);
        rd.string(j, top, "candidate", run.candidate);
        rd.perplexity(j, top, "base_perplexity", c.base);
        rd.perplexity(j, top, "candidate_perplexity", c.candidate);
        if (const json* k = rd.object(j, top, "kld")) {
            rd.number(*k, "$.kld", "mean", c.mean_kld);
            rd.number(*k, "$.kld", "se", c.mean_kld_se);
            rd.number(*k, "$.kld", "median", c.median_kld);
            rd.number(*k, "$.kld", "p99", c.kld_p99);
            rd.number(*k, "$.kld", "p99_9", c.kld_p999);
            rd.number(*k, "$.kld", "max", c.max_kld);
            if (k->contains("over")) {  // absent in reports written before it was added
                if (const json* o = rd.object(*k, "$.kld", "over")) {
                    rd.number(*o, "$.kld.over", "vocab", c.n_vocab);
                    rd.number(*o, "$.kld.over", "base_top_k", c.kld_top_k);
                }
            }
        }
        if (const json* s = rd.object(j, top, "same_top")) {
            rd.number(*s, "$.same_top", "fraction", c.same_top);
            rd.number(*s, "$.same_top", "se", c.same_top_se);
        }
        if (const json* d = rd.object(j, top, "rms_delta_p")) {
            rd.number(*d, "$.rms_delta_p", "value", c.rms_delta_p);
            rd.number(*d, "$.rms_delta_p", "se", c.rms_delta_p_se);
        }
        if (const json* p = rd.object(j, top, "ppl_ratio")) {
            rd.number(*p, "$.ppl_ratio", "value", c.ppl_ratio);
            rd.number(*p, "$.ppl_ratio", "se", c.ppl_ratio_se);
            rd.number(*p, "$.ppl_ratio", "ln", c.ln_ppl_ratio);
            rd.number(*p, "$.ppl_ratio", "ln_se", c.ln_ppl_ratio_se);
        }
    }
    if (rd.status()) return *rd.status();
    return run;
}

}  // namespace gkq
