#include "jobs/open_model_job.h"

#include "gkq/encoded_tensor.h"
#include "gkq/knot.h"

#include <map>
#include <sstream>

namespace gkq::ui {

double KnotSummary::bitsPerWeight() const {
    return n_params > 0 ? 8.0 * static_cast<double>(file_bytes) / static_cast<double>(n_params) : 0.0;
}

namespace {
std::string presetOf(const std::string& command) {
    std::istringstream words(command);
    std::string w, previous;
    while (words >> w) {
        if (previous == "--preset") return w;
        if (w.rfind("--preset=", 0) == 0) return w.substr(9);
        previous = w;
    }
    return {};
}
}  // namespace

Result<OpenedModel> openModelOrKnot(const std::string& path) {
    auto opened = open_weights(path);  // a knot: trailer, header and index checked; records when read
    if (!opened) return opened.status();
    OpenedModel out;
    out.model = std::shared_ptr<const Weights>(std::move(opened).value());
    if (auto tok = tokenizer_for_model(path, out.model->vocabulary(), out.model->config().vocab_size)) {
        TokenizerSummary& t = out.tokenizer;
        t.family = std::string(tokenizer_family_name(tok->family()));
        t.pre = tok->pre();
        t.size = tok->vocab_size();
        t.bos = tok->bos_id();
        t.eos = tok->eos_id();
        t.special = tok->special_ids();
        t.eog = tok->eog_ids();
    } else {
        out.tokenizer.error = tok.message();
    }
    const auto* knot = dynamic_cast<const KnotFile*>(out.model.get());
    if (knot == nullptr) return out;
    KnotSummary s;
    s.path = path;
    s.producer = knot->header().producer;
    s.command = knot->header().command;
    s.preset = presetOf(s.command);
    s.file_bytes = knot->file_bytes();
    s.gzipped = knot->gzipped();
    s.n_records = knot->n_records();
    s.vocab = knot->header().vocab;
    std::map<Method, size_t> perMethod;  // in Method order
    for (const KnotEntry& e : knot->entries()) {
        s.n_params += e.n_elements();
        ++perMethod[e.method];
    }
    for (const auto& [m, n] : perMethod) s.methods.emplace_back(std::string(method_name(m)), n);
    out.knot = std::move(s);
    return out;
}

}  // namespace gkq::ui
