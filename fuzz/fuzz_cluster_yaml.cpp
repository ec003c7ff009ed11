// Cluster YAML (core/catalog.h: load_cluster, a file with profile and nodes or groups).
#include "core/catalog.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".yaml");
  return dtplan::fuzz::run([&] { dtplan::load_cluster(path, 0); });
}
