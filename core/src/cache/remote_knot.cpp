// A knot behind an http:// URL as Weights: trailer, header and index fetched once, each record by a range request
// when it is read.
#include "cache/http_client.h"
#include "common/byte_reader.h"
#include "gkq/codec.h"
#include "gkq/knot.h"
#include "gkq/weight_cache.h"
#include "knot/knot_format.h"

#include <cstring>
#include <span>

namespace gkq {

namespace {

// ---- knot behind an http:// URL ----------------------------------------------------------------------------

class RemoteKnot final : public Weights {
public:
    RemoteKnot(std::string url, net::HttpUrl parsed, RemoteKnotOptions options)
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
        if (m_header.shard_count != 1)
            return error(StatusCode::Unsupported, m_label + ": holds shard " + std::to_string(m_header.shard_index) +
                                                      " of " + std::to_string(m_header.shard_count) +
                                                      "; merge the shards (gkq merge) to run the model");

        auto index = net::http_get_range(m_url, trailer->index_offset, trailer->index_bytes, t);
        if (!index) return index.status();
        if (Status s = same_size(*index); !s) return s;
        auto entries = parse_knot_index(index->body, *trailer, m_label);
        if (!entries) return entries.status();
        m_entries = std::move(*entries);
        return Status::ok();
    }

    std::string_view kind() const override { return "cdn"; }
    const std::string& label() const override { return m_label; }
    const ModelConfig& config() const override { return m_header.config; }
    const Vocabulary& vocabulary() const override { return m_header.vocab; }
    size_t n_tensors() const override { return m_entries.size(); }
    const TensorInfo& tensor_info(size_t i) const override { return m_entries[i]; }
    uint64_t stored_bytes(size_t i) const override { return m_entries[i].record_bytes; }

    Result<StoredTensor> read_stored(size_t i) const override {
        auto t = record(i);
        if (!t) return t.status();
        StoredTensor s;
        auto rec = std::make_shared<const EncodedTensor>(std::move(*t));
        s.info = *rec;
        s.data = rec->payload;
        s.record = std::move(rec);
        return s;
    }

    Result<std::optional<StoredFactors>> read_factors(size_t i) const override { return read_knot_factors(*this, i); }

    Result<std::vector<float>> read_f32(size_t i) const override {
        auto t = record(i);
        if (!t) return t.status();
        auto values = decode_tensor(*t);
        if (!values)
            return values.status().with_context(m_label + ": record " + std::to_string(i) + " '" + t->name + "'");
        return values;
    }

private:
    Result<EncodedTensor> record(size_t i) const {
        if (i >= m_entries.size())
            return error(StatusCode::InvalidArgument, m_label + ": no record " + std::to_string(i));
        const KnotEntry& e = m_entries[i];
        auto got = net::http_get_range(m_url, e.record_offset, e.record_bytes, m_options.timeout_ms);
        if (!got) return got.status();
        if (Status s = same_size(*got); !s) return s;
        return decode_knot_record(e, got->body, m_label, i);
    }

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
    RemoteKnotOptions m_options;
    uint64_t m_size = 0;
    KnotHeader m_header;
    std::vector<KnotEntry> m_entries;
};

}  // namespace

Result<std::unique_ptr<Weights>> open_remote_knot(const std::string& url, const RemoteKnotOptions& options) {
    auto parsed = net::parse_http_url(url);
    if (!parsed) return parsed.status();
    auto knot = std::make_unique<RemoteKnot>(url, std::move(*parsed), options);
    if (Status s = knot->init(); !s) return s;
    return std::unique_ptr<Weights>(std::move(knot));
}

}  // namespace gkq
