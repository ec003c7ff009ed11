// What-if scenario file (reports/whatif.h: load_scenarios).
#include "fuzz/fuzz_loader.h"
#include "reports/whatif.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] { dtplan::reports::load_scenarios(path); });
}
