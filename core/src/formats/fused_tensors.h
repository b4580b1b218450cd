// Fused tensors (gkq/arch.h: a TensorSpec of several parts, as Phi-3's qkv_proj and gate_up_proj) as the rest of gkq
// sees them: one view per role. ModelFile::open splits what a reader found (the views share the mapped bytes: each
// part is a run of whole rows, contiguous in every stored type, block types too, since blocks run along a row); the
// writers join the parts they are given back into the one tensor the target format's row stores. So spectra, the
// codec, knots and the transformer only ever see attn_q, attn_k, attn_v, ffn_gate and ffn_up.
#pragma once

#include "formats/model_file_data.h"
#include "gkq/arch.h"
#include "gkq/model_writer.h"

#include <string>
#include <vector>

namespace gkq {

// Replaces each fused tensor of the file's architecture row by one view per part, named part_view_name(stored,
// role), with the part's role, block and rows; Corrupt (naming the file and tensor) when its shape is not the one
// the config implies. A tensor of an UnsupportedRope spec sets the config's rope scaling to Unsupported. llama2.c
// files (no fused tensors) and architectures the table lacks are left as read.
Status split_fused_tensors(ModelFileData& d);

// `given` with the parts of each fused tensor of `config`'s writing row joined, in row order, into one tensor of
// role Other under the format's name, placed where its first part was (q/k parts reordered to the format's rotary
// layout on the way, as the writers do for a lone q or k). The joined tensor is stored bytes when every part gives
// them in one type (fill_stored), floats when every part gives floats; InvalidArgument (naming `path` and the tensor)
// when a part is missing, misshapen, or the parts come in different stored types. Everything else passes through.
Result<std::vector<WriteTensor>> join_fused_tensors(const std::string& path, const ModelConfig& config,
                                                    NameFormat format, const std::vector<WriteTensor>& given);

}  // namespace gkq
