// Hugging Face config.json (core/hf_import.h: import_hf_config).
#include "core/hf_import.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".json");
  return dtplan::fuzz::run([&] { dtplan::import_hf_config(path, "fuzz"); });
}
