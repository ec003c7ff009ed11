// A test cluster small enough to check routes and contention by hand: two nodes of two GPUs,
// NVLink 300 GB/s per direction, one 25 GB/s NIC (rail) per GPU, no oversubscription.
#pragma once

#include "core/hardware.h"

namespace dtplan::des {

inline HardwareProfile two_nodes_two_rails() {
  HardwareProfile hw;
  hw.node.gpus_per_node = 2;
  hw.node.nvlink_domain_gpus = 2;
  hw.node.nvlink_gbps_per_direction = 300;
  hw.scale_out.nics_per_node = 2;
  hw.scale_out.nic_gbps = 25;
  hw.scale_out.oversubscription = 1;
  return hw;
}

}  // namespace dtplan::des
