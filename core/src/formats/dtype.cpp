#include "gkq/dtype.h"
#include "common/byte_reader.h"

namespace gkq {

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F16: return "f16";
        case DType::BF16: return "bf16";
        case DType::F64: return "f64";
        case DType::I8: return "i8";
        case DType::U8: return "u8";
        case DType::I16: return "i16";
        case DType::I32: return "i32";
        case DType::I64: return "i64";
        case DType::Q8_0: return "q8_0";
        case DType::Q4_0: return "q4_0";
        case DType::Q8_G: return "q8_g";
        case DType::Other: return "other";
    }
    return "?";
}

bool dtype_is_float_convertible(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::F64:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q8_G: return true;
        default: return false;
    }
}

int64_t dtype_block_elements(DType t) {
    return (t == DType::Q8_0 || t == DType::Q4_0) ? 32 : 1;
}

std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t n) {
    uint64_t per = 0;
    switch (t) {
        case DType::F64:
        case DType::I64: per = 8; break;
        case DType::F32:
        case DType::I32: per = 4; break;
        case DType::F16:
        case DType::BF16:
        case DType::I16: per = 2; break;
        case DType::I8:
        case DType::U8:
        case DType::Q8_G: per = 1; break;
        case DType::Q8_0:
            if (n % 32 != 0) return std::nullopt;
            return (n / 32) * 34;
        case DType::Q4_0:
            if (n % 32 != 0) return std::nullopt;
            return (n / 32) * 18;
        case DType::Other: return std::nullopt;
    }
    uint64_t out = 0;
    if (!checked_mul(n, per, out)) return std::nullopt;
    return out;
}

}  // namespace gkq
