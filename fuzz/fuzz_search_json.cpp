// A saved `dtplan search --json` file, as `launch --from` and `report --from` read it
// (cli/search_options.h: search_flags_from_json).
#include "cli/search_options.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".json");
  return dtplan::fuzz::run([&] { dtplan::cli::search_flags_from_json(path); });
}
