#include "formats/norm_layout.h"

namespace gkq {

bool norm_shift_needed(TensorRole role, NormStorage from, NormStorage to) {
    return from != to && role_is_norm(role);
}

void shift_norm(float* values, uint64_t n, NormStorage from, NormStorage to) {
    if (from == to) return;
    const float add = from == NormStorage::OffsetByOne ? 1.0f : -1.0f;
    for (uint64_t i = 0; i < n; ++i) values[i] = values[i] + add;
}

}  // namespace gkq
