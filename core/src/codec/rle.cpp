#include "codec/rle.h"

namespace gkq::codec {

int rle_max_run(int bits) {
    return bits >= 8 ? 256 : 1 << (8 - bits);
}

std::vector<uint8_t> rle_encode(const uint8_t* symbols, uint64_t n, int bits) {
    std::vector<uint8_t> out;
    const uint64_t max_run = static_cast<uint64_t>(rle_max_run(bits));
    uint64_t i = 0;
    while (i < n) {
        const uint8_t v = symbols[i];
        uint64_t run = 1;
        while (i + run < n && run < max_run && symbols[i + run] == v) ++run;
        if (bits >= 8) {
            out.push_back(v);
            out.push_back(static_cast<uint8_t>(run - 1));
        } else {
            out.push_back(static_cast<uint8_t>(v | ((run - 1) << bits)));
        }
        i += run;
    }
    return out;
}

bool rle_decode(const uint8_t* data, uint64_t n_bytes, int bits, uint64_t n_symbols, uint8_t* out, std::string& why) {
    const uint64_t pair_bytes = bits >= 8 ? 2 : 1;
    if (n_bytes % pair_bytes != 0) {
        why = "run-length stream of " + std::to_string(n_bytes) + " bytes is not a whole number of " +
              std::to_string(pair_bytes) + "-byte pairs";
        return false;
    }
    const unsigned mask = (1u << bits) - 1u;
    uint64_t filled = 0;
    for (uint64_t pos = 0; pos < n_bytes; pos += pair_bytes) {
        uint8_t v;
        uint64_t run;
        if (bits >= 8) {
            v = data[pos];
            run = static_cast<uint64_t>(data[pos + 1]) + 1;
        } else {
            v = static_cast<uint8_t>(data[pos] & mask);
            run = static_cast<uint64_t>(data[pos] >> bits) + 1;
        }
        if (run > n_symbols - filled) {
            why = "run-length pair at byte " + std::to_string(pos) + " runs past the " + std::to_string(n_symbols) +
                  " coefficient codes";
            return false;
        }
        for (uint64_t j = 0; j < run; ++j) out[filled + j] = v;
        filled += run;
    }
    if (filled != n_symbols) {
        why = "run-length stream holds " + std::to_string(filled) + " coefficient codes, expected " +
              std::to_string(n_symbols);
        return false;
    }
    return true;
}

}  // namespace gkq::codec
