// Time of a collective on the cluster: the fastest registered algorithm, or a calibrated
// bus-bandwidth table from the profile when one covers the operation, scope and group size.
#pragma once

#include "core/hardware.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct CollectiveCost {
  double time_s = 0;
  const char* algorithm = "";  // the registered name, or "calibrated"
};

CollectiveCost collective_cost(const HardwareProfile& hw, CollectiveOp op, double bytes,
                               const GroupPlacement& g);

}  // namespace dtplan
