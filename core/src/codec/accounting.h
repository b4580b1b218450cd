// The pieces of measure_encoded (gkq/codec.h) that the row-by-row encoder shares with it, so that both give the same
// report to the bit: the size fields of an encoded tensor, and the error sums accumulated in element order.
#pragma once

#include "gkq/codec.h"

#include <cstdint>

namespace gkq::codec {

// The report's fields that follow from `encoded` alone: its TensorInfo, method, rank, bits, flags, sizes.
TensorReport size_fields(const EncodedTensor& encoded);

// sum (W - W')^2, sum W^2 and max |W - W'| in double, element after element.
struct ErrorSums {
    double diff_sq = 0.0;
    double ref_sq = 0.0;
    double max_abs = 0.0;

    void add(const float* original, const float* decoded, uint64_t n);
    void finish(TensorReport& r) const;  // rel_error and max_abs_error
};

}  // namespace gkq::codec
