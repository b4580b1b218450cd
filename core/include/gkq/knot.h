// The knot file: a compressed model. A header (model config, tokenizer, metadata, who wrote it), one record per
// tensor (its EncodedTensor: descriptor + payload, zlib-compressed on its own, CRC32-checked), an index of every
// record, and a fixed trailer at the very end that locates the index — so one record can be read, or fetched by
// HTTP range requests (trailer, index, record), without touching the rest. Byte layout: docs/knot-format.md.
// Contract: KnotWriter writes through AtomicFile (the file appears only on finish()); KnotFile::open checks the
// magic, version, trailer, header block and index (every count, offset and size against the file) before it
// allocates, and read(i) checks record i's CRC32 and every field against its index entry. Errors name the file
// and the record (index and tensor name) or the field and offset. Readers reject versions they do not know.
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/weights.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

constexpr uint32_t kKnotVersion = 1;           // the only version this gkq writes and reads
constexpr uint64_t kKnotFileHeaderBytes = 40;  // fixed part at offset 0
constexpr uint64_t kKnotTrailerBytes = 40;     // fixed part at the end of the file

// How a record's payload (or the header block) is stored.
enum class KnotCompression : uint8_t {
    None = 0,  // stored as is (the writer's choice when zlib would not make it smaller)
    Zlib = 1,  // one zlib stream (RFC 1950)
};

struct KnotHeader {
    std::string producer;  // program and version that wrote the file ("gkq 0.1.0")
    std::string command;   // how the records were made (preset and overrides), for people
    ModelConfig config;    // enough, with the vocabulary and the records, to run the model
    Vocabulary vocab;
    Metadata metadata;         // the source model's key/values plus the producer's
    uint32_t shard_index = 0;  // this file holds shard `shard_index` of `shard_count` (0 of 1: whole)
    uint32_t shard_count = 1;
    uint64_t n_source_tensors = 0;  // tensors in the whole source model; records carry their position in it
};

// One index entry: everything about a record except its payload. TensorInfo's shape is the original shape, its
// dtype method_dtype(method).
struct KnotEntry : TensorInfo {
    Method method = Method::F32;
    int32_t rank = 0;
    uint8_t factor_bits = 0;
    uint8_t residual_code = 0;  // LowRankResidual: its residual's block type (residual_code_type)
    uint32_t flags = 0;         // EncodedFlags
    uint64_t source_index = 0;  // position of the tensor in the source model (strictly increasing in a file)
    KnotCompression compression = KnotCompression::Zlib;
    uint64_t record_offset = 0;  // first byte of the record in the (inflated) file
    uint64_t record_bytes = 0;   // the whole record: descriptor, stored payload, CRC
    uint64_t stored_bytes = 0;   // payload as stored
    uint64_t raw_bytes = 0;      // payload once inflated
    uint32_t crc32 = 0;          // of the record's bytes before its trailing CRC field
};

// A serialized record (what a writer appends) with its index entry (record_offset still 0).
struct KnotRecord {
    KnotEntry entry;
    std::vector<uint8_t> bytes;
};

// Compresses and serializes one tensor; thread-safe, so workers can prepare records in parallel. Fails
// (InvalidArgument) on fields a knot cannot hold (empty or > 4096-byte name, > 8 dimensions, non-positive
// dimension, unknown method).
Result<KnotRecord> make_knot_record(const EncodedTensor& t, uint64_t source_index);

class KnotWriter {
public:
    // Creates `path` + a temporary suffix and writes the file header and header block.
    static Result<KnotWriter> create(const std::string& path, const KnotHeader& header);

    KnotWriter(KnotWriter&&) noexcept;
    KnotWriter& operator=(KnotWriter&&) = delete;
    ~KnotWriter();  // without finish(): the temporary is removed, `path` is untouched

    // Appends a record; source indices must increase strictly and stay below header.n_source_tensors.
    Status add(const EncodedTensor& t, uint64_t source_index);
    Status add(const KnotRecord& record);
    // Writes the index and trailer and renames the file into place. An unsharded file (shard_count 1) must
    // hold exactly n_source_tensors records.
    Status finish();

    uint64_t bytes_written() const;
    size_t n_records() const;

private:
    struct State;
    explicit KnotWriter(std::unique_ptr<State> s);
    std::unique_ptr<State> m_state;
};

struct KnotOpenOptions {
    // A whole-file gzip (.knot.gz, detected by its magic) is inflated into memory up to this many bytes.
    uint64_t max_inflated_bytes = uint64_t{8} << 30;
};

// A KnotFile is Weights (weights.h): read_stored hands out a record inflated and checked, read_f32 decodes it.
class KnotFile final : public Weights {
public:
    // Maps `path` (or inflates it when gzipped) and checks trailer, header block and index. Records are
    // checked when read.
    static Result<KnotFile> open(const std::string& path, const KnotOpenOptions& options = {});

    KnotFile(KnotFile&&) noexcept;
    KnotFile& operator=(KnotFile&&) noexcept;
    ~KnotFile() override;

    const std::string& path() const;
    const KnotHeader& header() const;
    const std::vector<KnotEntry>& entries() const;
    size_t n_records() const;
    // Index of the record named `name`, or -1.
    int64_t find(std::string_view name) const;
    uint64_t file_bytes() const;  // inflated size for .knot.gz
    bool gzipped() const;

    // Record i alone: its CRC32 checked, every field compared with the index, the payload inflated.
    // Thread-safe: concurrent reads of any records are fine.
    Result<EncodedTensor> read(size_t i) const;
    // Record i's bytes exactly as stored, CRC32 checked (for copying records into another knot).
    Result<KnotRecord> read_raw(size_t i) const;

    // ---- Weights (whole() refuses a shard)
    std::string_view kind() const override { return "on-disk"; }
    const std::string& label() const override { return path(); }
    const ModelConfig& config() const override { return header().config; }
    const Vocabulary& vocabulary() const override { return header().vocab; }
    size_t n_tensors() const override { return entries().size(); }
    const TensorInfo& tensor_info(size_t i) const override { return entries()[i]; }
    uint64_t stored_bytes(size_t i) const override { return entries()[i].record_bytes; }
    Status whole() const override;
    Result<StoredTensor> read_stored(size_t i) const override;
    Result<std::vector<float>> read_f32(size_t i) const override;
    Result<std::optional<StoredFactors>> read_factors(size_t i) const override;

    struct Data;  // private

private:
    explicit KnotFile(std::unique_ptr<Data> d);
    std::unique_ptr<Data> m_data;
};

// ---- pieces for readers that fetch ranges (HTTP range requests, a wasm client) -----------------------------------

struct KnotTrailer {
    uint64_t records_offset = 0;  // first record byte = end of the header block
    uint64_t index_offset = 0;
    uint64_t index_bytes = 0;
    uint32_t index_crc32 = 0;
};

// Parses the last kKnotTrailerBytes bytes of a file of `file_size` bytes; `label` names the file in errors.
Result<KnotTrailer> parse_knot_trailer(std::span<const uint8_t> last_bytes, uint64_t file_size,
                                       const std::string& label);
// Parses the index block (the trailer's [index_offset, index_offset + index_bytes)), checking its CRC and
// that the records it lists fill [records_offset, index_offset) in order.
Result<std::vector<KnotEntry>> parse_knot_index(std::span<const uint8_t> index, const KnotTrailer& trailer,
                                                const std::string& label);
// Decodes a record from its bytes alone ([record_offset, record_offset + record_bytes) of the file).
Result<EncodedTensor> decode_knot_record(const KnotEntry& entry, std::span<const uint8_t> bytes,
                                         const std::string& label, size_t record_number);

// The factors of tensor i of a knot's Weights when it is a LowRank or LowRankResidual record of a 2-D tensor
// (read_stored, then decode_lowrank_factors; a residual's blocks left in the record); nullopt for every other record.
// Every knot Weights' read_factors.
Result<std::optional<StoredFactors>> read_knot_factors(const Weights& knot, size_t i);

// CRC-32 (ISO-HDLC, as zlib's crc32()) of a byte range.
uint32_t knot_crc32(const uint8_t* data, size_t n, uint32_t crc = 0);

}  // namespace gkq
