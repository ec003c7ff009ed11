// One collective on its own (`dtplan collective`): its placement on the cluster, its time by
// every registered algorithm with the alpha/beta split and bottleneck, and a size sweep with
// the sizes where the fastest algorithm changes.
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"
#include "simulator/cost/collective_cost.h"

namespace dtplan {

// `gpus` ranks filling nodes `ranks_per_node` at a time (0 = a whole node's GPUs); the NIC
// of a node is shared by `concurrent_groups` groups like this one running at once (e.g. the
// 8 data-parallel groups of a TP8 layout, one rank per node each).
GroupPlacement collective_placement(const HardwareProfile& hw, int gpus, int ranks_per_node,
                                    int concurrent_groups);

struct CollectivePoint {
  double bytes = 0;
  std::vector<AlgorithmCost> algorithms;  // every algorithm that implements the call
  CollectiveCost selected;  // what the cost model charges (pinned, tuned or calibrated)
  double algbw_gbps = 0, busbw_gbps = 0;  // of the selected time (nccl-tests definitions)
};

struct Crossover {
  double bytes = 0;  // the first swept size the new algorithm is fastest at
  std::string from, to;
};

CollectivePoint collective_point(const HardwareProfile& hw, CollectiveOp op, double bytes,
                                 const GroupPlacement& g);

// Sizes from lo to hi doubling (nccl-tests -f 2), hi included; crossovers of the fastest of
// NCCL's algorithms (the parameter server is priced beside them, never picked).
struct CollectiveSweep {
  std::vector<CollectivePoint> points;
  std::vector<Crossover> crossovers;
};
CollectiveSweep collective_sweep(const HardwareProfile& hw, CollectiveOp op, double lo_bytes,
                                 double hi_bytes, const GroupPlacement& g);

}  // namespace dtplan
