#include "simulator/cost/collective_study.h"

#include <algorithm>
#include <cmath>

namespace dtplan {

GroupPlacement collective_placement(const HardwareProfile& hw, int gpus, int ranks_per_node,
                                    int concurrent_groups) {
  const int per_node = std::max(1, hw.node.placement_domain_gpus());
  GroupPlacement g;
  g.size = std::max(1, gpus);
  g.ranks_per_node = std::min(g.size, ranks_per_node > 0 ? ranks_per_node : per_node);
  g.nodes = (g.size + g.ranks_per_node - 1) / g.ranks_per_node;
  g.node_gpus_busy = std::min(per_node, g.ranks_per_node * std::max(1, concurrent_groups));
  return g;
}

CollectivePoint collective_point(const HardwareProfile& hw, CollectiveOp op, double bytes,
                                 const GroupPlacement& g) {
  CollectivePoint p;
  p.bytes = bytes;
  p.algorithms = collective_cost_by_algorithm(hw, op, bytes, g);
  p.selected = collective_cost(hw, op, bytes, g);
  if (p.selected.time_s > 0) {
    p.algbw_gbps = bytes / p.selected.time_s / 1e9;
    p.busbw_gbps = p.algbw_gbps * (op == CollectiveOp::kSendRecv ? 1.0 : busbw_factor(op, g.size));
  }
  return p;
}

CollectiveSweep collective_sweep(const HardwareProfile& hw, CollectiveOp op, double lo_bytes,
                                 double hi_bytes, const GroupPlacement& g) {
  CollectiveSweep s;
  std::string previous;
  for (double b = lo_bytes;; b *= 2) {
    const double bytes = std::min(b, hi_bytes);
    CollectivePoint p = collective_point(hw, op, bytes, g);
    const AlgorithmCost* best = nullptr;
    for (const auto& a : p.algorithms)  // NCCL's algorithms only: a parameter server is priced
      if (a.auto_selected && (!best || a.time.time_s() < best->time.time_s())) best = &a;
    if (best) {
      if (!previous.empty() && best->algorithm != previous)
        s.crossovers.push_back({bytes, previous, best->algorithm});
      previous = best->algorithm;
    }
    s.points.push_back(std::move(p));
    if (bytes >= hi_bytes) break;
  }
  return s;
}

}  // namespace dtplan
