// Weights: one interface over everything that holds a model's tensors — a model file (safetensors / GGUF /
// llama2.c, mapped: ModelFile), a knot (KnotFile: records read from its mapped file; a knot held in memory; a knot
// fetched by HTTP range requests, weight_cache.h) — so the transformer, the server's weight cache and the tools read
// any of them one way: config, vocabulary, tensor infos, a tensor as float32, a tensor in its stored encoding.
//
// Contract: tensor_info(i) is valid while the Weights lives; reads are thread-safe, check what they read (a knot
// record's CRC32 and fields) and fail with a Status naming the file or URL and the tensor. read_f32 gives the values
// a tensor stands for (a model tensor converted, a knot record decoded); read_stored gives its bytes as stored, never
// converted to float32 (model tensors stay mapped; a knot record is inflated and checked, not decoded).
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/metadata.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

// One tensor as stored. info.dtype says how `data` is laid out (DType::Other: a knot's low-rank record, whose
// Method says more).
struct StoredTensor {
    TensorInfo info;
    std::span<const uint8_t> data;    // the stored bytes (Q8_G: the int8 codes)
    std::span<const uint8_t> scales;  // Q8_G only: one f32 per group_size elements
    int32_t group_size = 0;
    // Knot records: the record (descriptor + inflated payload), `data` its payload, valid while this lives. Null for
    // model files, whose `data` and `scales` stay mapped while the Weights lives.
    std::shared_ptr<const EncodedTensor> record;
};

// The factors of a tensor stored as a low-rank product, W = U diag(S) V^T, or as one plus a residual in a block
// type, W = U diag(S) V^T + R (a knot's LowRankResidual record).
struct StoredFactors {
    int64_t rank = 0;      // k
    std::vector<float> u;  // (rows, k)
    std::vector<float> s;  // (k)
    std::vector<float> v;  // (cols, k)
    // R (rows, cols) row-major in residual_type's blocks, as stored (never converted); Other: no residual. `keep`
    // owns the bytes (the inflated record).
    DType residual_type = DType::Other;
    std::span<const uint8_t> residual;
    std::shared_ptr<const void> keep;

    bool has_residual() const { return residual_type != DType::Other; }
};

class Weights {
public:
    virtual ~Weights() = default;

    // "model-file", "on-disk" (a knot read from its mapped file), "memory-resident" (a knot held in RAM) or "cdn"
    // (a knot fetched by range requests).
    virtual std::string_view kind() const = 0;
    // The path or URL, as errors name it.
    virtual const std::string& label() const = 0;
    virtual const ModelConfig& config() const = 0;
    // The model's own vocabulary; empty when it has none.
    virtual const Vocabulary& vocabulary() const = 0;
    virtual size_t n_tensors() const = 0;
    // i < n_tensors().
    virtual const TensorInfo& tensor_info(size_t i) const = 0;
    // Bytes tensor i takes where it is stored (a model tensor's data, a knot record with its descriptor and CRC).
    virtual uint64_t stored_bytes(size_t i) const = 0;
    // Stored bytes held in this process's own memory (0 for mapped or remote weights).
    virtual uint64_t resident_bytes() const { return 0; }
    // Unsupported, saying what to do, when these weights are only part of a model (a knot shard).
    virtual Status whole() const { return Status::ok(); }

    virtual Result<StoredTensor> read_stored(size_t i) const = 0;
    // A hint that tensor i's mapped bytes will not be read again soon: they leave the process's resident set (the
    // file's page cache keeps them; the next read maps them again). Nothing happens for weights not mapped from a
    // file (the default).
    virtual void drop_resident(size_t i) const { (void)i; }
    // Tensor i as float32 in its shape, row-major.
    virtual Result<std::vector<float>> read_f32(size_t i) const = 0;
    // The factors of tensor i when it is stored as a low-rank product (a knot's LowRank record of a 2-D tensor), or
    // as one plus a block-quantized residual (a LowRankResidual record: the residual's blocks as stored), decoded
    // without multiplying them out; nullopt for every other tensor (the default: model files).
    virtual Result<std::optional<StoredFactors>> read_factors(size_t i) const;

    // Index of the tensor of `role` in block `layer` (-1 for non-block tensors), or of the one named `name`; -1 when
    // there is none.
    int64_t index_of(TensorRole role, int32_t layer) const;
    int64_t index_of(std::string_view name) const;
    int64_t n_params() const;  // sum of tensor elements
};

// True when `path` is a knot (.knot, or a gzipped .knot.gz), judged by its first bytes.
bool is_knot_path(const std::string& path);

struct WeightsOpenOptions {
    // Knots: read every record into RAM at open (each CRC checked) and keep them compressed; the file is closed.
    bool memory_resident = false;
};

// A model file or folder (ModelFile::open), or a knot (KnotFile::open) that holds a whole model.
Result<std::unique_ptr<Weights>> open_weights(const std::string& path, const WeightsOpenOptions& options = {});

}  // namespace gkq
