// Per-tensor accounting: sizes counted from the payload itself and errors measured against the decoded tensor.
#include "codec/accounting.h"
#include "gkq/codec.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gkq {

uint64_t bytes_on_disk(const TensorReport& r, uint64_t record_header_bytes) {
    return r.payload_bytes + record_header_bytes;
}

double bits_per_weight_on_disk(const TensorReport& r, uint64_t record_header_bytes) {
    const int64_t n = r.n_elements();
    if (n <= 0) return 0.0;
    return 8.0 * static_cast<double>(bytes_on_disk(r, record_header_bytes)) / static_cast<double>(n);
}

namespace codec {

TensorReport size_fields(const EncodedTensor& encoded) {
    TensorReport r;
    static_cast<TensorInfo&>(r) = encoded;
    r.method = encoded.method;
    r.rank = encoded.rank;
    r.factor_bits = encoded.factor_bits;
    if (encoded.method == Method::LowRankResidual)
        r.residual_type = residual_code_type(encoded.residual_code).value_or(DType::Other);
    r.flags = encoded.flags;
    r.payload_bytes = encoded.payload.size();
    const int64_t n = r.n_elements();
    r.bits_per_weight = n > 0 ? 8.0 * static_cast<double>(r.payload_bytes) / static_cast<double>(n) : 0.0;
    r.bytes_on_disk_estimate = bytes_on_disk(r, kRecordHeaderBytesEstimate);
    return r;
}

void ErrorSums::add(const float* original, const float* decoded, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        const double w = original[i];
        const double d = w - static_cast<double>(decoded[i]);
        diff_sq += d * d;
        ref_sq += w * w;
        max_abs = std::max(max_abs, std::fabs(d));
    }
}

void ErrorSums::finish(TensorReport& r) const {
    r.max_abs_error = max_abs;
    if (diff_sq == 0.0)
        r.rel_error = 0.0;
    else
        r.rel_error = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::numeric_limits<double>::infinity();
}

}  // namespace codec

Result<TensorReport> measure_encoded(const float* original, const EncodedTensor& encoded) {
    Result<std::vector<float>> decoded = decode_tensor(encoded);
    if (!decoded) return decoded.status();
    const std::vector<float>& w2 = *decoded;

    TensorReport r = codec::size_fields(encoded);  // decode_tensor checked that w2 holds its n_elements()
    if (!w2.empty() && original == nullptr)
        return error(StatusCode::InvalidArgument, "tensor '" + encoded.name + "': no original data to measure against");
    codec::ErrorSums sums;
    sums.add(original, w2.data(), w2.size());
    sums.finish(r);
    return r;
}

}  // namespace gkq
