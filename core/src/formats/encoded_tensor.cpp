#include "gkq/encoded_tensor.h"

#include "gkq/type_traits.h"

#include <array>

namespace gkq {

namespace {

struct MethodRow {
    Method method;
    std::string_view name;
    DType dtype;        // the payload's stored type; Other for the low-rank layouts
    uint8_t code_bits;  // the width of a value or block code; 0 for the low-rank layouts
};

// One row per method, in code order (a static_assert below checks it): the knot's method codes.
constexpr std::array<MethodRow, kMethodCount> kMethods{{
    {Method::F32, "f32", DType::F32, 32},
    {Method::F16, "f16", DType::F16, 16},
    {Method::Q8_0, "q8_0", DType::Q8_0, 8},
    {Method::Q4_0, "q4_0", DType::Q4_0, 4},
    {Method::LowRank, "lowrank", DType::Other, 0},
    {Method::LowRankResidual, "lowrank+residual", DType::Other, 0},
    {Method::Q4_1, "q4_1", DType::Q4_1, 4},
    {Method::Q5_0, "q5_0", DType::Q5_0, 5},
    {Method::Q5_1, "q5_1", DType::Q5_1, 5},
    {Method::IQ4_NL, "iq4_nl", DType::IQ4_NL, 4},
    {Method::Q2_K, "q2_k", DType::Q2_K, 2},
    {Method::Q3_K, "q3_k", DType::Q3_K, 3},
    {Method::Q4_K, "q4_k", DType::Q4_K, 4},
    {Method::Q5_K, "q5_k", DType::Q5_K, 5},
    {Method::Q6_K, "q6_k", DType::Q6_K, 6},
}};

constexpr bool in_code_order() {
    for (unsigned i = 0; i < kMethodCount; ++i)
        if (static_cast<unsigned>(kMethods[i].method) != i) return false;
    return true;
}
static_assert(in_code_order(), "kMethods must list the methods in code order");

constexpr std::array<Method, kMethodCount> kAll = [] {
    std::array<Method, kMethodCount> a{};
    for (unsigned i = 0; i < kMethodCount; ++i) a[i] = kMethods[i].method;
    return a;
}();

// Q4_0's residual code: the bits per code the field held when Q4_0 and Q8_0 were the only residuals. Every other
// block type's code is its ggml id (Q8_0's is 8, the bits it was written with; ggml's 4 was the removed Q4_2).
constexpr uint8_t kQ4_0ResidualCode = 4;

const MethodRow* row_of(Method m) {
    const auto i = static_cast<unsigned>(m);
    return i < kMethodCount ? &kMethods[i] : nullptr;
}

}  // namespace

std::string_view method_name(Method m) {
    const MethodRow* r = row_of(m);
    return r != nullptr ? r->name : "?";
}

const std::array<Method, kMethodCount>& all_methods() {
    return kAll;
}

DType method_dtype(Method m) {
    const MethodRow* r = row_of(m);
    return r != nullptr ? r->dtype : DType::Other;
}

int method_code_bits(Method m) {
    const MethodRow* r = row_of(m);
    return r != nullptr ? r->code_bits : 0;
}

bool is_block_method(Method m) {
    const MethodRow* r = row_of(m);
    return r != nullptr && r->dtype != DType::Other && r->dtype != DType::F32 && r->dtype != DType::F16;
}

std::optional<Method> block_method_for(DType t) {
    for (const MethodRow& r : kMethods)
        if (r.dtype == t && is_block_method(r.method)) return r.method;
    return std::nullopt;
}

uint8_t residual_code_of(DType t) {
    if (!block_method_for(t)) return 0;
    if (t == DType::Q4_0) return kQ4_0ResidualCode;
    return static_cast<uint8_t>(type_traits(t).ggml_id);
}

std::optional<DType> residual_code_type(uint8_t code) {
    for (const MethodRow& r : kMethods)
        if (code != 0 && residual_code_of(r.dtype) == code) return r.dtype;
    return std::nullopt;
}

std::string unknown_residual_code(uint8_t code) {
    std::string known;
    for (const MethodRow& r : kMethods)
        if (const uint8_t c = residual_code_of(r.dtype); c != 0)
            known += (known.empty() ? "" : ", ") + std::to_string(c) + " " + std::string(r.name);
    return "unknown residual code " + std::to_string(code) + " (" + known + ")";
}

}  // namespace gkq
