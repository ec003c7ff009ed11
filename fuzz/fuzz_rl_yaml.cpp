// RL configuration and published-case files (planner/rl.h: load_rl_file, load_rl_cases).
#include "fuzz/fuzz_loader.h"
#include "planner/rl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] {
    // The same text as both kinds of file: each must load or be refused with InputError.
    try {
      dtplan::rl::load_rl_file(path);
    } catch (const dtplan::InputError&) {
    }
    dtplan::rl::load_rl_cases(path);
  });
}
