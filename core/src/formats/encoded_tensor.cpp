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

DType method_dtype(Method m) {
    switch (m) {
        case Method::F32: return DType::F32;
        case Method::F16: return DType::F16;
        case Method::Q8_0: return DType::Q8_0;
        case Method::Q4_0: return DType::Q4_0;
        case Method::LowRank:
        case Method::LowRankResidual: return DType::Other;
    }
    return DType::Other;
}

}  // namespace gkq
