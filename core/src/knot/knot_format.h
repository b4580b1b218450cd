// Private pieces of the knot format shared by its writer and reader: constants, the record descriptor (the
// same bytes open every record and every index entry), the header block, zlib helpers. Layout:
// docs/knot-format.md.
#pragma once

#include "common/byte_reader.h"
#include "gkq/knot.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gkq::knot {

inline constexpr char kFileMagic[8] = {'G', 'K', 'Q', 'K', 'N', 'O', 'T', '\0'};
inline constexpr char kTrailerMagic[8] = {'K', 'N', 'O', 'T', 'I', 'D', 'X', '\0'};
inline constexpr char kRecordMagic[4] = {'K', 'R', 'E', 'C'};
inline constexpr char kIndexMagic[4] = {'K', 'I', 'D', 'X'};

inline constexpr uint32_t kMaxNameBytes = 4096;
inline constexpr int kMaxDims = 8;
inline constexpr uint64_t kDescriptorFixedBytes = 44;   // before shape and name
inline constexpr uint64_t kIndexEntryPrefixBytes = 20;  // record offset, record bytes, crc32
inline constexpr uint64_t kRecordPrefixBytes = 8;       // magic, descriptor-end offset
inline constexpr uint64_t kIndexHeadBytes = 12;         // magic, n_records
// deflate cannot expand data by more than 1032:1, so a claimed raw size above this is a lie.
inline constexpr uint64_t kMaxZlibRatio = 1032;
inline constexpr uint64_t kMaxRawHeaderBytes = uint64_t{1} << 31;
inline constexpr uint64_t kMaxRawPayloadBytes = uint64_t{1} << 40;
inline constexpr int kZlibLevel = 6;  // fixed: the same input gives the same bytes (shard + merge == one run)
// A record's payload is deflated only where a trial on its first kZlibSampleBytes (at the fast kZlibTrialLevel)
// saves at least kZlibMinSaving of them (docs/knot-format.md has the measurement); a payload no larger than the
// sample is deflated whole at kZlibLevel and kept so when smaller.
inline constexpr uint64_t kZlibSampleBytes = uint64_t{256} << 10;
inline constexpr int kZlibTrialLevel = 1;
inline constexpr double kZlibMinSaving = 0.05;
inline constexpr int kMaxMetaDepth = 4;

// Little-endian append-only buffer.
class Out {
public:
    template <class T>
    void put(T v) {
        const size_t n = m_bytes.size();
        m_bytes.resize(n + sizeof(T));
        std::memcpy(m_bytes.data() + n, &v, sizeof(T));  // little-endian host assumed, as in ByteReader
    }
    void put_raw(const void* p, size_t n) {
        const auto* c = static_cast<const uint8_t*>(p);
        m_bytes.insert(m_bytes.end(), c, c + n);
    }
    void put_string32(std::string_view s) {
        put<uint32_t>(static_cast<uint32_t>(s.size()));
        put_raw(s.data(), s.size());
    }
    std::vector<uint8_t>& bytes() { return m_bytes; }

private:
    std::vector<uint8_t> m_bytes;
};

// Bytes of the descriptor of `e` (fixed part + shape + name).
uint64_t descriptor_bytes(const KnotEntry& e);
void put_descriptor(Out& out, const KnotEntry& e);
// Reads and validates a descriptor into `e` (fields other than offset/record bytes/crc).
bool read_descriptor(ByteReader& r, KnotEntry& e);
// Checks a descriptor's fields for what a knot can hold; empty when fine, else why not.
std::string check_descriptor(const KnotEntry& e);

// "<file>: record 3 'blk.0.attn_q.weight'"
std::string record_label(const std::string& file, size_t i, const std::string& name);

std::vector<uint8_t> encode_header_block(const KnotHeader& h);
Status decode_header_block(const uint8_t* data, uint64_t n, KnotHeader& h, const std::string& label);

// zlib deflate at `level` (kZlibLevel unless told); inflate to exactly `raw_bytes` bytes (more, less or a broken
// stream: Corrupt, naming `what`).
Status deflate_bytes(const uint8_t* src, uint64_t n, std::vector<uint8_t>& out, int level = kZlibLevel);
Status inflate_bytes(const uint8_t* src, uint64_t n, uint64_t raw_bytes, std::vector<uint8_t>& out,
                     const std::string& what);

inline std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

}  // namespace gkq::knot
