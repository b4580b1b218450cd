// Helpers shared by the test suites: scratch folders, byte builders for handcrafted files, and the location
// of the shared real checkpoints.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gkq::test {

// A fresh folder under $TMPDIR, removed with everything in it on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return m_path; }
    std::string file(std::string_view name) const { return m_path + "/" + std::string(name); }

private:
    std::string m_path;
};

// Little-endian byte builder for handcrafted binary files.
class Bytes {
public:
    template <class T>
    Bytes& put(T v) {
        size_t n = m_b.size();
        m_b.resize(n + sizeof(T));
        std::memcpy(m_b.data() + n, &v, sizeof(T));
        return *this;
    }
    Bytes& u8(uint8_t v) { return put(v); }
    Bytes& u32(uint32_t v) { return put(v); }
    Bytes& i32(int32_t v) { return put(v); }
    Bytes& u64(uint64_t v) { return put(v); }
    Bytes& f32(float v) { return put(v); }
    Bytes& raw(std::string_view s) { return raw(s.data(), s.size()); }
    // resize + memcpy rather than vector::insert: gcc 12 reports a false -Wstringop-overflow for a range insert
    // at the end of an empty vector (test_cli_inspect's "GGUF" magic), which fails builds with warnings as errors
    Bytes& raw(const void* p, size_t n) {
        if (n == 0) return *this;
        const size_t at = m_b.size();
        m_b.resize(at + n);
        std::memcpy(m_b.data() + at, p, n);
        return *this;
    }
    Bytes& zeros(size_t n) {
        m_b.resize(m_b.size() + n, 0);
        return *this;
    }
    Bytes& pad_to(size_t multiple) {
        while (m_b.size() % multiple) m_b.push_back(0);
        return *this;
    }
    size_t size() const { return m_b.size(); }
    std::vector<uint8_t>& vec() { return m_b; }
    const std::vector<uint8_t>& vec() const { return m_b; }

private:
    std::vector<uint8_t> m_b;
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_file(const std::string& path, std::string_view text);
std::vector<uint8_t> read_file(const std::string& path);

// A sentencepiece tokenizer.model (ModelProto, protobuf wire format) written by hand: its pieces, a TrainerSpec
// {model_type, byte_fallback} and a NormalizerSpec {name "identity", add_dummy_prefix, remove_extra_whitespaces off}.
struct SpmProtoPiece {
    std::string piece;
    float score = 0.0f;
    int32_t type = 1;  // sentencepiece's Type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
};
std::string sentencepiece_proto(const std::vector<SpmProtoPiece>& pieces, int32_t model_type = 2,
                                bool byte_fallback = true, bool add_dummy_prefix = true);
// Protobuf wire-format pieces for handcrafted (and broken) messages: a varint, a field key, a length-delimited
// field.
std::string proto_varint(uint64_t v);
std::string proto_key(uint32_t field, uint32_t wire_type);
std::string proto_bytes_field(uint32_t field, std::string_view bytes);

// ../shared/models from the source tree (or $GKQ_SHARED_MODELS), when it holds `relative`; nullopt otherwise.
std::optional<std::string> shared_model(std::string_view relative);
// The message tests print when they skip for lack of the shared models.
std::string shared_models_skip_reason(std::string_view relative);

// Deterministic pseudo-random floats (xorshift), for building test tensors.
std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f);

// How far `decoded` is from `w`, recomputed in double independently of the codec's own accounting:
// rel = ||w - decoded|| / ||w|| (0 when equal), max_abs = max |w - decoded|.
struct Measured {
    double rel = 0.0;
    double max_abs = 0.0;
};
Measured measure(const std::vector<float>& w, const std::vector<float>& decoded);

}  // namespace gkq::test
