// The calibration journal as `calibrate --resume` reopens it (calibrate/journal.h): the header
// line's run signature must match, a torn last line is cut, every other line must be a
// measurement. The signature is the seed journal's (tests/e2e/data/cpu_host_quick_2ranks.journal),
// so mutations of that file get past the header.
#include "calibrate/journal.h"
#include "fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtplan::fuzz::input_file(data, size, ".journal");
  return dtplan::fuzz::run([&] {
    dtplan::calibrate::Journal j(path,
                                 "backend=cpu ranks=2 quick=1 ops=all "
                                 "sizes=1024-1073741824(default) max_gemm_gflop=1 precisions=all",
                                 /*resume=*/true);
  });
}
