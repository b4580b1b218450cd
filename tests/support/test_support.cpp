#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace gkq::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gkq-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    m_path = buf.data();
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
}

void write_file(const std::string& path, std::string_view text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string proto_varint(uint64_t v) {
    std::string out;
    do {
        const auto b = static_cast<uint8_t>(v & 0x7F);
        v >>= 7;
        out.push_back(static_cast<char>(v != 0 ? (b | 0x80) : b));
    } while (v != 0);
    return out;
}

std::string proto_key(uint32_t field, uint32_t wire_type) {
    return proto_varint(static_cast<uint64_t>(field) << 3 | wire_type);
}

std::string proto_bytes_field(uint32_t field, std::string_view bytes) {
    return proto_key(field, 2) + proto_varint(bytes.size()) + std::string(bytes);
}

std::string sentencepiece_proto(const std::vector<SpmProtoPiece>& pieces, int32_t model_type, bool byte_fallback,
                                bool add_dummy_prefix) {
    std::string out;
    for (const SpmProtoPiece& p : pieces) {
        std::string m = proto_bytes_field(1, p.piece);
        uint32_t bits = 0;
        std::memcpy(&bits, &p.score, sizeof bits);
        m += proto_key(2, 5);
        for (int i = 0; i < 4; ++i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
        if (p.type != 1) m += proto_key(3, 0) + proto_varint(static_cast<uint32_t>(p.type));
        out += proto_bytes_field(1, m);
    }
    std::string trainer = proto_key(3, 0) + proto_varint(static_cast<uint32_t>(model_type));
    trainer += proto_key(35, 0) + proto_varint(byte_fallback ? 1 : 0);
    out += proto_bytes_field(2, trainer);
    std::string normalizer = proto_bytes_field(1, "identity");
    normalizer += proto_key(3, 0) + proto_varint(add_dummy_prefix ? 1 : 0);
    normalizer += proto_key(4, 0) + proto_varint(0);
    out += proto_bytes_field(3, normalizer);
    return out;
}

static std::string shared_models_root() {
    if (const char* env = std::getenv("GKQ_SHARED_MODELS"); env && *env) return env;
    return GKQ_SHARED_MODELS_DIR;
}

std::optional<std::string> shared_model(std::string_view relative) {
    fs::path p = fs::path(shared_models_root()) / std::string(relative);
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
    return std::nullopt;
}

std::string shared_models_skip_reason(std::string_view relative) {
    return "shared model '" + std::string(relative) + "' not found under " + shared_models_root() +
           " (the ../shared/models folder is absent on this checkout; set GKQ_SHARED_MODELS to use another)";
}

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = scale * (static_cast<float>((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f);
    }
    return v;
}

Measured measure(const std::vector<float>& w, const std::vector<float>& decoded) {
    double diff = 0.0, ref = 0.0, max_abs = 0.0;
    for (size_t i = 0; i < w.size(); ++i) {
        const double d = double(w[i]) - double(decoded[i]);
        diff += d * d;
        ref += double(w[i]) * double(w[i]);
        max_abs = std::max(max_abs, std::fabs(d));
    }
    return {diff == 0.0 ? 0.0 : std::sqrt(diff / ref), max_abs};
}

}  // namespace gkq::test
