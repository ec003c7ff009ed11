// Model YAML (core/model_spec.h: load_model_file).
#include "core/model_spec.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] { dtplan::load_model_file(path); });
}
