// Run-length encoding of quantized coefficient codes (the FFN half of hierarchical folding): (value, count) pairs.
// Layout: for bits <= 4 each pair is one byte, value in the low `bits` bits and (run - 1) in the high 8 - bits
// bits (runs of 1..64 for 2-bit codes, 1..16 for 4-bit); for 8-bit codes each pair is two bytes, value then
// (run - 1) (runs of 1..256). Longer runs are split into maximal pairs, first to last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::codec {

// Longest run one pair holds.
int rle_max_run(int bits);

// Encodes n symbols (each < 2^bits, bits in {2, 4, 8}).
std::vector<uint8_t> rle_encode(const uint8_t* symbols, uint64_t n, int bits);

// Decodes exactly n_symbols symbols from exactly n_bytes bytes. False, with `why`, when the runs end early,
// overrun n_symbols, leave bytes unused or the byte count is not a whole number of pairs.
bool rle_decode(const uint8_t* data, uint64_t n_bytes, int bits, uint64_t n_symbols, uint8_t* out, std::string& why);

}  // namespace gkq::codec
