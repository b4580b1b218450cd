// gkq export (gkq/export.h): every tensor of a knot or model file planned (kept bytes, dense, or llama.cpp's type
// for it), then written by write_gguf one tensor at a time, so memory stays at one decoded matrix.
#include "gkq/export.h"

#include "codec/llama_mix.h"
#include "formats/gguf_vocab.h"
#include "gkq/arch.h"
#include "gkq/knot.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "gkq/tokenizer.h"
#include "gkq/type_traits.h"

#include <filesystem>
#include <memory>
#include <optional>

namespace gkq {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A stored type GGUF holds and gkq can read back (what keeping a tensor's bytes needs).
bool gguf_keeps(DType t) {
    const TypeTraits& tr = type_traits(t);
    return t != DType::Other && tr.ggml_id >= 0 && tr.block_bytes > 0 && tr.to_f32 != nullptr && t != DType::F64;
}

}  // namespace

std::vector<std::string> export_type_names() {
    std::vector<std::string> names;
    for (const LlamaFileType& f : llama_file_types()) names.emplace_back(f.name);
    return names;
}

Result<ExportReport> export_gguf(const std::string& in_path, const std::string& out_path, const ExportOptions& options,
                                 const ProgressFn& progress) {
    if (!ends_with(out_path, ".gguf"))
        return error(StatusCode::InvalidArgument, out_path + ": gkq export writes GGUF (the name must end in .gguf)");
    const LlamaFileType* file_type = nullptr;
    if (!options.type.empty()) {
        file_type = find_llama_file_type(options.type);
        if (file_type == nullptr) {
            std::string known;
            for (const std::string& n : export_type_names()) known += (known.empty() ? "" : ", ") + n;
            return error(StatusCode::InvalidArgument,
                         "unknown export type '" + options.type + "' (known: " + known + ")");
        }
    }
    if (options.dense != DType::F16 && options.dense != DType::F32)
        return error(StatusCode::InvalidArgument,
                     "dense matrices are written f16 or f32, not " + std::string(dtype_name(options.dense)));

    // The source: a whole knot (its records, header vocabulary and the source model's metadata) or a model file.
    std::unique_ptr<Weights> weights;
    Metadata source_meta;
    Vocabulary vocab;
    std::string producer, command;
    if (is_knot_path(in_path)) {
        auto knot = KnotFile::open(in_path);
        if (!knot) return knot.status();
        const KnotHeader& h = knot->header();
        if (h.shard_count != 1)
            return error(StatusCode::InvalidArgument, in_path + ": shard " + std::to_string(h.shard_index) + "/" +
                                                          std::to_string(h.shard_count) +
                                                          " of a model; merge the shards first (gkq merge)");
        if (Status s = check_model(in_path, h.config, knot->entries()); !s) return s;
        source_meta = h.metadata;
        vocab = h.vocab;
        producer = h.producer;
        command = h.command;
        weights = std::make_unique<KnotFile>(std::move(*knot));
    } else {
        auto file = ModelFile::open(in_path);
        if (!file) return file.status();
        if (Status s = check_model(in_path, file->config(), file->tensors()); !s) return s;
        source_meta = file->metadata();
        // a llama2.c checkpoint's tokenizer.bin beside it, or a Hugging Face folder's tokenizer (with its merges,
        // pre-tokenizer and special-token keys), as generate finds it
        auto found = vocabulary_for_model(in_path, file->vocabulary(), file->config().vocab_size);
        if (!found) return found.status().with_context("llama.cpp needs the vocabulary in the GGUF");
        vocab = std::move(found->vocab);
        for (const auto& [key, value] : found->keys.entries) source_meta.set(key, value);
        weights = std::make_unique<ModelFile>(std::move(*file));
    }
    const ModelConfig& config = weights->config();
    const ArchSpec& arch = arch_for_writing(config.architecture);

    ExportReport report;
    report.path = out_path;
    const size_t n = weights->n_tensors();
    std::vector<TensorRole> roles;
    for (size_t i = 0; i < n; ++i) roles.push_back(weights->tensor_info(i).role);
    std::optional<LlamaTypePlanner> planner;
    if (file_type) planner.emplace(*file_type, config, roles);

    std::vector<WriteTensor> tensors(n);
    size_t done = 0;
    auto step = [&](const std::string& name) -> Status {
        if (!report_progress(progress, static_cast<double>(++done) / static_cast<double>(n), name))
            return error(StatusCode::Cancelled, out_path + ": export cancelled");
        return Status::ok();
    };
    const Weights& w = *weights;
    for (size_t i = 0; i < n; ++i) {
        const TensorInfo& info = w.tensor_info(i);
        ExportedTensor e;
        e.name =
            info.role == TensorRole::Other ? info.name : tensor_name(arch, NameFormat::Gguf, info.role, info.layer);
        if (e.name.empty()) e.name = info.name;  // a part of a fused tensor (its view's name)
        e.shape = info.shape;
        e.stored = info.dtype;
        report.n_params += info.n_elements();
        WriteTensor& t = tensors[i];
        t.role = info.role;
        t.layer = info.layer;
        t.shape = info.shape;
        t.name = info.name;
        const bool matrix = info.shape.size() >= 2;
        if (planner) {
            // a fused tensor's parts (Phi-3's attn_qkv, ffn_up) take one type, as llama-quantize's one tensor
            const LlamaTypePlanner::Choice c = planner->next(arch, info.role, info.layer, info.shape);
            e.wanted = c.wanted;
            e.written = c.type;
            if (c.fell_back) ++report.n_fell_back;
        } else if (matrix && gguf_keeps(info.dtype)) {
            e.wanted = e.written = info.dtype;
            e.copied = true;
        } else {
            e.wanted = e.written = matrix ? options.dense : DType::F32;
        }
        t.store_as = e.written;  // t.dtype stays F32: what fill hands over
        if (e.copied) {
            t.fill_stored = [&w, i, step, name = e.name](std::vector<uint8_t>& bytes) -> Status {
                auto s = w.read_stored(i);
                if (!s) return s.status();
                bytes.assign(s->data.begin(), s->data.end());
                // Copied: the mapped bytes leave the resident set (a model file), so exporting a model larger than
                // memory keeps only the tensor in hand.
                if (const auto* file = dynamic_cast<const ModelFile*>(&w)) file->drop_resident(i, 0, bytes.size());
                return step(name);
            };
        } else {
            t.fill = [&w, i, step, name = e.name, count = info.n_elements()](float* out) -> Status {
                auto f = w.read_f32(i);
                if (!f) return f.status();
                if (static_cast<int64_t>(f->size()) != count)
                    return error(StatusCode::Internal,
                                 "decoded " + std::to_string(f->size()) + " values, not " + std::to_string(count));
                std::copy(f->begin(), f->end(), out);
                return step(name);
            };
        }
        auto bytes = dtype_storage_bytes(e.written, static_cast<uint64_t>(info.n_elements()));
        e.bytes = bytes ? *bytes : 0;
        report.tensors.push_back(std::move(e));
    }
    std::vector<std::pair<TensorRole, int32_t>> written;
    for (size_t i = 0; i < n; ++i) written.emplace_back(w.tensor_info(i).role, w.tensor_info(i).layer);
    report.n_file_tensors = n_stored_tensors(arch, written);

    WriteOptions wo;
    wo.dtype = options.dense;  // every tensor has its own type; this one is the file's label when all matrices are it
    std::optional<DType> one_type;
    bool uniform = true;
    for (const ExportedTensor& e : report.tensors)
        if (e.shape.size() >= 2) {
            if (one_type && *one_type != e.written) uniform = false;
            one_type = e.written;
        }
    if (uniform && one_type) wo.dtype = *one_type;
    copy_source_tokenizer_keys(source_meta, vocab, wo.extra_metadata);
    report.vocabulary_note = describe(fit_vocabulary(vocab, wo.extra_metadata, config.vocab_size));
    // The end-of-turn, end-of-message and fill-in-the-middle tokens gkq found by text, stated as llama.cpp's converter
    // states BOS and EOS: without the keys llama.cpp looks for them by text in an order of its own (see
    // special_ids_by_text). The source's own keys, copied above, stay.
    auto unstated = special_ids_unstated(wo.extra_metadata, vocab.tokens, out_path);
    if (!unstated) return unstated.status();
    for (const auto& [key, id] : special_id_keys(*unstated))
        wo.extra_metadata.set(key, MetaValue::of_uint(static_cast<uint64_t>(id), MetaType::U32));
    if (!file_type && uniform && one_type)  // llama.cpp's label of a file whose matrices are all one type
        for (const LlamaFileType& f : llama_file_types())
            if (!f.mixture && f.base == *one_type) file_type = &f;
    if (file_type) wo.extra_metadata.set("general.file_type", MetaValue::of_uint(file_type->ftype, MetaType::U32));
    if (!producer.empty()) wo.extra_metadata.set("gkq.knot_producer", MetaValue::of_string(producer));
    if (!command.empty()) wo.extra_metadata.set("gkq.knot_command", MetaValue::of_string(command));
    if (Status s = write_gguf(out_path, config, tensors, vocab, wo); !s) return s;
    std::error_code ec;
    report.file_bytes = std::filesystem::file_size(out_path, ec);
    return report;
}

}  // namespace gkq
