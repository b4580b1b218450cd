#include "src/tensor_job.h"

#include "gkq/lowrank_payload.h"
#include "gkq/matrix_shape.h"

#include <utility>

namespace gkq::kernels {

namespace {

Status corrupt(const TensorJob& job, const std::string& why) {
    return error(StatusCode::Corrupt, job.label + ": " + why);
}

Status expect_zero(const TensorJob& job, const char* field, uint64_t value) {
    if (value == 0) return Status::ok();
    return corrupt(
        job, std::string("header field ") + field + " is " + std::to_string(value) + ", expected 0 for this method");
}

Status expect_payload(const TensorJob& job, const EncodedTensor& t, uint64_t expected, const std::string& what) {
    if (t.payload.size() == expected) return Status::ok();
    return corrupt(job, "payload is " + std::to_string(t.payload.size()) + " bytes, expected " +
                            std::to_string(expected) + " for " + what);
}

// Block types store each row as whole blocks of `type` (sizes: the type table).
Status check_block_rows(const TensorJob& job, DType type) {
    const int64_t block = dtype_block_elements(type);
    if (job.cols % block == 0) return Status::ok();
    return corrupt(job, "row length " + std::to_string(job.cols) + " is not a multiple of the " +
                            std::to_string(block) + "-element block");
}

Status plan_lowrank(const EncodedTensor& t, TensorJob& job, const std::string& shape_text) {
    if (t.shape.size() < 2) return corrupt(job, "a low-rank tensor needs two or more dimensions, " + shape_text);
    const bool with_residual = t.method == Method::LowRankResidual;
    DType residual_type = DType::Other;
    if (!with_residual) {
        if (Status s = expect_zero(job, "residual_code", t.residual_code); !s) return s;
    } else {
        const std::optional<DType> type = residual_code_type(t.residual_code);
        if (!type) return corrupt(job, unknown_residual_code(t.residual_code));
        if (Status s = check_block_rows(job, *type); !s) return s;
        residual_type = *type;
    }
    codec::LowRankSection s;
    uint64_t consumed = 0;
    if (Status st = codec::read_lowrank_section(t, job.rows, job.cols, s, consumed); !st) return st;
    const uint64_t rest = t.payload.size() - consumed;
    if (!with_residual && rest != 0)
        return corrupt(job, "payload is " + std::to_string(t.payload.size()) +
                                " bytes but the low-rank section ends at " + std::to_string(consumed));
    if (with_residual) {
        const uint64_t expected = *dtype_storage_bytes(residual_type, static_cast<uint64_t>(job.n));
        if (rest != expected)
            return corrupt(job, "residual blocks after offset " + std::to_string(consumed) + " take " +
                                    std::to_string(rest) + " bytes, expected " + std::to_string(expected) + " for " +
                                    shape_text);
        job.residual = t.payload.data() + consumed;
        job.residual_type = residual_type;
    }

    job.k = s.k;
    job.bits = s.bits;
    job.delta = s.delta;
    job.sigma.resize(static_cast<size_t>(s.k));
    for (int64_t r = 0; r < s.k; ++r)
        job.sigma[static_cast<size_t>(r)] =
            s.sigma_quantized ? codec::dequantize_sigma(s.sigma_codes[static_cast<size_t>(r)], s.sigma_max)
                              : s.sigma[static_cast<size_t>(r)];
    job.u_len = s.u_len();
    job.v_len = s.v_len();
    if (s.folded) {
        (s.fold_axis == codec::FoldAxis::U ? job.u_heads : job.v_heads) = s.n_heads;
        job.head_scales = std::move(s.head_scales);
    }
    job.u_scales = std::move(s.u_scales);
    job.v_scales = std::move(s.v_scales);
    if (s.rle) {
        job.rle_codes = std::move(s.symbols);
        job.codes = FactorCodes{job.rle_codes.data(), s.bits, false};
    } else {
        // the packed codes end the section (read_lowrank_section has checked them, padding bits included)
        const uint64_t n_bytes = codec::packed_bytes(static_cast<uint64_t>(s.n_symbols()), s.bits);
        job.codes = FactorCodes{t.payload.data() + consumed - n_bytes, s.bits, true};
    }
    return Status::ok();
}

}  // namespace

ResidualBlocks TensorJob::fused_residual() const {
    if (residual_type == DType::Q4_0) return ResidualBlocks{residual, method_code_bits(Method::Q4_0)};
    if (residual_type == DType::Q8_0) return ResidualBlocks{residual, method_code_bits(Method::Q8_0)};
    return ResidualBlocks{nullptr, 0};
}

Status plan_tensor(const EncodedTensor& t, TensorJob& job) {
    job = TensorJob{};
    job.label = "tensor '" + t.name + "' (" + std::string(method_name(t.method)) + ")";
    job.method = t.method;
    const std::optional<codec::MatrixShape> ms = codec::matrix_shape(t.shape);
    if (!ms)
        return corrupt(job,
                       "shape " + shape_to_string(t.shape) + " has a negative dimension or more than 2^36 elements");
    job.rows = ms->rows;
    job.cols = ms->cols;
    job.n = ms->n;
    const auto n = static_cast<uint64_t>(ms->n);
    const std::string shape_text = "shape " + shape_to_string(t.shape);
    job.values = t.payload.data();

    if (static_cast<unsigned>(t.method) >= kMethodCount)
        return error(StatusCode::Corrupt,
                     "tensor '" + t.name + "': unknown method code " + std::to_string(static_cast<unsigned>(t.method)));
    if (t.method == Method::LowRank || t.method == Method::LowRankResidual) {
        try {
            return plan_lowrank(t, job, shape_text);
        } catch (const std::bad_alloc&) {
            return error(StatusCode::Unsupported, job.label + ": does not fit in memory while decoding");
        }
    }
    // f32, f16 and the block methods: the payload is the values of the method's type, nothing else
    if (Status s = expect_zero(job, "rank", static_cast<uint64_t>(t.rank)); !s) return s;
    if (Status s = expect_zero(job, "factor_bits", t.factor_bits); !s) return s;
    if (Status s = expect_zero(job, "residual_code", t.residual_code); !s) return s;
    if (Status s = expect_zero(job, "flags", t.flags); !s) return s;
    const DType type = method_dtype(t.method);
    if (Status s = check_block_rows(job, type); !s) return s;
    return expect_payload(job, t, *dtype_storage_bytes(type, n), shape_text);
}

}  // namespace gkq::kernels
