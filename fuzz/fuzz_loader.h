// One libFuzzer target per loader: the input goes through a file, as the CLI reads it, and the
// loader must return or throw InputError (a located refusal); any other exception, a crash, a
// sanitizer report or a hang is a finding (issue #21).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace dtplan::fuzz {

// A file of this process holding `data`, named with `suffix` (".json" selects the JSON reading).
inline std::string input_file(const uint8_t* data, size_t size, const char* suffix) {
  // Removed when the process exits (libFuzzer ends a -max_total_time run through exit()).
  struct Owned {
    std::string path;
    ~Owned() { std::remove(path.c_str()); }
  };
  static const Owned owned{(std::filesystem::temp_directory_path() /
                            ("dtplan-fuzz-" + std::to_string(::getpid()) + suffix))
                               .string()};
  const std::string& path = owned.path;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

template <class F>
int run(F&& load) {
  try {
    load();
  } catch (const InputError&) {
  }
  return 0;
}

}  // namespace dtplan::fuzz
