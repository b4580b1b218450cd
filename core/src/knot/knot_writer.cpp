// KnotWriter and make_knot_record: file header + header block, records appended as they come, then the index
// and the trailer (layout in docs/knot-format.md). Everything goes through AtomicFile: the knot exists only
// once finish() succeeded.
#include "gkq/atomic_file.h"
#include "gkq/knot.h"
#include "knot/knot_format.h"

#include <optional>
#include <unordered_set>

namespace gkq {

using knot::Out;

Result<KnotRecord> make_knot_record(const EncodedTensor& t, uint64_t source_index) {
    KnotRecord rec;
    KnotEntry& e = rec.entry;
    static_cast<TensorInfo&>(e) = t;
    e.method = t.method;
    e.dtype = method_dtype(t.method);
    e.rank = t.rank;
    e.factor_bits = t.factor_bits;
    e.residual_code = t.residual_code;
    e.flags = t.flags;
    e.source_index = source_index;
    e.raw_bytes = t.payload.size();

    // Store zlib output only where it pays: quantized codes are often near-incompressible, and deflating them
    // costs more time than encoding them. A trial on the first kZlibSampleBytes decides (a smaller payload is that
    // trial itself); zlib is then kept only when smaller.
    std::vector<uint8_t> packed;
    const std::string label = "tensor '" + t.name + "'";
    if (!t.payload.empty()) {
        bool worth = true;
        if (t.payload.size() > knot::kZlibSampleBytes) {
            std::vector<uint8_t> trial;
            if (Status s = knot::deflate_bytes(t.payload.data(), knot::kZlibSampleBytes, trial, knot::kZlibTrialLevel);
                !s)
                return s.with_context(label);
            worth = static_cast<double>(trial.size()) <=
                    (1.0 - knot::kZlibMinSaving) * static_cast<double>(knot::kZlibSampleBytes);
        }
        if (worth)
            if (Status s = knot::deflate_bytes(t.payload.data(), t.payload.size(), packed); !s)
                return s.with_context(label);
    }
    const bool use_zlib = !packed.empty() && packed.size() < t.payload.size();
    e.compression = use_zlib ? KnotCompression::Zlib : KnotCompression::None;
    const std::vector<uint8_t>& stored = use_zlib ? packed : t.payload;
    e.stored_bytes = stored.size();
    if (std::string why = knot::check_descriptor(e); !why.empty())
        return error(StatusCode::InvalidArgument, "tensor '" + t.name + "': cannot be stored in a knot: " + why);

    const uint64_t desc = knot::descriptor_bytes(e);
    Out o;
    o.bytes().reserve(knot::kRecordPrefixBytes + desc + stored.size() + 4);
    o.put_raw(knot::kRecordMagic, 4);
    o.put<uint32_t>(static_cast<uint32_t>(knot::kRecordPrefixBytes + desc));
    knot::put_descriptor(o, e);
    o.put_raw(stored.data(), stored.size());
    e.crc32 = knot_crc32(o.bytes().data(), o.bytes().size());
    o.put<uint32_t>(e.crc32);
    rec.bytes = std::move(o.bytes());
    e.record_bytes = rec.bytes.size();
    return rec;
}

struct KnotWriter::State {
    AtomicFile file;
    KnotHeader header;
    uint64_t records_offset = 0;
    std::vector<KnotEntry> entries;
    std::unordered_set<std::string> names;
    Status failed;  // sticky: after a failed write the file is abandoned
    bool finished = false;
};

KnotWriter::KnotWriter(std::unique_ptr<State> s) : m_state(std::move(s)) {}
KnotWriter::KnotWriter(KnotWriter&&) noexcept = default;
KnotWriter::~KnotWriter() = default;

Result<KnotWriter> KnotWriter::create(const std::string& path, const KnotHeader& header) {
    if (header.shard_count == 0 || header.shard_index >= header.shard_count)
        return error(StatusCode::InvalidArgument, path + ": shard " + std::to_string(header.shard_index) + " of " +
                                                      std::to_string(header.shard_count));
    const std::vector<uint8_t> block = knot::encode_header_block(header);
    if (block.size() > knot::kMaxRawHeaderBytes)
        return error(StatusCode::InvalidArgument, path + ": the header block (config, vocabulary, metadata) is " +
                                                      std::to_string(block.size()) + " bytes, more than a knot holds");
    std::vector<uint8_t> packed;
    if (Status s = knot::deflate_bytes(block.data(), block.size(), packed); !s) return s.with_context(path);
    const bool use_zlib = packed.size() < block.size();
    const std::vector<uint8_t>& stored = use_zlib ? packed : block;

    auto created = AtomicFile::create(path);
    if (!created) return created.status();
    auto st = std::make_unique<State>(State{std::move(created).value(), header, 0, {}, {}, {}, false});
    Out o;
    o.put_raw(knot::kFileMagic, 8);
    o.put<uint32_t>(kKnotVersion);
    o.put<uint32_t>(0);  // flags
    o.put<uint64_t>(stored.size());
    o.put<uint64_t>(block.size());
    o.put<uint32_t>(knot_crc32(stored.data(), stored.size()));
    o.put<uint8_t>(static_cast<uint8_t>(use_zlib ? KnotCompression::Zlib : KnotCompression::None));
    o.put<uint8_t>(0);
    o.put<uint16_t>(0);
    if (Status s = st->file.write(o.bytes().data(), o.bytes().size()); !s) return s;
    if (Status s = st->file.write(stored.data(), stored.size()); !s) return s;
    st->records_offset = st->file.bytes_written();
    return KnotWriter(std::move(st));
}

uint64_t KnotWriter::bytes_written() const {
    return m_state->file.bytes_written();
}
size_t KnotWriter::n_records() const {
    return m_state->entries.size();
}

Status KnotWriter::add(const EncodedTensor& t, uint64_t source_index) {
    auto rec = make_knot_record(t, source_index);
    if (!rec) return rec.status().with_context(m_state->file.path());
    return add(*rec);
}

Status KnotWriter::add(const KnotRecord& record) {
    State& s = *m_state;
    const std::string& path = s.file.path();
    if (!s.failed) return s.failed;
    if (s.finished) return error(StatusCode::Internal, path + ": record added after finish()");
    const KnotEntry& e = record.entry;
    if (!s.entries.empty() && e.source_index <= s.entries.back().source_index)
        return error(StatusCode::InvalidArgument,
                     path + ": tensor '" + e.name + "': source index " + std::to_string(e.source_index) + " after " +
                         std::to_string(s.entries.back().source_index) + " (records go in source order)");
    if (e.source_index >= s.header.n_source_tensors)
        return error(StatusCode::InvalidArgument, path + ": tensor '" + e.name + "': source index " +
                                                      std::to_string(e.source_index) + " but the header says " +
                                                      std::to_string(s.header.n_source_tensors) + " source tensors");
    if (record.bytes.size() != e.record_bytes)
        return error(StatusCode::Internal, path + ": tensor '" + e.name + "': record of " +
                                               std::to_string(record.bytes.size()) + " bytes, entry says " +
                                               std::to_string(e.record_bytes));
    if (!s.names.insert(e.name).second)
        return error(StatusCode::InvalidArgument, path + ": tensor '" + e.name + "' is added twice");
    KnotEntry entry = e;
    entry.record_offset = s.file.bytes_written();
    if (Status w = s.file.write(record.bytes.data(), record.bytes.size()); !w) {
        s.failed = w;
        return w;
    }
    s.entries.push_back(std::move(entry));
    return Status::ok();
}

Status KnotWriter::finish() {
    State& s = *m_state;
    const std::string& path = s.file.path();
    if (!s.failed) return s.failed;
    if (s.finished) return error(StatusCode::Internal, path + ": finish() called twice");
    if (s.header.shard_count == 1 && s.entries.size() != s.header.n_source_tensors)
        return error(StatusCode::InvalidArgument, path + ": " + std::to_string(s.entries.size()) +
                                                      " records, but the header says the model has " +
                                                      std::to_string(s.header.n_source_tensors) + " tensors");
    const uint64_t index_offset = s.file.bytes_written();
    Out o;
    o.put_raw(knot::kIndexMagic, 4);
    o.put<uint64_t>(s.entries.size());
    for (const KnotEntry& e : s.entries) {
        o.put<uint64_t>(e.record_offset);
        o.put<uint64_t>(e.record_bytes);
        o.put<uint32_t>(e.crc32);
        knot::put_descriptor(o, e);
    }
    const uint64_t index_bytes = o.bytes().size();
    const uint32_t index_crc = knot_crc32(o.bytes().data(), o.bytes().size());
    o.put<uint64_t>(s.records_offset);
    o.put<uint64_t>(index_offset);
    o.put<uint64_t>(index_bytes);
    o.put<uint32_t>(index_crc);
    o.put<uint32_t>(kKnotVersion);
    o.put_raw(knot::kTrailerMagic, 8);
    if (Status w = s.file.write(o.bytes().data(), o.bytes().size()); !w) {
        s.failed = w;
        return w;
    }
    s.finished = true;
    return s.file.commit();
}

}  // namespace gkq
