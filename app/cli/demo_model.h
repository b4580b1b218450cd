// The bundled demo model (resources/demo: model.safetensors + config.json + tokenizer.bin), which generate, eval,
// inspect and quantize open when no MODEL is given. Looked up next to an installed binary (../share/gkq/demo), then
// in the source tree the binary was built from (GKQ_DEMO_MODEL_DIR).
#pragma once

#include <string>

namespace gkq::cli {

// The demo model's folder, or "" when neither place holds model.safetensors.
std::string demo_model_dir();

// The help line that says so ("default: the bundled demo model, <dir>" or that none was found).
std::string demo_model_help();

}  // namespace gkq::cli
