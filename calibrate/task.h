// What the calibrator measures: a task (one GEMM shape, or one collective at one message size
// in one group) and its measurement. Tasks have a stable text key, so a journal can tell which
// measurements a run already has (--resume).
#pragma once

#include <cstdint>
#include <string>

#include "core/hardware.h"

namespace dtplan::calibrate {

enum class TaskKind { kGemm, kCollective };

struct Task {
  TaskKind kind = TaskKind::kGemm;
  // GEMM: C[m x n] = A[m x k] B[k x n] at `precision`.
  Precision precision = Precision::kBf16;
  int64_t m = 0, n = 0, k = 0;
  // Collective: `bytes` is the size nccl-tests reports in its `size` column (per-rank buffer for
  // all-reduce and send/recv, the total for all-gather, reduce-scatter and all-to-all).
  CollectiveOp op = CollectiveOp::kAllReduce;
  CommScope scope = CommScope::kIntraNode;
  int group_size = 1;
  int64_t bytes = 0;

  double gemm_flops() const { return 2.0 * static_cast<double>(m) * n * k; }
  // "gemm bf16 4096x12288x12288" or "all_reduce intra_node n8 1048576".
  std::string key() const;
};

struct Measurement {
  Task task;
  double time_s = 0;      // median over repeats of one operation's time (slowest rank)
  std::string algorithm;  // the library's algorithm when known ("ring", "tree", "mpi")
  double tflops() const { return task.gemm_flops() / time_s / 1e12; }
  // nccl-tests definitions (docs/file-formats.md): algbw = bytes / t, busbw = algbw x factor.
  double algbw_gbps() const { return static_cast<double>(task.bytes) / time_s / 1e9; }
  double busbw_gbps() const;
};

// nccl-tests bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for send/recv (CONVENTIONS.md section 4).
double nccl_busbw_factor(CollectiveOp op, int n);

// Parses the names used in keys, YAML and CSV; nullopt when unknown.
bool parse_collective_op(const std::string& s, CollectiveOp& out);
bool parse_scope(const std::string& s, CommScope& out);

}  // namespace dtplan::calibrate
