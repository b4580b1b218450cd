// WeightStore implementations: a knot in RAM, a knot on disk, a knot behind an http:// URL, a model file.
#include "cache/http_client.h"
#include "common/byte_reader.h"
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/weight_cache.h"
#include "knot/knot_format.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <span>

namespace gkq {

uint64_t WeightInfo::n_elements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
}

int64_t WeightStore::find(TensorRole role, int32_t layer) const {
    const auto& w = weights();
    for (size_t i = 0; i < w.size(); ++i)
        if (w[i].role == role && w[i].layer == layer) return static_cast<int64_t>(i);
    return -1;
}

bool looks_like_knot(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    unsigned char magic[8] = {};
    const size_t n = std::fread(magic, 1, sizeof magic, f);
    std::fclose(f);
    if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) return true;
    return n == 8 && std::memcmp(magic, knot::kFileMagic, 8) == 0;
}

namespace {

WeightInfo info_of(const KnotEntry& e) {
    WeightInfo w;
    w.name = e.name;
    w.role = e.role;
    w.layer = e.layer;
    w.shape = e.shape;
    w.stored_bytes = e.record_bytes;
    return w;
}

Result<std::vector<float>> decode_with_context(const EncodedTensor& t, const std::string& label) {
    auto values = decode_tensor(t);
    if (!values) return values.status().with_context(label);
    return values;
}

Status check_whole(const KnotHeader& h, const std::string& label) {
    if (h.shard_count != 1)
        return error(StatusCode::Unsupported, label + ": shard " + std::to_string(h.shard_index) + " of " +
                                                  std::to_string(h.shard_count) +
                                                  " holds part of a model; serve the merged knot (gkq merge)");
    return Status::ok();
}

// ---- knot, memory-resident or read from its mapped file -----------------------------------------------------

class KnotStore final : public WeightStore {
public:
    KnotStore(KnotFile file, bool resident) : m_file(std::move(file)), m_resident(resident) {}

    Status init() {
        const KnotFile& f = *m_file;
        if (Status s = check_whole(f.header(), f.path()); !s) return s;
        m_label = f.path();
        m_config = f.header().config;
        m_vocab = f.header().vocab;
        for (const KnotEntry& e : f.entries()) m_weights.push_back(info_of(e));
        if (m_resident) {
            // Each record read now (CRC checked) and kept compressed: a later reconstruction touches no file,
            // and the mapping is dropped.
            m_records.reserve(f.n_records());
            for (size_t i = 0; i < f.n_records(); ++i) {
                auto raw = f.read_raw(i);
                if (!raw) return raw.status();
                m_bytes += raw->bytes.size();
                m_entries.push_back(f.entries()[i]);
                m_records.push_back(std::move(raw->bytes));
            }
            m_file.reset();
        }
        return Status::ok();
    }

    std::string_view mode() const override { return m_resident ? "memory-resident" : "on-disk"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return m_config; }
    const Vocabulary& vocabulary() const override { return m_vocab; }
    const std::vector<WeightInfo>& weights() const override { return m_weights; }
    uint64_t resident_bytes() const override { return m_bytes; }

    Result<std::vector<float>> reconstruct(size_t i) const override {
        if (i >= m_weights.size())
            return error(StatusCode::InvalidArgument, m_label + ": no weight " + std::to_string(i));
        if (m_resident) {
            auto t = decode_knot_record(m_entries[i], m_records[i], m_label, i);
            if (!t) return t.status();
            return decode_with_context(*t, m_label);
        }
        auto t = m_file->read(i);
        if (!t) return t.status();
        return decode_with_context(*t, m_label);
    }

private:
    std::optional<KnotFile> m_file;  // empty once resident
    bool m_resident;
    std::string m_label;
    ModelConfig m_config;
    Vocabulary m_vocab;
    std::vector<WeightInfo> m_weights;
    std::vector<KnotEntry> m_entries;             // resident: index entries (for decode_knot_record)
    std::vector<std::vector<uint8_t>> m_records;  // resident: each record's bytes as stored
    uint64_t m_bytes = 0;
};

// ---- knot behind an http:// URL ----------------------------------------------------------------------------

class RemoteKnotStore final : public WeightStore {
public:
    RemoteKnotStore(std::string url, net::HttpUrl parsed, RemoteStoreOptions options)
        : m_label(std::move(url)), m_url(std::move(parsed)), m_options(options) {}

    Status init() {
        const int t = m_options.timeout_ms;
        auto tail = net::http_get_suffix(m_url, kKnotTrailerBytes, t);
        if (!tail) return tail.status();
        m_size = tail->total_size;
        auto trailer = parse_knot_trailer(tail->body, m_size, m_label);
        if (!trailer) return trailer.status();

        // file header: magic, version, header block size and CRC (docs/knot-format.md)
        auto head = net::http_get_range(m_url, 0, kKnotFileHeaderBytes, t);
        if (!head) return head.status();
        if (Status s = same_size(*head); !s) return s;
        const uint8_t* h = head->body.data();
        if (h[0] == 0x1f && h[1] == 0x8b)
            return error(StatusCode::Unsupported, m_label +
                                                      ": a gzipped knot cannot be read by range requests; serve "
                                                      "the plain .knot");
        if (std::memcmp(h, knot::kFileMagic, 8) != 0)
            return error(StatusCode::Unsupported, m_label + ": not a knot file (no \"GKQKNOT\" magic at offset 0)");
        ByteReader r(h, kKnotFileHeaderBytes, m_label);
        uint32_t version = 0, flags = 0, block_crc = 0;
        uint64_t block_stored = 0, block_raw = 0;
        uint8_t compression = 0;
        r.skip(8, "magic");
        r.read(version, "format version");
        r.read(flags, "header flags");
        r.read(block_stored, "header block size");
        r.read(block_raw, "header block raw size");
        r.read(block_crc, "header block CRC32");
        r.read(compression, "header block compression");
        if (!r.ok()) return r.status();
        if (version != kKnotVersion || flags != 0)
            return error(StatusCode::Unsupported, m_label + ": knot version " + std::to_string(version) + " flags " +
                                                      knot::hex32(flags) + "; this gkq reads version " +
                                                      std::to_string(kKnotVersion) + " without flags");
        uint64_t block_end = 0;
        if (block_stored == 0 || !checked_add(kKnotFileHeaderBytes, block_stored, block_end) ||
            block_end != trailer->records_offset)
            return error(StatusCode::Corrupt, m_label + ": header block of " + std::to_string(block_stored) +
                                                  " bytes does not end where the trailer says records start (" +
                                                  std::to_string(trailer->records_offset) + ")");
        auto block = net::http_get_range(m_url, kKnotFileHeaderBytes, block_stored, t);
        if (!block) return block.status();
        if (Status s = same_size(*block); !s) return s;
        if (knot_crc32(block->body.data(), block->body.size()) != block_crc)
            return error(StatusCode::Corrupt, m_label + ": header block at offset 40: CRC32 mismatch");
        std::vector<uint8_t> raw;
        if (compression == static_cast<uint8_t>(KnotCompression::Zlib)) {
            uint64_t most = 0;
            if (!checked_mul(block_stored, knot::kMaxZlibRatio, most) || block_raw > most ||
                block_raw > knot::kMaxRawHeaderBytes)
                return error(StatusCode::Corrupt, m_label + ": header block raw size " + std::to_string(block_raw) +
                                                      " is impossible for " + std::to_string(block_stored) + " bytes");
            if (Status s =
                    knot::inflate_bytes(block->body.data(), block_stored, block_raw, raw, m_label + ": header block");
                !s)
                return s;
        } else if (compression == static_cast<uint8_t>(KnotCompression::None) && block_raw == block_stored) {
            raw = std::move(block->body);
        } else {
            return error(StatusCode::Corrupt, m_label + ": header block compression " + std::to_string(compression) +
                                                  " with raw size " + std::to_string(block_raw));
        }
        if (Status s = knot::decode_header_block(raw.data(), raw.size(), m_header, m_label); !s) return s;
        if (Status s = check_whole(m_header, m_label); !s) return s;

        auto index = net::http_get_range(m_url, trailer->index_offset, trailer->index_bytes, t);
        if (!index) return index.status();
        if (Status s = same_size(*index); !s) return s;
        auto entries = parse_knot_index(index->body, *trailer, m_label);
        if (!entries) return entries.status();
        m_entries = std::move(*entries);
        for (const KnotEntry& e : m_entries) m_weights.push_back(info_of(e));
        return Status::ok();
    }

    std::string_view mode() const override { return "cdn"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return m_header.config; }
    const Vocabulary& vocabulary() const override { return m_header.vocab; }
    const std::vector<WeightInfo>& weights() const override { return m_weights; }
    uint64_t resident_bytes() const override { return 0; }

    Result<std::vector<float>> reconstruct(size_t i) const override {
        if (i >= m_entries.size())
            return error(StatusCode::InvalidArgument, m_label + ": no weight " + std::to_string(i));
        const KnotEntry& e = m_entries[i];
        auto got = net::http_get_range(m_url, e.record_offset, e.record_bytes, m_options.timeout_ms);
        if (!got) return got.status();
        if (Status s = same_size(*got); !s) return s;
        auto t = decode_knot_record(e, got->body, m_label, i);
        if (!t) return t.status();
        return decode_with_context(*t, m_label);
    }

private:
    // A resource that changed size under us is another file: its index no longer locates anything.
    Status same_size(const net::RangeResponse& r) const {
        if (r.total_size != m_size)
            return error(StatusCode::Corrupt, m_label + ": the resource is now " + std::to_string(r.total_size) +
                                                  " bytes, it was " + std::to_string(m_size) +
                                                  " when opened (replaced while serving?)");
        return Status::ok();
    }

    std::string m_label;
    net::HttpUrl m_url;
    RemoteStoreOptions m_options;
    uint64_t m_size = 0;
    KnotHeader m_header;
    std::vector<KnotEntry> m_entries;
    std::vector<WeightInfo> m_weights;
};

// ---- a model file --------------------------------------------------------------------------------------------

class ModelFileStore final : public WeightStore {
public:
    explicit ModelFileStore(ModelFile file) : m_file(std::move(file)) {
        m_config = m_file.config();
        m_config.shared_classifier = m_file.find(TensorRole::Output, -1) == nullptr;
        for (const Tensor& t : m_file.tensors()) {
            WeightInfo w;
            w.name = t.name;
            w.role = t.role;
            w.layer = t.layer;
            w.shape = t.shape;
            w.stored_bytes = t.n_bytes + t.n_scale_bytes;
            m_weights.push_back(std::move(w));
        }
    }

    std::string_view mode() const override { return "model-file"; }
    const std::string& label() const override { return m_file.path(); }
    const ModelConfig& config() const override { return m_config; }
    const Vocabulary& vocabulary() const override { return m_file.vocabulary(); }
    const std::vector<WeightInfo>& weights() const override { return m_weights; }
    uint64_t resident_bytes() const override { return 0; }

    Result<std::vector<float>> reconstruct(size_t i) const override {
        if (i >= m_weights.size())
            return error(StatusCode::InvalidArgument, m_file.path() + ": no weight " + std::to_string(i));
        auto v = tensor_to_f32(m_file.tensors()[i]);
        if (!v) return v.status().with_context(m_file.path());
        return v;
    }

private:
    ModelFile m_file;
    ModelConfig m_config;
    std::vector<WeightInfo> m_weights;
};

}  // namespace

Result<std::unique_ptr<WeightStore>> open_knot_store(const std::string& path, bool memory_resident) {
    auto file = KnotFile::open(path);
    if (!file) return file.status();
    auto store = std::make_unique<KnotStore>(std::move(*file), memory_resident);
    if (Status s = store->init(); !s) return s;
    return std::unique_ptr<WeightStore>(std::move(store));
}

Result<std::unique_ptr<WeightStore>> open_remote_knot_store(const std::string& url, const RemoteStoreOptions& options) {
    auto parsed = net::parse_http_url(url);
    if (!parsed) return parsed.status();
    auto store = std::make_unique<RemoteKnotStore>(url, std::move(*parsed), options);
    if (Status s = store->init(); !s) return s;
    return std::unique_ptr<WeightStore>(std::move(store));
}

Result<std::unique_ptr<WeightStore>> open_model_file_store(const std::string& path) {
    auto file = ModelFile::open(path);
    if (!file) return file.status();
    return std::unique_ptr<WeightStore>(std::make_unique<ModelFileStore>(std::move(*file)));
}

}  // namespace gkq
