// Import of a Hugging Face transformers config.json (Llama, Mistral, Mixtral, Qwen2/Qwen3,
// Qwen2-MoE/Qwen3-MoE, DeepSeek-V2/V3 field families) into a ModelSpec.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"

namespace dtplan {

// The model_type values the importer understands.
const std::vector<std::string>& hf_supported_model_types();

// Reads `path` (JSON, read with the same position-aware reader as YAML). `name` overrides the
// model name (default: the file's stem, or the parent folder when the file is config.json).
// Throws InputError with file:line:col and the fields that are missing or wrong. `notes`, when
// given, receives what the import read but does not carry into the spec (a quantized
// checkpoint's storage format), for the CLI to say.
ModelSpec import_hf_config(const std::string& path, const std::string& name = "",
                           std::vector<std::string>* notes = nullptr);

}  // namespace dtplan
