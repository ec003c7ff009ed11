// Time of a collective on the cluster: the fastest registered algorithm, or a calibrated
// bus-bandwidth table from the profile when one covers the operation, scope and group size.
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct CollectiveCost {
  double time_s = 0;
  const char* algorithm = "";  // the registered name, or "calibrated"
};

CollectiveCost collective_cost(const HardwareProfile& hw, CollectiveOp op, double bytes,
                               const GroupPlacement& g);

// Every registered algorithm that implements the call, analytically (calibrated tables aside),
// each with its alpha/beta split and bottleneck; the per-collective overhead is in alpha.
struct AlgorithmCost {
  std::string algorithm;
  AlgorithmTime time;
  bool auto_selected = true;  // one NCCL's tuner may pick (not a parameter server)
};
std::vector<AlgorithmCost> collective_cost_by_algorithm(const HardwareProfile& hw, CollectiveOp op,
                                                        double bytes, const GroupPlacement& g);

}  // namespace dtplan
