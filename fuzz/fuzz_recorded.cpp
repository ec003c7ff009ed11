// Recorded measurements for the replay backend, chosen by content: a dtplan journal (JSON
// lines), the CSV format, or an nccl-tests -J JSON report (calibrate/recorded.h: read_recorded).
#include "calibrate/recorded.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".txt");
  return dtplan::fuzz::run([&] { dtplan::calibrate::read_recorded(path); });
}
