// The one model-consistency check: does a config with a list of tensors describe a model the transformer can
// run? Every command that reads a model (quantize, verify, inspect, generate, eval, serve) and the transformer's
// loader ask this, so a model that cannot run is refused early with the same message in every format.
// Checked: every size positive, dim divisible by n_heads, n_heads by n_kv_heads, an even head size, finite
// rope_theta and norm_eps, matrices within 2^36 floats; every tensor the forward pass needs present with the
// shape the config gives it (the classifier counts as separate when an `output` tensor is listed); no block
// tensor beyond n_layers. The architecture is checked on its own (architecture_problem): a model of one the forward
// pass cannot compute may still be inspected, analyzed and quantized.
#pragma once

#include "gkq/knot.h"
#include "gkq/model_config.h"
#include "gkq/status.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq {

// Why the forward pass cannot compute the config's architecture, one line naming the architecture and what it lacks
// ("architecture 'mixtral' needs a mixture-of-experts feed-forward (a router and experts), which gkq does not run");
// empty when it can. The transformer refuses with it (so generate, eval and serve do), inspect prints it.
std::string architecture_problem(const ModelConfig& config);

// Problems with the config alone ("dim 64 is not a multiple of n_heads 5"); empty when none.
std::vector<std::string> config_problems(const ModelConfig& config);

// Every problem of the config and the tensors, one line each, in a fixed order (config, then tensors in the
// forward pass's order, then tensors the config has no block for); empty when the model can run. Of each tensor the
// check reads its name, role, layer and shape, not its dtype.
std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<TensorInfo>& tensors);
std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<Tensor>& tensors);
std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<KnotEntry>& entries);

// The first problem as an error "LABEL: PROBLEM" (with "(and N more)" when there are others): Unsupported for a
// config problem, NotFound for a missing tensor, Corrupt for a tensor of the wrong shape; ok when there is none.
Status check_model(const std::string& label, const ModelConfig& config, const std::vector<TensorInfo>& tensors);
Status check_model(const std::string& label, const ModelConfig& config, const std::vector<Tensor>& tensors);
Status check_model(const std::string& label, const ModelConfig& config, const std::vector<KnotEntry>& entries);

}  // namespace gkq
