#include "jobs/open_model_job.h"

#include "gkq/encoded_tensor.h"
#include "gkq/knot.h"
#include "gkq/naming.h"
#include "gkq/quantize.h"
#include "gkq/weights.h"

#include <filesystem>
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

Result<OpenedModel> openModelOrKnot(const std::string& path, const std::string& scratchDir,
                                    const ProgressFn& progress) {
    OpenedModel out;
    if (!is_knot_path(path)) {
        auto opened = ModelFile::open(path);
        if (!opened) return opened.status();
        out.model = std::make_shared<ModelFile>(std::move(opened).value());
        return out;
    }
    auto knot = KnotFile::open(path);
    if (!knot) return knot.status();
    KnotSummary s;
    s.path = path;
    s.producer = knot->header().producer;
    s.command = knot->header().command;
    s.preset = presetOf(s.command);
    s.file_bytes = knot->file_bytes();
    s.gzipped = knot->gzipped();
    s.n_records = knot->n_records();
    s.vocab = knot->header().vocab;
    std::vector<size_t> perMethod(static_cast<size_t>(Method::LowRankResidual) + 1, 0);
    bool ggufNames = false;
    for (const KnotEntry& e : knot->entries()) {
        s.n_params += e.n_elements();
        if (static_cast<size_t>(e.method) < perMethod.size()) ++perMethod[static_cast<size_t>(e.method)];
        ggufNames = ggufNames || parse_gguf_name(e.name).role != TensorRole::Other;
    }
    for (size_t m = 0; m < perMethod.size(); ++m)
        if (perMethod[m] > 0) s.methods.emplace_back(std::string(method_name(static_cast<Method>(m))), perMethod[m]);

    // Decode into a float32 model the readers open, named as the knot names its tensors (the writers name by
    // convention: HF for safetensors, GGUF for GGUF; llama2.c checkpoints read back with GGUF names too).
    std::error_code ec;
    std::filesystem::create_directories(scratchDir, ec);
    if (ec) return Status(StatusCode::IoError, scratchDir + ": cannot create: " + ec.message());
    const std::string stem = std::filesystem::path(path).filename().string();
    s.decoded_path = (std::filesystem::path(scratchDir) / (stem + (ggufNames ? ".gguf" : ".safetensors"))).string();
    auto rebuilt = reconstruct(path, s.decoded_path, 0, progress);
    if (!rebuilt) return rebuilt.status();
    auto opened = ModelFile::open(s.decoded_path);
    if (!opened) return opened.status().with_context(path + ": its decoded model");
    out.model = std::make_shared<ModelFile>(std::move(opened).value());
    out.knot = std::move(s);
    return out;
}

}  // namespace gkq::ui
