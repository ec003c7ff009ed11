// The measurement sweep: which GEMM shapes and collectives a calibration run times.
//  - GEMM: the (M, N, K) that the model zoo's layers produce under tensor parallelism 1-8
//    (from the op program, micro-batch 1 at 4K tokens), plus a regular grid; per precision.
//  - Collectives: all-reduce, all-gather, reduce-scatter, all-to-all and send/recv over sizes
//    from --sizes (default 1 KiB to 1 GiB, or 64 MiB with --quick; factor 2; capped by the
//    backend's memory rule), in
//    the groups the processes allow: inside node 0 (2, 4, ... ranks), one rank per node, all
//    ranks, and pairs (send/recv). A single process measures send/recv to itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/i_backend.h"
#include "calibrate/task.h"

namespace dtplan::calibrate {

class ProcessGroup;

struct SweepOptions {
  bool quick = false;            // a reduced sweep (a few shapes, sizes x8)
  std::vector<std::string> ops;  // "gemm" and collective names; empty = all
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{1} << 30;
  bool sizes_given = false;           // --sizes was passed (--quick then keeps its range)
  double max_gemm_gflop = 0;          // skip larger GEMMs (0 = no cap); the cpu backend sets one
  std::vector<Precision> precisions;  // empty = every precision the backend supports
  // A stable text for the journal header: a resumed run must have the same sweep.
  std::string signature() const;
};

// The sizes and groups this process group can form; same result on every rank.
std::vector<Task> standard_sweep(const SweepOptions& options, const Environment& env,
                                 const ProcessGroup& world);

// Parses "--sizes 1K-64M" (K, M, G are powers of 1024). Throws InputError naming the flag.
void parse_size_range(const std::string& text, int64_t& min_bytes, int64_t& max_bytes);

}  // namespace dtplan::calibrate
