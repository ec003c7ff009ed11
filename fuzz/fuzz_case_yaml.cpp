// Ground-truth case file, schema v1 or v2 (simulator/validation/accuracy.h: load_case_file).
#include "fuzz/fuzz_loader.h"
#include "simulator/validation/accuracy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] { dtplan::load_case_file(path); });
}
