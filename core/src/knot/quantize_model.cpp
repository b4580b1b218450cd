// quantize_model and merge_knots: a model (or one shard of it) into a knot, and shard knots into one. Workers
// convert, encode and compress tensors; the calling thread writes the records in source order, so the file is the
// same whatever the thread count, and a merge of shards equals an unsharded run byte for byte.
#include "gkq/convert.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/quantize_fields.h"
#include "knot/knot_format.h"
#include "knot/parallel.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

namespace gkq {

namespace {

uint64_t index_entry_bytes(const KnotEntry& e) {
    return knot::kIndexEntryPrefixBytes + knot::descriptor_bytes(e);
}

struct Encoded {
    KnotRecord record;
    TensorReport report;
};

}  // namespace

uint32_t knot_group(int32_t layer) {
    return layer < 0 ? 0u : static_cast<uint32_t>(layer) + 1u;
}

bool in_shard(int32_t layer, uint32_t shard_index, uint32_t shard_count) {
    return shard_count > 0 && knot_group(layer) % shard_count == shard_index;
}

double QuantizedTensor::bits_per_weight() const {
    const int64_t n = codec.n_elements();
    return n > 0 ? 8.0 * static_cast<double>(bytes_on_disk()) / static_cast<double>(n) : 0.0;
}

double QuantizeReport::bits_per_weight() const {
    return n_params > 0 ? 8.0 * static_cast<double>(file_bytes) / static_cast<double>(n_params) : 0.0;
}
uint64_t QuantizeReport::raw_payload_bytes() const {
    uint64_t n = 0;
    for (const QuantizedTensor& q : tensors) n += q.codec.payload_bytes;
    return n;
}
uint64_t QuantizeReport::stored_payload_bytes() const {
    uint64_t n = 0;
    for (const QuantizedTensor& q : tensors) n += q.stored_bytes;
    return n;
}
size_t QuantizeReport::n_deflated() const {
    return static_cast<size_t>(std::count_if(tensors.begin(), tensors.end(), [](const QuantizedTensor& q) {
        return q.compression == KnotCompression::Zlib;
    }));
}
double QuantizeReport::bits_per_weight_uncompressed() const {
    const uint64_t raw = raw_payload_bytes(), stored = stored_payload_bytes();
    return n_params > 0 ? 8.0 * static_cast<double>(file_bytes + raw - stored) / static_cast<double>(n_params) : 0.0;
}
double QuantizeReport::ratio_vs_bf16() const {
    return file_bytes > 0 ? 2.0 * static_cast<double>(n_params) / static_cast<double>(file_bytes) : 0.0;
}
double QuantizeReport::ratio_vs_fp32() const {
    return file_bytes > 0 ? 4.0 * static_cast<double>(n_params) / static_cast<double>(file_bytes) : 0.0;
}

std::string quantize_command(const QuantizeOptions& options) {
    std::string s = "quantize --preset " + options.preset + override_arguments(options.global);
    for (const LayerOverride& o : options.per_layer) {
        s += "; layer " + (o.layer < 0 ? std::string("*") : std::to_string(o.layer));
        if (o.role) s += " " + std::string(role_name(*o.role));
        s += ":" + (o.params.empty() ? std::string(" (nothing)") : override_arguments(o.params));
    }
    if (!options.importance_command.empty()) s += " " + options.importance_command;
    if (!options.gram_command.empty()) s += " " + options.gram_command;
    return s;
}

Result<QuantizeReport> quantize_model(const Weights& model, const QuantizeOptions& options, const std::string& out_path,
                                      const ProgressFn& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    // A model file's tensors convert as stored; a knot's records decode (read_f32), its header gives the metadata.
    const auto* file = dynamic_cast<const ModelFile*>(&model);
    const auto* source_knot = dynamic_cast<const KnotFile*>(&model);
    const std::string& path = model.label();
    auto type_of = [&](size_t i) {
        return file          ? file->tensors()[i].type_name
               : source_knot ? std::string(method_name(source_knot->entries()[i].method))
                             : std::string(dtype_name(model.tensor_info(i).dtype));
    };
    auto preset = find_preset(options.preset);
    if (!preset) return preset.status();
    if (options.shard_count == 0 || options.shard_index >= options.shard_count)
        return error(StatusCode::InvalidArgument, "shard " + std::to_string(options.shard_index) + "/" +
                                                      std::to_string(options.shard_count) +
                                                      ": the index must be below the count");

    // Everything checkable is checked before the file is created: that the model can run at all, parameters and
    // convertibility of each tensor.
    if (Status s = model.whole(); !s) return s;
    std::vector<TensorInfo> checked;
    checked.reserve(model.n_tensors());
    for (size_t i = 0; i < model.n_tensors(); ++i) checked.push_back(model.tensor_info(i));
    if (Status s = check_model(path, model.config(), checked); !s) return s;
    if (!options.importance.empty() && options.importance.size() != checked.size())
        return error(StatusCode::InvalidArgument, path + ": importance given for " +
                                                      std::to_string(options.importance.size()) +
                                                      " tensors, the model has " + std::to_string(checked.size()));
    for (size_t i = 0; i < options.importance.size(); ++i)
        if (!options.importance[i].empty() &&
            (checked[i].n_dims() < 2 || static_cast<int64_t>(options.importance[i].size()) != checked[i].cols()))
            return error(StatusCode::InvalidArgument, path + ": tensor '" + checked[i].name + "' (" +
                                                          shape_to_string(checked[i].shape) + "): importance of " +
                                                          std::to_string(options.importance[i].size()) +
                                                          " columns does not match its columns");
    const std::vector<CodecParams> planned =
        resolve_model_params(*preset, model.config(), checked, options.global, options.per_layer);
    std::vector<size_t> selected;
    std::vector<CodecParams> params;
    int64_t total_elements = 0;
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        if (!in_shard(t.layer, options.shard_index, options.shard_count)) continue;
        if (file != nullptr && !dtype_is_float_convertible(t.dtype))
            return error(StatusCode::Unsupported, path + ": tensor '" + t.name + "' of type " + type_of(i) +
                                                      " cannot be converted to float32 for encoding");
        // Stored quantized in a model file, or any knot record but an exact f32 one.
        const bool encoded =
            file != nullptr ? dtype_block_elements(t.dtype) > 1 || t.dtype == DType::Q8_G : t.dtype != DType::F32;
        if (!options.allow_requantize && encoded)
            return error(StatusCode::InvalidArgument,
                         path + ": tensor '" + t.name + "' is already quantized (" + type_of(i) +
                             "): encoding it again adds a second rounding error to the first; pass "
                             "--allow-requantize to do it anyway");
        CodecParams p = planned[i];
        if (Status s = validate_params(p); !s) return s.with_context(path + ": tensor '" + t.name + "'");
        // An explicit rank is checked against the matrix it applies to (rank rules cap themselves).
        if (p.rank > 0 && (p.method == Method::LowRank || p.method == Method::LowRankResidual) && t.n_dims() >= 2 &&
            !options.force) {
            const int64_t smallest = std::min(t.rows(), t.cols());
            if (p.rank > smallest)
                return error(StatusCode::InvalidArgument,
                             path + ": tensor '" + t.name + "' (" + shape_to_string(t.shape) + "): rank " +
                                 std::to_string(p.rank) + " exceeds its smallest dimension " +
                                 std::to_string(smallest) + "; pass --force to cap it there");
        }
        selected.push_back(i);
        params.push_back(p);
        total_elements += t.n_elements();
    }

    KnotHeader header;
    header.producer = options.producer;
    header.command = quantize_command(options);
    header.config = model.config();
    header.vocab = model.vocabulary().empty() ? options.vocab : model.vocabulary();
    header.metadata = file ? file->metadata() : source_knot ? source_knot->header().metadata : Metadata{};
    header.metadata.set("gkq.preset", MetaValue::of_string(options.preset));
    header.metadata.set("gkq.source_format", MetaValue::of_string(file ? file->format_detail() : "knot"));
    for (const auto& [key, value] : options.importance_metadata.entries) header.metadata.set(key, value);
    if (model.vocabulary().empty())
        for (const auto& [key, value] : options.vocab_keys.entries) header.metadata.set(key, value);
    header.shard_index = options.shard_index;
    header.shard_count = options.shard_count;
    header.n_source_tensors = model.n_tensors();
    auto writer = KnotWriter::create(out_path, header);
    if (!writer) return writer.status();

    QuantizeReport report;
    report.path = out_path;
    report.preset = options.preset;
    report.command = header.command;
    report.shard_index = options.shard_index;
    report.shard_count = options.shard_count;
    const int n_threads = knot::worker_count(options.n_threads, selected.size());
    std::optional<SingleThreadedBlas> one_blas_thread;
    if (n_threads > 1) one_blas_thread.emplace();

    // Row by row (model files only: a knot's records decode whole) where the codec allows it; each tensor's
    // estimated peak memory, for the in-flight budget.
    std::vector<uint8_t> by_rows(selected.size(), 0);
    std::vector<uint64_t> cost(selected.size(), 0);
    for (size_t j = 0; j < selected.size(); ++j) {
        const TensorInfo& t = model.tensor_info(selected[j]);
        const uint64_t f32 = static_cast<uint64_t>(std::max<int64_t>(t.n_elements(), 0)) * 4;
        uint64_t payload = 0;
        by_rows[j] = file != nullptr && encodes_by_rows(t, params[j], &payload) ? 1 : 0;
        // row by row: a float32 chunk and its decoded copy, the payload, the record built from it and zlib's output;
        // whole: the matrix, its decoded copy and the low-rank working copies, and the same payload terms
        const uint64_t chunk = std::min(f32, std::max<uint64_t>(options.chunk_bytes, 1));
        cost[j] = by_rows[j] ? 2 * chunk + 3 * payload : 4 * f32 + 3 * (payload > 0 ? payload : f32);
    }

    int64_t done_elements = 0;
    auto produce = [&](size_t j) -> Result<Encoded> {
        const TensorInfo& t = model.tensor_info(selected[j]);
        const float* importance = !options.importance.empty() && !options.importance[selected[j]].empty()
                                      ? options.importance[selected[j]].data()
                                      : nullptr;
        Encoded out;
        if (by_rows[j]) {
            const RowReader read = [&](int64_t row0, int64_t n_rows, float* dst) -> Status {
                if (Status s = file->read_rows_f32(selected[j], row0, n_rows, dst); !s) return s.with_context(path);
                return Status::ok();
            };
            auto enc = encode_tensor_rows(t, importance, read, params[j], &out.report, options.chunk_bytes);
            if (!enc) return enc.status().with_context(path);
            auto rec = make_knot_record(*enc, selected[j]);
            if (!rec) return rec.status().with_context(path);
            out.record = std::move(rec).value();
            return out;
        }
        auto data = file ? tensor_to_f32(file->tensors()[selected[j]]) : model.read_f32(selected[j]);
        if (!data) return data.status();
        if (file) file->drop_resident(selected[j], 0, file->tensors()[selected[j]].n_bytes);
        TensorInput in;
        in.name = t.name;
        in.role = t.role;
        in.layer = t.layer;
        in.shape = t.shape;
        in.data = data->data();
        in.n_heads = fold_head_count(t.role, model.config());
        in.importance = importance;
        if (!options.gram.empty() && options.gram[selected[j]]) {
            const std::vector<double>& g = *options.gram[selected[j]];
            if (static_cast<int64_t>(g.size()) != t.cols() * t.cols())
                return error(StatusCode::InvalidArgument, path + ": tensor '" + t.name + "': Gram matrix of " +
                                                              std::to_string(g.size()) + " values for " +
                                                              std::to_string(t.cols()) + " columns");
            in.gram = g.data();
        }
        auto enc = encode_tensor(in, params[j], &out.report);
        if (!enc) return enc.status().with_context(path);
        auto rec = make_knot_record(*enc, selected[j]);
        if (!rec) return rec.status().with_context(path);
        out.record = std::move(rec).value();
        return out;
    };
    auto consume = [&](size_t j, Encoded&& e) -> Status {
        if (Status s = writer->add(e.record); !s) return s;
        QuantizedTensor q;
        q.codec = std::move(e.report);
        q.source_index = selected[j];
        q.compression = e.record.entry.compression;
        q.stored_bytes = e.record.entry.stored_bytes;
        q.record_bytes = e.record.entry.record_bytes;
        q.index_entry_bytes = index_entry_bytes(e.record.entry);
        report.n_params += q.codec.n_elements();
        done_elements += q.codec.n_elements();
        const std::string name = q.codec.name;
        report.tensors.push_back(std::move(q));
        const double fraction = total_elements > 0 ? static_cast<double>(done_elements) / total_elements : 1.0;
        if (!report_progress(progress, fraction, name))
            return error(StatusCode::Cancelled, out_path + ": cancelled at tensor '" + name + "'");
        return Status::ok();
    };
    // Window: a few tensors per worker in flight, and no more of them than the memory budget holds, so two large
    // tensors are not in memory at once.
    if (Status s = knot::run_ordered_within<Encoded>(
            selected.size(), n_threads, 2 * static_cast<size_t>(n_threads), [&](size_t j) { return cost[j]; },
            options.in_flight_bytes, produce, consume);
        !s)
        return s;
    if (Status s = writer->finish(); !s) return s;

    // Sizes as the file has them, not as we meant to write them.
    std::error_code ec;
    report.file_bytes = std::filesystem::file_size(out_path, ec);
    if (ec) return error(StatusCode::IoError, out_path + ": cannot stat the written knot: " + ec.message());
    auto written = KnotFile::open(out_path);
    if (!written) return written.status().with_context("reading back what was written");
    if (written->n_records() != report.tensors.size())
        return error(StatusCode::Internal, out_path + ": wrote " + std::to_string(report.tensors.size()) +
                                               " records, the file lists " + std::to_string(written->n_records()));
    uint64_t attributed = 0;
    for (size_t i = 0; i < report.tensors.size(); ++i) {
        QuantizedTensor& q = report.tensors[i];
        const KnotEntry& e = written->entries()[i];
        q.record_bytes = e.record_bytes;
        q.stored_bytes = e.stored_bytes;
        q.index_entry_bytes = index_entry_bytes(e);
        attributed += q.bytes_on_disk();
    }
    report.container_bytes = report.file_bytes - attributed;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return report;
}

// ---------------------------------------------------------------------------------------------------------
// merge

namespace {

// The first header field in which b differs from a (shard index aside), or empty.
std::string header_difference(const KnotHeader& a, const KnotHeader& b) {
    if (a.producer != b.producer) return "producer '" + a.producer + "' vs '" + b.producer + "'";
    if (a.command != b.command) return "command '" + a.command + "' vs '" + b.command + "'";
    if (a.shard_count != b.shard_count)
        return "shard count " + std::to_string(a.shard_count) + " vs " + std::to_string(b.shard_count);
    if (a.n_source_tensors != b.n_source_tensors)
        return "source tensor count " + std::to_string(a.n_source_tensors) + " vs " +
               std::to_string(b.n_source_tensors);
    KnotHeader x = a, y = b;
    x.shard_index = y.shard_index = 0;
    x.metadata = y.metadata = {};
    x.vocab = y.vocab = {};
    if (knot::encode_header_block(x) != knot::encode_header_block(y)) return "model config";
    x.vocab = a.vocab;
    y.vocab = b.vocab;
    if (knot::encode_header_block(x) != knot::encode_header_block(y)) return "vocabulary";
    x.metadata = a.metadata;
    y.metadata = b.metadata;
    if (knot::encode_header_block(x) != knot::encode_header_block(y)) return "metadata";
    return {};
}

}  // namespace

Result<MergeReport> merge_knots(const std::vector<std::string>& inputs, const std::string& out_path,
                                const ProgressFn& progress) {
    if (inputs.empty()) return error(StatusCode::InvalidArgument, "merge: no shard knots given");
    std::vector<KnotFile> shards;
    for (const std::string& path : inputs) {
        auto k = KnotFile::open(path);
        if (!k) return k.status();
        shards.push_back(std::move(k).value());
    }
    const KnotHeader& first = shards.front().header();
    const uint32_t n = first.shard_count;
    std::vector<const std::string*> by_index(n, nullptr);
    for (size_t s = 0; s < shards.size(); ++s) {
        const KnotHeader& h = shards[s].header();
        if (std::string diff = header_difference(first, h); !diff.empty())
            return error(StatusCode::InvalidArgument,
                         inputs[s] + ": not a shard of the same run as " + inputs[0] + " (" + diff + ")");
        if (by_index[h.shard_index] != nullptr)
            return error(StatusCode::InvalidArgument, inputs[s] + ": shard " + std::to_string(h.shard_index) + "/" +
                                                          std::to_string(n) + " is also " + *by_index[h.shard_index]);
        by_index[h.shard_index] = &inputs[s];
    }
    for (uint32_t i = 0; i < n; ++i)
        if (by_index[i] == nullptr)
            return error(StatusCode::InvalidArgument, "merge: shard " + std::to_string(i) + "/" + std::to_string(n) +
                                                          " is missing (" + std::to_string(shards.size()) + " of " +
                                                          std::to_string(n) + " shards given)");

    // Every source tensor exactly once, in source order.
    struct Ref {
        uint64_t source_index;
        size_t shard;
        size_t record;
    };
    std::vector<Ref> refs;
    for (size_t s = 0; s < shards.size(); ++s)
        for (size_t r = 0; r < shards[s].n_records(); ++r) refs.push_back({shards[s].entries()[r].source_index, s, r});
    std::sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) { return a.source_index < b.source_index; });
    for (size_t i = 0; i < refs.size(); ++i) {
        if (i > 0 && refs[i].source_index == refs[i - 1].source_index)
            return error(StatusCode::InvalidArgument, "merge: source tensor " + std::to_string(refs[i].source_index) +
                                                          " ('" + shards[refs[i].shard].entries()[refs[i].record].name +
                                                          "') is in both " + inputs[refs[i - 1].shard] + " and " +
                                                          inputs[refs[i].shard]);
        if (refs[i].source_index != i)  // sorted and unique from 0: a larger index means i was skipped
            return error(StatusCode::InvalidArgument,
                         "merge: source tensor " + std::to_string(i) + " is in none of the shards");
    }
    if (refs.size() != first.n_source_tensors)
        return error(StatusCode::InvalidArgument, "merge: the shards hold " + std::to_string(refs.size()) +
                                                      " tensors, the model has " +
                                                      std::to_string(first.n_source_tensors));

    KnotHeader header = first;
    header.shard_index = 0;
    header.shard_count = 1;
    auto writer = KnotWriter::create(out_path, header);
    if (!writer) return writer.status();
    for (size_t i = 0; i < refs.size(); ++i) {
        auto rec = shards[refs[i].shard].read_raw(refs[i].record);
        if (!rec) return rec.status();
        if (Status s = writer->add(*rec); !s) return s;
        if (!report_progress(progress, static_cast<double>(i + 1) / static_cast<double>(refs.size()), rec->entry.name))
            return error(StatusCode::Cancelled, out_path + ": merge cancelled");
    }
    if (Status s = writer->finish(); !s) return s;
    MergeReport report;
    report.path = out_path;
    report.n_shards = shards.size();
    report.n_records = refs.size();
    std::error_code ec;
    report.file_bytes = std::filesystem::file_size(out_path, ec);
    return report;
}

}  // namespace gkq
