// decode_tensor: checks every header field and payload size first (before allocating the output), then decodes.
#include "gkq/codec.h"

#include "gkq/convert.h"
#include "gkq/lowrank_payload.h"
#include "gkq/matrix_shape.h"

#include <cstring>
#include <new>

namespace gkq {

using namespace codec;

namespace {

struct DecodePlan {
    MatrixShape ms;
    LowRankSection section;        // low-rank methods
    uint64_t residual_offset = 0;  // LowRankResidual: where the blocks start in the payload
    DType residual_type = DType::Other;
};

std::string label_of(const EncodedTensor& t) {
    return "tensor '" + t.name + "' (" + std::string(method_name(t.method)) + ")";
}

Status corrupt(const EncodedTensor& t, const std::string& why) {
    return error(StatusCode::Corrupt, label_of(t) + ": " + why);
}

Status expect_zero(const EncodedTensor& t, const char* field, uint64_t value) {
    if (value == 0) return Status::ok();
    return corrupt(
        t, std::string("header field ") + field + " is " + std::to_string(value) + ", expected 0 for this method");
}

Status expect_payload(const EncodedTensor& t, uint64_t expected, const std::string& what) {
    if (t.payload.size() == expected) return Status::ok();
    return corrupt(t, "payload is " + std::to_string(t.payload.size()) + " bytes, expected " +
                          std::to_string(expected) + " for " + what);
}

// Block types store each row as whole blocks of `type` (sizes: the type table).
Status expect_whole_blocks(const EncodedTensor& t, DType type, int64_t cols) {
    const int64_t block = dtype_block_elements(type);
    if (cols % block == 0) return Status::ok();
    return corrupt(t, "row length " + std::to_string(cols) + " is not a multiple of the " + std::to_string(block) +
                          "-element block");
}

Status plan_decode(const EncodedTensor& t, DecodePlan& plan) {
    const std::optional<MatrixShape> ms = matrix_shape(t.shape);
    if (!ms)
        return corrupt(t, "shape " + shape_to_string(t.shape) + " has a negative dimension or more than 2^36 elements");
    plan.ms = *ms;
    const auto n = static_cast<uint64_t>(ms->n);
    const std::string shape_text = "shape " + shape_to_string(t.shape);

    if (static_cast<unsigned>(t.method) >= kMethodCount)
        return error(StatusCode::Corrupt,
                     "tensor '" + t.name + "': unknown method code " + std::to_string(static_cast<unsigned>(t.method)));
    if (t.method != Method::LowRank && t.method != Method::LowRankResidual) {
        // f32, f16 and the block methods: the payload is the values of the method's type, nothing else
        if (Status s = expect_zero(t, "rank", static_cast<uint64_t>(t.rank)); !s) return s;
        if (Status s = expect_zero(t, "factor_bits", t.factor_bits); !s) return s;
        if (Status s = expect_zero(t, "residual_code", t.residual_code); !s) return s;
        if (Status s = expect_zero(t, "flags", t.flags); !s) return s;
        const DType type = method_dtype(t.method);
        if (Status s = expect_whole_blocks(t, type, ms->cols); !s) return s;
        return expect_payload(t, *dtype_storage_bytes(type, n), shape_text);
    }
    // the low-rank methods
    if (t.shape.size() < 2) return corrupt(t, "a low-rank tensor needs two or more dimensions, " + shape_text);
    const bool with_residual = t.method == Method::LowRankResidual;
    if (!with_residual) {
        if (Status s = expect_zero(t, "residual_code", t.residual_code); !s) return s;
    } else {
        const std::optional<DType> type = residual_code_type(t.residual_code);
        if (!type) return corrupt(t, unknown_residual_code(t.residual_code));
        if (Status s = expect_whole_blocks(t, *type, ms->cols); !s) return s;
        plan.residual_type = *type;
    }
    uint64_t consumed = 0;
    if (Status s = read_lowrank_section(t, ms->rows, ms->cols, plan.section, consumed); !s) return s;
    const uint64_t rest = t.payload.size() - consumed;
    if (!with_residual) {
        if (rest != 0)
            return corrupt(t, "payload is " + std::to_string(t.payload.size()) +
                                  " bytes but the low-rank section ends at " + std::to_string(consumed));
        return Status::ok();
    }
    plan.residual_offset = consumed;
    const uint64_t expected = *dtype_storage_bytes(plan.residual_type, n);
    if (rest != expected)
        return corrupt(t, "residual blocks after offset " + std::to_string(consumed) + " take " + std::to_string(rest) +
                              " bytes, expected " + std::to_string(expected) + " for " + shape_text);
    return Status::ok();
}

Status execute(const EncodedTensor& t, const DecodePlan& plan, float* dst) {
    const auto n = static_cast<uint64_t>(plan.ms.n);
    const uint8_t* p = t.payload.data();
    switch (t.method) {
        case Method::F32:
            if (n > 0) std::memcpy(dst, p, n * 4);
            return Status::ok();
        case Method::LowRank:
        case Method::LowRankResidual:
            reconstruct_lowrank(plan.section, dst);
            if (t.method == Method::LowRankResidual) {
                std::vector<float> r(static_cast<size_t>(n));
                if (Status s = convert_to_f32(plan.residual_type, p + plan.residual_offset, n, r.data()); !s) return s;
                for (uint64_t i = 0; i < n; ++i) dst[i] += r[i];
            }
            return Status::ok();
        default: return convert_to_f32(method_dtype(t.method), p, n, dst);  // f16 and the block methods
    }
}

}  // namespace

Status decode_tensor_into(const EncodedTensor& t, float* dst, uint64_t n_dst) {
    try {
        DecodePlan plan;
        if (Status s = plan_decode(t, plan); !s) return s;
        if (n_dst != static_cast<uint64_t>(plan.ms.n))
            return error(StatusCode::InvalidArgument, label_of(t) + ": destination holds " + std::to_string(n_dst) +
                                                          " floats, the tensor has " + std::to_string(plan.ms.n));
        if (Status s = execute(t, plan, dst); !s) return s.with_context(label_of(t));
        return Status::ok();
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, label_of(t) + ": does not fit in memory while decoding");
    }
}

Result<std::vector<float>> decode_tensor(const EncodedTensor& t) {
    try {
        DecodePlan plan;
        if (Status s = plan_decode(t, plan); !s) return s;
        std::vector<float> out(static_cast<size_t>(plan.ms.n));
        if (Status s = execute(t, plan, out.data()); !s) return s.with_context(label_of(t));
        return out;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, label_of(t) + ": does not fit in memory while decoding");
    }
}

Result<LowRankFactors> decode_lowrank_factors(const EncodedTensor& t, bool dequantize_residual) {
    if (t.method != Method::LowRank && t.method != Method::LowRankResidual)
        return error(StatusCode::InvalidArgument, label_of(t) + ": not a low-rank tensor");
    try {
        DecodePlan plan;
        if (Status s = plan_decode(t, plan); !s) return s;
        LowRankFactors f;
        f.rows = plan.ms.rows;
        f.cols = plan.ms.cols;
        f.rank = plan.section.k;
        decoded_factors(plan.section, f.u, f.s, f.v);
        if (t.method == Method::LowRankResidual) {
            f.residual_type = plan.residual_type;
            f.residual_offset = plan.residual_offset;
        }
        if (t.method == Method::LowRankResidual && dequantize_residual) {
            const auto n = static_cast<uint64_t>(plan.ms.n);
            f.residual.resize(static_cast<size_t>(n));
            if (Status s =
                    convert_to_f32(plan.residual_type, t.payload.data() + plan.residual_offset, n, f.residual.data());
                !s)
                return s.with_context(label_of(t));
        }
        return f;
    } catch (const std::bad_alloc&) {
        return error(StatusCode::Unsupported, label_of(t) + ": does not fit in memory while decoding");
    }
}

}  // namespace gkq
