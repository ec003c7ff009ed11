#include "calibrate/task.h"

#include <fmt/format.h>

namespace dtplan::calibrate {

std::string Task::key() const {
  if (kind == TaskKind::kGemm)
    return fmt::format("gemm {} {}x{}x{}", to_string(precision), m, n, k);
  return fmt::format("{} {} n{} {}", to_string(op), to_string(scope), group_size, bytes);
}

double nccl_busbw_factor(CollectiveOp op, int n) {
  const double nn = n;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return n <= 1 ? 1.0 : 2.0 * (nn - 1) / nn;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return n <= 1 ? 1.0 : (nn - 1) / nn;
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

double Measurement::busbw_gbps() const {
  return algbw_gbps() * nccl_busbw_factor(task.op, task.group_size);
}

bool parse_collective_op(const std::string& s, CollectiveOp& out) {
  for (auto op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                  CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    if (s == to_string(op)) {
      out = op;
      return true;
    }
  }
  return false;
}

bool parse_scope(const std::string& s, CommScope& out) {
  if (s == "intra_node") {
    out = CommScope::kIntraNode;
    return true;
  }
  if (s == "inter_node") {
    out = CommScope::kInterNode;
    return true;
  }
  return false;
}

}  // namespace dtplan::calibrate
