// KnotFile: maps a knot (or inflates a .knot.gz), checks trailer, header block and index up front, and reads
// records one at a time, each checked on its own (layout in docs/knot-format.md).
#include "common/byte_reader.h"
#include "common/mapped_file.h"
#include "gkq/knot.h"
#include "knot/knot_format.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace gkq {

struct KnotFile::Data {
    std::string path;
    MappedFile map;                 // the file, when not gzipped
    std::vector<uint8_t> inflated;  // the whole file, when gzipped
    bool gzipped = false;
    const uint8_t* bytes = nullptr;
    uint64_t size = 0;
    KnotHeader header;
    std::vector<KnotEntry> entries;
    std::unordered_map<std::string, size_t> by_name;
};

namespace {

Status corrupt(const std::string& msg) {
    return error(StatusCode::Corrupt, msg);
}

// A gzipped knot's header block (config, vocabulary, metadata) inflates to at most this much before its size is
// checked against what the knot header declares; real ones are a few MiB even with a 256k-token vocabulary.
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kMaxGzippedHeaderBlock = 64 * kMiB;
// Per record, the most its descriptor (name of at most 4096 bytes, 8 dimensions) and its index entry can take.
constexpr uint64_t kMaxRecordOverhead = uint64_t{16} << 10;

// The f32 elements of every tensor a model of `c` has (embeddings, classifier, blocks, norms, biases).
uint64_t dense_elements(const ModelConfig& c) {
    auto pos = [](int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : uint64_t{0}; };
    const uint64_t dim = pos(c.dim), hidden = pos(c.hidden_dim), vocab = pos(c.vocab_size);
    const uint64_t q = pos(c.n_heads) * pos(c.head_size()), kv = pos(c.n_kv_heads) * pos(c.head_size());
    // projections, FFN, norms, and the vectors some rows add (q/k/v biases, q/k norms)
    const uint64_t block =
        dim * q * 2 + dim * kv * 2 + dim * hidden * 3 + dim * 2 + q + kv * 2 + pos(c.head_size()) * 2;
    return vocab * dim * (c.shared_classifier ? 1 : 2) + pos(c.n_layers) * block + dim;
}

// The largest file the knot whose first bytes are `head` (file header and header block) can be: its header, one
// record per source tensor with at most 8 bytes per element of the model its config describes (twice f32: room for
// tensors outside the table), and the index and trailer.
Result<uint64_t> knot_size_bound(const uint8_t* head, uint64_t header_end, const std::string& path) {
    ByteReader h(head, kKnotFileHeaderBytes, path);
    uint64_t block_stored = 0, block_raw = 0;
    uint8_t compression = 0;
    h.skip(16, "magic, version, flags");
    h.read(block_stored, "header block size");
    h.read(block_raw, "header block raw size");
    h.skip(4, "header block CRC32");
    h.read(compression, "header block compression");
    if (!h.ok()) return h.status();
    std::vector<uint8_t> raw;
    const uint8_t* block = head + kKnotFileHeaderBytes;
    if (compression == static_cast<uint8_t>(KnotCompression::Zlib)) {
        uint64_t most = 0;
        if (!checked_mul(block_stored, knot::kMaxZlibRatio, most) || block_raw > most ||
            block_raw > knot::kMaxRawHeaderBytes)
            return corrupt(path + ": header block raw size " + std::to_string(block_raw) + " is impossible for " +
                           std::to_string(block_stored) + " compressed bytes");
        if (Status s = knot::inflate_bytes(block, block_stored, block_raw, raw, path + ": header block"); !s) return s;
    } else {
        raw.assign(block, block + block_stored);
    }
    KnotHeader kh;
    if (Status s = knot::decode_header_block(raw.data(), raw.size(), kh, path); !s) return s;
    uint64_t bound = 0, records = 0, payload = 0;
    if (!checked_mul(kh.n_source_tensors, kMaxRecordOverhead, records) ||
        !checked_mul(dense_elements(kh.config), uint64_t{8}, payload) || !checked_add(header_end, records, bound) ||
        !checked_add(bound, payload, bound) || !checked_add(bound, uint64_t{1} << 20, bound))
        return ~uint64_t{0};
    return bound;
}

// Inflates a whole-file gzip (all members) into `out`, refusing to grow past `limit` bytes, nor past what the knot
// header in the first inflated bytes allows: its magic is checked on the first 8 bytes, the header block against
// kMaxGzippedHeaderBlock, and the rest against knot_size_bound(). A gzip bomb stops within a few MiB.
Status gunzip(const uint8_t* src, uint64_t n, uint64_t limit, std::vector<uint8_t>& out, const std::string& path) {
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return error(StatusCode::Internal, "zlib inflateInit2 failed");
    uint64_t in_left = n, used = 0;
    z.next_in = const_cast<Bytef*>(src);
    out.clear();
    int rc = Z_OK;
    enum class Stage { Magic, HeaderSize, HeaderBlock, Bounded } stage = Stage::Magic;
    uint64_t header_end = 0;
    uint64_t bound = limit;  // the knot's own bound once its header is known
    std::string bound_why;
    auto fail = [&](Status s) {
        inflateEnd(&z);
        out.clear();
        out.shrink_to_fit();
        return s;
    };
    while (true) {
        const uint64_t cap = std::min(limit, bound);
        if (used == out.size()) {
            if (used >= cap) {
                if (cap < limit)
                    return fail(error(StatusCode::Corrupt, path + ": inflates to more than " + std::to_string(cap) +
                                                               " bytes, " + bound_why +
                                                               ": not a knot, or a gzip bomb"));
                return fail(
                    error(StatusCode::Unsupported, path + ": inflates to more than " + std::to_string(limit) +
                                                       " bytes, the limit for a gzipped knot (gunzip it first)"));
            }
            out.resize(used + std::min<uint64_t>(std::max<uint64_t>(used, 1u << 20), cap - used));
        }
        const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out.size() - used, 1u << 30));
        z.avail_in = in_chunk;
        z.next_out = out.data() + used;
        z.avail_out = out_chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        in_left -= in_chunk - z.avail_in;
        used += out_chunk - z.avail_out;
        if (stage == Stage::Magic && used >= 8) {
            if (std::memcmp(out.data(), knot::kFileMagic, 8) != 0)
                return fail(
                    error(StatusCode::Unsupported,
                          path + ": not a knot file (the gzip data does not start with the \"GKQKNOT\" magic)"));
            stage = Stage::HeaderSize;
        }
        if (stage == Stage::HeaderSize && used >= kKnotFileHeaderBytes) {
            uint64_t block_stored = 0;
            std::memcpy(&block_stored, out.data() + 16, 8);
            if (block_stored > kMaxGzippedHeaderBlock)
                return fail(error(StatusCode::Unsupported, path + ": the knot header declares a header block of " +
                                                               std::to_string(block_stored) + " bytes, more than the " +
                                                               std::to_string(kMaxGzippedHeaderBlock / kMiB) +
                                                               " MiB a gzipped knot may have (gunzip it first)"));
            header_end = kKnotFileHeaderBytes + block_stored;
            bound = header_end;
            bound_why = "more than the header block its knot header declares";
            stage = Stage::HeaderBlock;
        }
        if (stage == Stage::HeaderBlock && used >= header_end) {
            auto b = knot_size_bound(out.data(), header_end, path);
            if (!b) return fail(b.status());
            bound = std::max(*b, used);
            bound_why = "the most a knot of the model its header describes can hold (" + std::to_string(bound) +
                        " bytes: header, every tensor at 8 bytes per weight, record overheads)";
            stage = Stage::Bounded;
        }
        if (rc == Z_STREAM_END) {
            if (in_left == 0) break;
            if (inflateReset(&z) != Z_OK) break;  // another gzip member follows (cat a.gz b.gz)
            continue;
        }
        if (rc == Z_BUF_ERROR && in_left == 0) break;  // the input ended inside the stream
        if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    }
    const std::string zmsg = z.msg ? z.msg : "";
    inflateEnd(&z);
    if (rc != Z_STREAM_END)
        return corrupt(path + ": broken gzip stream after " + std::to_string(n - in_left) + " compressed bytes (" +
                       (zmsg.empty() ? "truncated" : zmsg) + ")");
    out.resize(used);
    out.shrink_to_fit();
    return Status::ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// range-readable pieces

Result<KnotTrailer> parse_knot_trailer(std::span<const uint8_t> last, uint64_t file_size, const std::string& label) {
    if (last.size() != kKnotTrailerBytes || file_size < kKnotFileHeaderBytes + kKnotTrailerBytes)
        return corrupt(label + ": " + std::to_string(file_size) + " bytes, too short for a knot (at least " +
                       std::to_string(kKnotFileHeaderBytes + kKnotTrailerBytes) + "; truncated?)");
    const uint64_t at = file_size - kKnotTrailerBytes;
    ByteReader r(last.data(), last.size(), label);
    KnotTrailer t;
    uint32_t version = 0;
    r.read(t.records_offset, "trailer");
    r.read(t.index_offset, "trailer");
    r.read(t.index_bytes, "trailer");
    r.read(t.index_crc32, "trailer");
    r.read(version, "trailer");
    if (std::memcmp(last.data() + 32, knot::kTrailerMagic, 8) != 0)
        return corrupt(label + ": no knot trailer in the last " + std::to_string(kKnotTrailerBytes) +
                       " bytes (offset " + std::to_string(at) + "): the file is truncated or was not finished");
    if (version != kKnotVersion)
        return error(StatusCode::Unsupported, label + ": trailer says knot format version " + std::to_string(version) +
                                                  "; this gkq reads version " + std::to_string(kKnotVersion));
    uint64_t index_end = 0;
    if (t.records_offset < kKnotFileHeaderBytes || t.records_offset > t.index_offset ||
        !checked_add(t.index_offset, t.index_bytes, index_end) || index_end != at ||
        t.index_bytes < knot::kIndexHeadBytes)
        return corrupt(label + ": trailer at offset " + std::to_string(at) + " is inconsistent: records at " +
                       std::to_string(t.records_offset) + ", index at " + std::to_string(t.index_offset) + " + " +
                       std::to_string(t.index_bytes) + " bytes, trailer at " + std::to_string(at));
    return t;
}

Result<std::vector<KnotEntry>> parse_knot_index(std::span<const uint8_t> index, const KnotTrailer& trailer,
                                                const std::string& label) {
    if (index.size() != trailer.index_bytes)
        return error(StatusCode::InvalidArgument, label + ": index of " + std::to_string(index.size()) +
                                                      " bytes given, the trailer says " +
                                                      std::to_string(trailer.index_bytes));
    const uint32_t crc = knot_crc32(index.data(), index.size());
    if (crc != trailer.index_crc32)
        return corrupt(label + ": index at offset " + std::to_string(trailer.index_offset) + ": CRC32 mismatch (the " +
                       "trailer says " + knot::hex32(trailer.index_crc32) + ", the bytes give " + knot::hex32(crc) +
                       ")");
    ByteReader r(index.data(), index.size(),
                 label + ": index (at file offset " + std::to_string(trailer.index_offset) + ")");
    if (index.size() < knot::kIndexHeadBytes || std::memcmp(index.data(), knot::kIndexMagic, 4) != 0)
        return corrupt(label + ": index at offset " + std::to_string(trailer.index_offset) + ": bad magic");
    r.skip(4, "index magic");
    uint64_t n = 0;
    r.read(n, "record count");
    const uint64_t most = r.remaining() / (knot::kIndexEntryPrefixBytes + knot::kDescriptorFixedBytes);
    if (n > most) {
        r.fail_at(4, "record count",
                  std::to_string(n) + " records cannot fit in " + std::to_string(index.size()) +
                      " bytes of index (at most " + std::to_string(most) + ")");
        return r.status();
    }
    std::vector<KnotEntry> entries(n);
    uint64_t expected = trailer.records_offset;
    for (uint64_t i = 0; i < n; ++i) {
        KnotEntry& e = entries[i];
        const uint64_t start = r.offset();
        r.read(e.record_offset, "record offset");
        r.read(e.record_bytes, "record size");
        r.read(e.crc32, "record CRC32");
        if (!knot::read_descriptor(r, e)) return r.status();
        const std::string who = "index entry " + std::to_string(i) + " '" + e.name + "'";
        uint64_t want = knot::kRecordPrefixBytes + knot::descriptor_bytes(e) + 4, end = 0;
        if (!checked_add(want, e.stored_bytes, want) || e.record_bytes != want) {
            r.fail_at(start, who,
                      "record size " + std::to_string(e.record_bytes) + " does not match its " +
                          std::to_string(e.stored_bytes) + " stored payload bytes");
            return r.status();
        }
        if (e.record_offset != expected || !checked_add(e.record_offset, e.record_bytes, end) ||
            end > trailer.index_offset) {
            r.fail_at(start, who,
                      "record at offset " + std::to_string(e.record_offset) + " + " + std::to_string(e.record_bytes) +
                          " bytes; records are contiguous from " + std::to_string(trailer.records_offset) +
                          " to the index at " + std::to_string(trailer.index_offset) + ", so it must start at " +
                          std::to_string(expected));
            return r.status();
        }
        if (i > 0 && e.source_index <= entries[i - 1].source_index) {
            r.fail_at(start, who,
                      "source index " + std::to_string(e.source_index) + " does not follow " +
                          std::to_string(entries[i - 1].source_index));
            return r.status();
        }
        expected = end;
    }
    if (r.remaining() != 0) {
        r.fail("end of index", std::to_string(r.remaining()) + " unexpected bytes after the last entry");
        return r.status();
    }
    if (expected != trailer.index_offset)
        return corrupt(label + ": the records end at offset " + std::to_string(expected) + " but the index starts at " +
                       std::to_string(trailer.index_offset));
    return entries;
}

Result<EncodedTensor> decode_knot_record(const KnotEntry& entry, std::span<const uint8_t> bytes,
                                         const std::string& label, size_t record_number) {
    const std::string who = knot::record_label(label, record_number, entry.name) + " (file offset " +
                            std::to_string(entry.record_offset) + ")";
    if (bytes.size() != entry.record_bytes || bytes.size() < knot::kRecordPrefixBytes + 4)
        return corrupt(who + ": " + std::to_string(bytes.size()) + " bytes, the index says " +
                       std::to_string(entry.record_bytes));
    const uint64_t body = bytes.size() - 4;
    const uint32_t crc = knot_crc32(bytes.data(), body);
    uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, bytes.data() + body, 4);
    if (crc != entry.crc32 || stored_crc != entry.crc32)
        return corrupt(who + ": CRC32 mismatch (index " + knot::hex32(entry.crc32) + ", record " +
                       knot::hex32(stored_crc) + ", bytes give " + knot::hex32(crc) + "): the record is corrupt");
    ByteReader r(bytes.data(), body, who);
    if (std::memcmp(bytes.data(), knot::kRecordMagic, 4) != 0) return corrupt(who + ": bad record magic");
    r.skip(4, "record magic");
    uint32_t payload_at = 0;
    r.read(payload_at, "payload offset");
    KnotEntry d;
    if (!knot::read_descriptor(r, d)) return r.status();
    if (payload_at != r.offset())
        return corrupt(who + ": payload offset " + std::to_string(payload_at) + ", the descriptor ends at " +
                       std::to_string(r.offset()));
    // The record must say exactly what the index says about it.
    if (d.name != entry.name || d.role != entry.role || d.layer != entry.layer || d.shape != entry.shape ||
        d.method != entry.method || d.rank != entry.rank || d.factor_bits != entry.factor_bits ||
        d.residual_code != entry.residual_code || d.flags != entry.flags || d.source_index != entry.source_index ||
        d.compression != entry.compression || d.stored_bytes != entry.stored_bytes || d.raw_bytes != entry.raw_bytes)
        return corrupt(who + ": the record's descriptor (tensor '" + d.name + "', " + shape_to_string(d.shape) + ", " +
                       std::string(method_name(d.method)) + ") differs from its index entry");
    const uint8_t* stored = nullptr;
    if (!r.bytes(d.stored_bytes, stored, "payload")) return r.status();
    EncodedTensor t;
    static_cast<TensorInfo&>(t) = d;
    t.method = d.method;
    t.rank = d.rank;
    t.factor_bits = d.factor_bits;
    t.residual_code = d.residual_code;
    t.flags = d.flags;
    if (d.compression == KnotCompression::None) {
        t.payload.assign(stored, stored + d.stored_bytes);
    } else if (Status s = knot::inflate_bytes(stored, d.stored_bytes, d.raw_bytes, t.payload, who + ": payload"); !s) {
        return s;
    }
    return t;
}

// ---------------------------------------------------------------------------------------------------------
// KnotFile

KnotFile::KnotFile(std::unique_ptr<Data> d) : m_data(std::move(d)) {}
KnotFile::KnotFile(KnotFile&&) noexcept = default;
KnotFile& KnotFile::operator=(KnotFile&&) noexcept = default;
KnotFile::~KnotFile() = default;

const std::string& KnotFile::path() const {
    return m_data->path;
}
const KnotHeader& KnotFile::header() const {
    return m_data->header;
}
const std::vector<KnotEntry>& KnotFile::entries() const {
    return m_data->entries;
}
size_t KnotFile::n_records() const {
    return m_data->entries.size();
}
uint64_t KnotFile::file_bytes() const {
    return m_data->size;
}
bool KnotFile::gzipped() const {
    return m_data->gzipped;
}

int64_t KnotFile::find(std::string_view name) const {
    auto it = m_data->by_name.find(std::string(name));
    return it == m_data->by_name.end() ? -1 : static_cast<int64_t>(it->second);
}

Result<KnotFile> KnotFile::open(const std::string& path, const KnotOpenOptions& options) {
    auto d = std::make_unique<Data>();
    d->path = path;
    auto mapped = MappedFile::open(path);
    if (!mapped) return mapped.status();
    d->map = std::move(mapped).value();
    d->bytes = d->map.data();
    d->size = d->map.size();
    if (d->size >= 2 && d->bytes[0] == 0x1f && d->bytes[1] == 0x8b) {
        if (Status s = gunzip(d->bytes, d->size, options.max_inflated_bytes, d->inflated, path); !s) return s;
        d->map = MappedFile();
        d->gzipped = true;
        d->bytes = d->inflated.data();
        d->size = d->inflated.size();
    }
    const uint8_t* b = d->bytes;
    const uint64_t size = d->size;

    // ---- file header: magic and version first, so a foreign or newer file gets the right message
    if (size < 8 || std::memcmp(b, knot::kFileMagic, 8) != 0)
        return error(StatusCode::Unsupported,
                     path + ": not a knot file (no \"GKQKNOT\" magic at offset 0" +
                         (size < 8 ? ", the file has " + std::to_string(size) + " bytes)" : ")"));
    if (size < kKnotFileHeaderBytes + kKnotTrailerBytes)
        return corrupt(path + ": " + std::to_string(size) + " bytes, too short for a knot (at least " +
                       std::to_string(kKnotFileHeaderBytes + kKnotTrailerBytes) + "; truncated?)");
    ByteReader h(b, kKnotFileHeaderBytes, path);
    h.skip(8, "magic");
    uint32_t version = 0, flags = 0;
    uint64_t block_stored = 0, block_raw = 0;
    uint32_t block_crc = 0;
    uint8_t block_compression = 0;
    h.read(version, "format version");
    if (h.ok() && version != kKnotVersion)
        return error(StatusCode::Unsupported, path + ": knot format version " + std::to_string(version) +
                                                  "; this gkq reads version " + std::to_string(kKnotVersion) +
                                                  (version > kKnotVersion ? " (written by a newer gkq?)" : ""));
    h.read(flags, "header flags");
    h.read(block_stored, "header block size");
    h.read(block_raw, "header block raw size");
    h.read(block_crc, "header block CRC32");
    h.read(block_compression, "header block compression");
    uint8_t reserved[3] = {};
    for (uint8_t& r : reserved) h.read(r, "reserved");
    if (!h.ok()) return h.status();
    if (flags != 0)
        return error(StatusCode::Unsupported,
                     path + ": header flags " + knot::hex32(flags) + " at offset 12: features this gkq does not know");
    if (reserved[0] != 0 || reserved[1] != 0 || reserved[2] != 0)
        return error(StatusCode::Unsupported, path + ": reserved bytes at offset 37 are not zero");

    // ---- trailer and index
    auto trailer = parse_knot_trailer(
        std::span<const uint8_t>(b + size - std::min(size, kKnotTrailerBytes), std::min(size, kKnotTrailerBytes)), size,
        path);
    if (!trailer) return trailer.status();
    const KnotTrailer& t = *trailer;
    uint64_t block_end = 0;
    if (!checked_add(kKnotFileHeaderBytes, block_stored, block_end) || block_end != t.records_offset)
        return corrupt(path + ": header block of " + std::to_string(block_stored) + " bytes at offset " +
                       std::to_string(kKnotFileHeaderBytes) + " does not end where the trailer says records start (" +
                       std::to_string(t.records_offset) + ")");

    // ---- header block
    const uint8_t* block = b + kKnotFileHeaderBytes;
    if (uint32_t crc = knot_crc32(block, block_stored); crc != block_crc)
        return corrupt(path + ": header block at offset 40: CRC32 mismatch (header says " + knot::hex32(block_crc) +
                       ", the bytes give " + knot::hex32(crc) + ")");
    std::vector<uint8_t> raw_block;
    if (block_compression == static_cast<uint8_t>(KnotCompression::Zlib)) {
        uint64_t most = 0;
        if (!checked_mul(block_stored, knot::kMaxZlibRatio, most) || block_raw > most ||
            block_raw > knot::kMaxRawHeaderBytes)
            return corrupt(path + ": header block raw size " + std::to_string(block_raw) + " is impossible for " +
                           std::to_string(block_stored) + " compressed bytes");
        if (Status s = knot::inflate_bytes(block, block_stored, block_raw, raw_block, path + ": header block"); !s)
            return s;
    } else if (block_compression == static_cast<uint8_t>(KnotCompression::None)) {
        if (block_raw != block_stored)
            return corrupt(path + ": uncompressed header block with raw size " + std::to_string(block_raw) +
                           " != stored size " + std::to_string(block_stored));
        raw_block.assign(block, block + block_stored);
    } else {
        return corrupt(path + ": header block compression " + std::to_string(block_compression) + " at offset 36");
    }
    if (Status s = knot::decode_header_block(raw_block.data(), raw_block.size(), d->header, path); !s) return s;

    auto entries = parse_knot_index(std::span<const uint8_t>(b + t.index_offset, t.index_bytes), t, path);
    if (!entries) return entries.status();
    d->entries = std::move(entries).value();

    // ---- index against header
    const KnotHeader& kh = d->header;
    for (size_t i = 0; i < d->entries.size(); ++i) {
        const KnotEntry& e = d->entries[i];
        if (e.source_index >= kh.n_source_tensors)
            return corrupt(knot::record_label(path, i, e.name) + ": source index " + std::to_string(e.source_index) +
                           " but the header says " + std::to_string(kh.n_source_tensors) + " source tensors");
        if (!d->by_name.emplace(e.name, i).second)
            return corrupt(knot::record_label(path, i, e.name) + ": the tensor name appears twice in the index");
    }
    if (kh.shard_count == 1 && d->entries.size() != kh.n_source_tensors)
        return corrupt(path + ": " + std::to_string(d->entries.size()) +
                       " records, but the header says the model has " + std::to_string(kh.n_source_tensors) +
                       " tensors");
    return KnotFile(std::move(d));
}

Result<KnotRecord> KnotFile::read_raw(size_t i) const {
    if (i >= m_data->entries.size())
        return error(StatusCode::InvalidArgument,
                     m_data->path + ": record " + std::to_string(i) + " of " + std::to_string(m_data->entries.size()));
    const KnotEntry& e = m_data->entries[i];
    const uint8_t* p = m_data->bytes + e.record_offset;  // the index check put it inside the file
    const uint32_t crc = knot_crc32(p, e.record_bytes - 4);
    uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, p + e.record_bytes - 4, 4);
    if (crc != e.crc32 || stored_crc != e.crc32)
        return corrupt(knot::record_label(m_data->path, i, e.name) + " (file offset " +
                       std::to_string(e.record_offset) + "): CRC32 mismatch (index " + knot::hex32(e.crc32) +
                       ", record " + knot::hex32(stored_crc) + ", bytes give " + knot::hex32(crc) +
                       "): the record is corrupt");
    return KnotRecord{e, std::vector<uint8_t>(p, p + e.record_bytes)};
}

Result<EncodedTensor> KnotFile::read(size_t i) const {
    if (i >= m_data->entries.size())
        return error(StatusCode::InvalidArgument,
                     m_data->path + ": record " + std::to_string(i) + " of " + std::to_string(m_data->entries.size()));
    const KnotEntry& e = m_data->entries[i];
    auto decoded = decode_knot_record(e, std::span<const uint8_t>(m_data->bytes + e.record_offset, e.record_bytes),
                                      m_data->path, i);
    // The payload is a copy (inflated or not): the record's mapped pages leave this process's resident set (the page
    // cache keeps them), so reading every record of an 8 B knot once does not keep the whole file resident.
    m_data->map.drop_resident(m_data->bytes + e.record_offset, e.record_bytes);
    return decoded;
}

}  // namespace gkq
