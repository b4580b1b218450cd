// gkq export: a GGUF that llama.cpp runs, from a knot or a model file. Tensors keep their stored encoding where GGUF
// has it (a knot's Q8_0 / Q4_0 records, a model's F16 / Q4_K / ... tensors: the bytes are copied, q/k rows reordered
// to GGUF's rotary layout where the source's differs), dense f16 (or f32) where it has not (low-rank records,
// decoded); or every matrix is quantized from its float values to one type or llama.cpp file type (q4_k_m ...) with
// the same per-tensor types llama-quantize writes, including its fallback for rows its blocks do not divide. 1-D
// tensors (norms) are f32. The vocabulary is written in llama.cpp's tokenizer keys (model_writer.h: write_gguf).
#pragma once

#include "gkq/dtype.h"
#include "gkq/progress.h"
#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq {

struct ExportOptions {
    // Empty: keep the stored types. Else a llama.cpp file type (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k: llama-quantize's
    // mixture) or a type every matrix is quantized to (q8_0, q4_0, q4_1, q5_0, q5_1, q3_k .. q5_k, iq4_nl, f16, bf16,
    // f32: llama-quantize --pure), from the tensors' float values without an importance matrix.
    std::string type;
    DType dense = DType::F16;  // kept matrices whose stored encoding GGUF has not: F16 or F32
};

struct ExportedTensor {
    std::string name;             // the GGUF name
    std::vector<int64_t> shape;   // row-major, outermost first
    DType stored = DType::Other;  // in the source (Other: a low-rank record)
    DType wanted = DType::F32;    // what the type or file type asks for (== written unless it fell back)
    DType written = DType::F32;   // in the GGUF file
    bool copied = false;          // the stored bytes were written as they are (not decoded and re-encoded)
    uint64_t bytes = 0;           // of its data in the file
};

struct ExportReport {
    std::string path;
    std::vector<ExportedTensor> tensors;  // in file order; a fused tensor (Phi-3's attn_qkv) by its parts' views
    size_t n_file_tensors = 0;            // tensors in the file: a fused tensor's parts are one
    size_t n_fell_back = 0;               // matrices whose row length `wanted`'s blocks do not divide
    int64_t n_params = 0;
    uint64_t file_bytes = 0;
    // How the vocabulary was fitted to the embedding's rows (llama.cpp wants one token per row): tokens past them
    // dropped or "[PADi]" added, as convert_hf_to_gguf.py does; empty when it had one token per row.
    std::string vocabulary_note;
};

// The names `type` accepts, in the order --help lists them.
std::vector<std::string> export_type_names();

// Writes `out_path` (the file appears only when complete) from the knot or model at `in_path`. InvalidArgument for an
// unknown type, a shard, an output that is not .gguf; the model-consistency check as for reconstruct.
Result<ExportReport> export_gguf(const std::string& in_path, const std::string& out_path,
                                 const ExportOptions& options = {}, const ProgressFn& progress = {});

}  // namespace gkq
