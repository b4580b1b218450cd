#include "gkq/encoded_tensor.h"

namespace gkq {

std::string_view method_name(Method m) {
    switch (m) {
        case Method::F32: return "f32";
        case Method::F16: return "f16";
        case Method::Q8_0: return "q8_0";
        case Method::Q4_0: return "q4_0";
        case Method::LowRank: return "lowrank";
        case Method::LowRankResidual: return "lowrank+residual";
    }
    return "?";
}

int64_t EncodedTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

}  // namespace gkq
