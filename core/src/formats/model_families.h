// Model families by name, including those the architecture table has no row for (gkq synth writes their true
// shapes and a config.json that names them, though no reader or forward pass of gkq runs them). The names are
// spelled in core/src/formats/arch_table.cpp, the one file that spells a format's names.
#pragma once

#include "gkq/arch.h"

#include <cstdint>
#include <string_view>

namespace gkq {

enum class ModelFamily : uint8_t { Llama, Mistral, Qwen2 };

struct FamilyNames {
    std::string_view hf_class;       // config.json "architectures" entry
    std::string_view model_type;     // config.json "model_type"
    const ArchSpec* arch = nullptr;  // the row gkq runs the family with; null: none
};

FamilyNames family_names(ModelFamily f);

}  // namespace gkq
