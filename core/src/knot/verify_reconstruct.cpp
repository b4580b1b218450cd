// verify_knot and reconstruct: read every record of a knot (CRC, descriptor, codec payload checks) and decode it to
// float32 — to count and report, or to write a dense model that the readers (and other runtimes) load.
#include "formats/gguf_vocab.h"
#include "formats/hf_config.h"
#include "gkq/arch.h"
#include "gkq/atomic_file.h"
#include "gkq/model_check.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "knot/knot_format.h"
#include "knot/parallel.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace gkq {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The fields of an HF config.json that say which model it describes: equal values in an existing config.json and
// the one reconstruct would write mean the same architecture and shapes (dtype, rope theta, eps may differ). The
// keys come from the architecture table: the name keys, then the writer's keys of the shape hyperparameters.
std::vector<std::string> model_identity_keys(const ModelConfig& config) {
    const ArchNameKeys& names = arch_name_keys();
    std::vector<std::string> keys = {std::string(names.hf_architectures), std::string(names.hf_model_type)};
    for (const HParamKey& k : arch_for_writing(config.architecture).hf_keys) switch (k.param) {
            case HParam::Context:
            case HParam::RopeTheta:
            case HParam::NormEps:
            case HParam::SlidingWindow:
            case HParam::RopeScalingType:
            case HParam::RopeFactor:
            case HParam::RopeLowFreqFactor:
            case HParam::RopeHighFreqFactor:
            case HParam::RopeOriginalContext:
            case HParam::SlidingWindowPattern:
            case HParam::RopeLocalTheta:
            case HParam::AttnSoftcap:
            case HParam::FinalSoftcap:
            case HParam::QueryPreAttnScalar:
            case HParam::PartialRotary:
            case HParam::RopeDims:
            case HParam::Experts: break;  // the same shapes either way (the last three: read only, to refuse them)
            default: keys.emplace_back(k.key);
        }
    return keys;
}
// HF defaults these when a config.json leaves them out.
bool hf_may_omit(const ModelConfig& config, const std::string& key) {
    for (const HParamKey& k : arch_for_writing(config.architecture).hf_keys)
        if (k.key == key) return k.param == HParam::KvHeads || k.param == HParam::Tied || k.param == HParam::HeadDim;
    return false;
}
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json"};

// Refuses (InvalidArgument) to replace the config.json beside a safetensors output when it describes another model,
// or to leave another model's tokenizer files beside the new one. Returns the first differing field in the message.
Status check_files_beside(const std::string& out_path, const ModelConfig& config) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(out_path).parent_path();
    if (dir.empty()) dir = ".";
    const fs::path config_path = dir / "config.json";
    std::error_code ec;
    std::string tokenizers;
    for (const char* name : kTokenizerFiles)
        if (fs::exists(dir / name, ec)) tokenizers += std::string(tokenizers.empty() ? "" : ", ") + name;
    const std::string force = " (pass --force to replace it anyway, or write into another folder)";
    if (!fs::exists(config_path, ec)) {
        if (tokenizers.empty()) return Status::ok();
        return error(StatusCode::InvalidArgument, dir.string() + " holds " + tokenizers +
                                                      " but no config.json: they may belong to another model, and "
                                                      "would be left beside this one" +
                                                      force);
    }
    std::ifstream in(config_path, std::ios::binary);
    const nlohmann::json old = nlohmann::json::parse(in, nullptr, false);
    const nlohmann::json now = nlohmann::json::parse(hf_config_json(config, DType::F32));
    std::string differs;
    if (old.is_discarded() || !old.is_object()) {
        differs = "it is not a JSON object";
    } else {
        for (const std::string& key : model_identity_keys(config)) {
            if (!old.contains(key) && hf_may_omit(config, key)) continue;
            if (!old.contains(key) || old[key] != now[key]) {
                differs = "\"" + key + "\" is " + (old.contains(key) ? old[key].dump() : "absent") +
                          ", this model's is " + now[key].dump();
                break;
            }
        }
    }
    if (differs.empty()) return Status::ok();
    return error(StatusCode::InvalidArgument,
                 config_path.string() + " describes a different model (" + differs + ")" +
                     (tokenizers.empty() ? "" : "; its tokenizer files (" + tokenizers + ") are beside it") +
                     ": reconstruct would replace it" + force);
}

struct Checked {
    std::string failure;  // empty when the record is fine
    Method method = Method::F32;
};

}  // namespace

Result<VerifyReport> verify_knot(const std::string& path, int n_threads, const ProgressFn& progress) {
    auto knot = KnotFile::open(path);
    if (!knot) return knot.status();
    VerifyReport report;
    report.path = path;
    report.file_bytes = knot->file_bytes();
    report.gzipped = knot->gzipped();
    report.shard_index = knot->header().shard_index;
    report.shard_count = knot->header().shard_count;
    report.n_records = knot->n_records();
    report.count_by_method.assign(kMethodCount, 0);
    for (const KnotEntry& e : knot->entries()) {
        report.n_params += e.n_elements();
        report.stored_bytes += e.stored_bytes;
        report.raw_bytes += e.raw_bytes;
        ++report.count_by_method[static_cast<size_t>(e.method)];
    }
    // A knot whose records are fine but that cannot run is not ok: the model-consistency check, on the whole
    // model (a shard holds only part of the tensors, so only its config is checked).
    const std::vector<std::string> problems = report.shard_count == 1
                                                  ? model_problems(knot->header().config, knot->entries())
                                                  : config_problems(knot->header().config);
    for (const std::string& p : problems) report.failures.push_back(path + ": model: " + p);
    const int threads = knot::worker_count(n_threads, knot->n_records());
    std::optional<SingleThreadedBlas> one_blas_thread;
    if (threads > 1) one_blas_thread.emplace();

    auto produce = [&](size_t i) -> Result<Checked> {
        Checked c;
        c.method = knot->entries()[i].method;
        auto t = knot->read(i);
        if (!t) {
            c.failure = t.message();
            return c;
        }
        auto decoded = decode_tensor(*t);
        if (!decoded) {
            c.failure = knot::record_label(path, i, t->name) + ": payload does not decode: " + decoded.message();
            return c;
        }
        // A value that is not finite (an f16 overflow written by an older gkq, a source weight that was) makes every
        // logit of the model nan: the record is bad even though its bytes are intact.
        for (size_t k = 0; k < decoded->size(); ++k)
            if (!std::isfinite((*decoded)[k])) {
                c.failure = knot::record_label(path, i, t->name) + ": decodes to " +
                            ((*decoded)[k] != (*decoded)[k] ? "nan" : "inf") + " at element " + std::to_string(k);
                break;
            }
        return c;
    };
    auto consume = [&](size_t i, Checked&& c) -> Status {
        if (c.failure.empty())
            ++report.n_ok;
        else
            report.failures.push_back(std::move(c.failure));
        if (!report_progress(progress, static_cast<double>(i + 1) / static_cast<double>(report.n_records),
                             knot->entries()[i].name))
            return error(StatusCode::Cancelled, path + ": verification cancelled");
        return Status::ok();
    };
    if (Status s =
            knot::run_ordered<Checked>(knot->n_records(), threads, 4 * static_cast<size_t>(threads), produce, consume);
        !s)
        return s;
    return report;
}

Result<ReconstructReport> reconstruct(const std::string& knot_path, const std::string& out_path, int n_threads,
                                      const ProgressFn& progress, bool replace_other_model) {
    ReconstructReport report;
    report.path = out_path;
    if (ends_with(out_path, ".safetensors"))
        report.format = "safetensors";
    else if (ends_with(out_path, ".gguf"))
        report.format = "gguf";
    else if (ends_with(out_path, ".bin"))
        report.format = "llama2c";
    else
        return error(StatusCode::InvalidArgument, out_path +
                                                      ": unknown output format (the name must end in "
                                                      ".safetensors, .gguf or .bin)");
    auto knot = KnotFile::open(knot_path);
    if (!knot) return knot.status();
    const KnotHeader& h = knot->header();
    if (h.shard_count != 1)
        return error(StatusCode::InvalidArgument, knot_path + ": shard " + std::to_string(h.shard_index) + "/" +
                                                      std::to_string(h.shard_count) +
                                                      " of a model; merge the shards first (gkq merge)");
    if (report.format == "safetensors") {
        // config.json is written too: never over the knot itself, nor over another model's unless asked to.
        const std::filesystem::path parent = std::filesystem::path(out_path).parent_path();
        const std::string config_path =
            ((parent.empty() ? std::filesystem::path(".") : parent) / "config.json").string();
        if (Status s = check_output_not_input(config_path, {knot_path}); !s) return s;
        if (!replace_other_model)
            if (Status s = check_files_beside(out_path, h.config); !s) return s;
    }
    // A model that cannot run is not written out for other runtimes to fail on.
    if (Status s = check_model(knot_path, h.config, knot->entries()); !s) return s;

    // Streamed: the writer asks for each tensor in its turn and the record is decoded straight into the writer's
    // buffer, so memory holds one decoded tensor (plus its encoded record), never the model in float32.
    const size_t n = knot->n_records();
    std::vector<WriteTensor> tensors(n);
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
        const KnotEntry& e = knot->entries()[i];
        static_cast<TensorInfo&>(tensors[i]) = e;
        tensors[i].dtype = DType::F32;  // decoded; the record's own layout is not what is handed over
        tensors[i].fill = [&, i](float* out) -> Status {
            const KnotEntry& entry = knot->entries()[i];
            auto t = knot->read(i);
            if (!t) return t.status();
            if (Status s = decode_tensor_into(*t, out, static_cast<uint64_t>(entry.n_elements())); !s)
                return s.with_context(knot::record_label(knot_path, i, t->name));
            if (!report_progress(progress, static_cast<double>(++done) / static_cast<double>(n), entry.name))
                return error(StatusCode::Cancelled, out_path + ": reconstruction cancelled");
            return Status::ok();
        };
        report.n_params += e.n_elements();
    }
    (void)n_threads;  // one tensor at a time; a low-rank record's products use BLAS's own threads

    WriteOptions options;  // float32 everywhere: the decoded values exactly
    options.extra_metadata.set("gkq.knot_producer", MetaValue::of_string(h.producer));
    options.extra_metadata.set("gkq.knot_command", MetaValue::of_string(h.command));
    Vocabulary vocab = h.vocab;
    if (report.format == "gguf") {
        copy_source_tokenizer_keys(h.metadata, vocab, options.extra_metadata);
        report.vocabulary_note = describe(fit_vocabulary(vocab, options.extra_metadata, h.config.vocab_size));
    }
    Status written;
    if (report.format == "safetensors")
        written = write_safetensors(out_path, h.config, tensors, options);
    else if (report.format == "gguf")
        written = write_gguf(out_path, h.config, tensors, vocab, options);
    else
        written = write_llama2c(out_path, h.config, tensors);
    if (!written) return written;
    // the writers join a fused tensor's parts (llama2.c has none)
    std::vector<std::pair<TensorRole, int32_t>> roles;
    for (const WriteTensor& t : tensors) roles.emplace_back(t.role, t.layer);
    report.n_tensors =
        report.format == "llama2c" ? n : n_stored_tensors(arch_for_writing(h.config.architecture), roles);
    std::error_code ec;
    report.file_bytes = std::filesystem::file_size(out_path, ec);
    return report;
}

}  // namespace gkq
