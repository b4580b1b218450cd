// Weights over knots (KnotFile's own, and a knot held in memory), the factors of a low-rank record, and open_weights:
// "a model file or a knot" for every command that runs a model.
#include "gkq/codec.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/weights.h"
#include "knot/knot_format.h"

#include <cstdio>
#include <cstring>

namespace gkq {

// ---- the factors of a low-rank record -------------------------------------------------------------------

Result<std::optional<StoredFactors>> read_knot_factors(const Weights& knot, size_t i) {
    if (i >= knot.n_tensors())
        return error(StatusCode::InvalidArgument, knot.label() + ": no tensor " + std::to_string(i));
    const TensorInfo& info = knot.tensor_info(i);
    if (info.dtype != DType::Other || info.shape.size() != 2) return std::optional<StoredFactors>();
    auto stored = knot.read_stored(i);
    if (!stored) return stored.status();
    const std::shared_ptr<const EncodedTensor>& record = stored->record;
    if (!record || (record->method != Method::LowRank && record->method != Method::LowRankResidual))
        return std::optional<StoredFactors>();
    // The residual stays in its blocks, inside the inflated payload the factors were decoded from.
    auto f = decode_lowrank_factors(*record, false);
    if (!f) return f.status().with_context(knot.label() + ": record " + std::to_string(i) + " '" + info.name + "'");
    StoredFactors out;
    out.rank = f->rank;
    out.u = std::move(f->u);
    out.s = std::move(f->s);
    out.v = std::move(f->v);
    if (f->residual_type != DType::Other) {
        out.residual_type = f->residual_type;
        out.residual = std::span<const uint8_t>(record->payload).subspan(static_cast<size_t>(f->residual_offset));
        out.keep = record;
    }
    return std::optional<StoredFactors>(std::move(out));
}

bool is_knot_path(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    unsigned char head[8] = {};
    const size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) return true;  // .knot.gz: models are never gzipped
    return n == 8 && std::memcmp(head, knot::kFileMagic, 8) == 0;
}

namespace {

Status whole_knot(const KnotHeader& h, const std::string& label) {
    if (h.shard_count != 1)
        return error(StatusCode::Unsupported, label + ": holds shard " + std::to_string(h.shard_index) + " of " +
                                                  std::to_string(h.shard_count) +
                                                  "; merge the shards (gkq merge) to run the model");
    return Status::ok();
}

StoredTensor stored_of(EncodedTensor&& t) {
    StoredTensor s;
    auto record = std::make_shared<const EncodedTensor>(std::move(t));
    s.info = *record;
    s.data = record->payload;
    s.record = std::move(record);
    return s;
}

Result<std::vector<float>> decoded(const EncodedTensor& t, const std::string& label, size_t i) {
    auto values = decode_tensor(t);
    if (!values) return values.status().with_context(label + ": record " + std::to_string(i) + " '" + t.name + "'");
    return values;
}

// ---- a knot held in memory ----------------------------------------------------------------------------------

// Every record read at open (CRC checked) and kept compressed as stored: a later read touches no file.
class ResidentKnot final : public Weights {
public:
    static Result<std::unique_ptr<Weights>> open(const KnotFile& f) {
        auto k = std::make_unique<ResidentKnot>();
        k->m_label = f.path();
        k->m_header = f.header();
        k->m_entries = f.entries();
        k->m_records.reserve(f.n_records());
        for (size_t i = 0; i < f.n_records(); ++i) {
            auto raw = f.read_raw(i);
            if (!raw) return raw.status();
            k->m_bytes += raw->bytes.size();
            k->m_records.push_back(std::move(raw->bytes));
        }
        return std::unique_ptr<Weights>(std::move(k));
    }

    std::string_view kind() const override { return "memory-resident"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return m_header.config; }
    const Vocabulary& vocabulary() const override { return m_header.vocab; }
    size_t n_tensors() const override { return m_entries.size(); }
    const TensorInfo& tensor_info(size_t i) const override { return m_entries[i]; }
    uint64_t stored_bytes(size_t i) const override { return m_entries[i].record_bytes; }
    uint64_t resident_bytes() const override { return m_bytes; }
    Status whole() const override { return whole_knot(m_header, m_label); }

    Result<StoredTensor> read_stored(size_t i) const override {
        auto t = record(i);
        if (!t) return t.status();
        return stored_of(std::move(*t));
    }
    Result<std::vector<float>> read_f32(size_t i) const override {
        auto t = record(i);
        if (!t) return t.status();
        return decoded(*t, m_label, i);
    }
    Result<std::optional<StoredFactors>> read_factors(size_t i) const override { return read_knot_factors(*this, i); }

private:
    Result<EncodedTensor> record(size_t i) const {
        if (i >= m_entries.size())
            return error(StatusCode::InvalidArgument, m_label + ": no record " + std::to_string(i));
        return decode_knot_record(m_entries[i], m_records[i], m_label, i);
    }

    std::string m_label;
    KnotHeader m_header;
    std::vector<KnotEntry> m_entries;
    std::vector<std::vector<uint8_t>> m_records;  // each record's bytes as stored
    uint64_t m_bytes = 0;
};

}  // namespace

// ---- KnotFile as Weights ------------------------------------------------------------------------------------

Status KnotFile::whole() const {
    return whole_knot(header(), path());
}

Result<StoredTensor> KnotFile::read_stored(size_t i) const {
    auto t = read(i);
    if (!t) return t.status();
    return stored_of(std::move(*t));
}

Result<std::vector<float>> KnotFile::read_f32(size_t i) const {
    auto t = read(i);
    if (!t) return t.status();
    return decoded(*t, path(), i);
}

Result<std::optional<StoredFactors>> KnotFile::read_factors(size_t i) const {
    return read_knot_factors(*this, i);
}

// ---- opening -------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Weights>> open_weights(const std::string& path, const WeightsOpenOptions& options) {
    if (!is_knot_path(path)) {
        auto file = ModelFile::open(path);
        if (!file) return file.status();
        return std::unique_ptr<Weights>(std::make_unique<ModelFile>(std::move(*file)));
    }
    auto knot = KnotFile::open(path);
    if (!knot) return knot.status();
    if (Status s = knot->whole(); !s) return s;
    if (options.memory_resident) return ResidentKnot::open(*knot);
    return std::unique_ptr<Weights>(std::make_unique<KnotFile>(std::move(*knot)));
}

}  // namespace gkq
