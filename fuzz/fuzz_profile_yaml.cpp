// Hardware profile YAML (core/hardware.h: load_profile_file).
#include "core/hardware.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] { dtplan::load_profile_file(path); });
}
