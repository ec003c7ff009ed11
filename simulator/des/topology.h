// The cluster's links as a graph (Boost.Graph), for the simulator's flow-level bandwidth
// sharing. Vertices: GPUs, one NVSwitch per NVLink domain, the NICs of each node (one rail
// each), one leaf switch per rail and one spine. Every edge is one direction of a physical
// link, with its line rate:
//
//   GPU <-> NVSwitch       node.nvlink_gbps_per_direction
//   GPU <-> NIC (its rail) scale_out.nic_gbps (GPU i of a node uses rail i * nics / gpus)
//   NIC <-> leaf (rail)    scale_out.nic_gbps
//   leaf <-> spine         nodes x nic_gbps / oversubscription (aggregate uplink of a rail)
//
// A route between two GPUs is the fewest-hop path (breadth-first search): NVLink within a
// domain, the shared rail across nodes. Between rails, of the equally short paths the search
// meets the one that first crosses NVLink to the GPU on the destination's rail (NVSwitch edges
// are added before NIC edges), which is what NCCL's PXN does instead of crossing the spine. Only
// nodes holding a GPU the caller asked about become vertices, so a 16K-GPU cluster with a few
// simulated ranks stays a graph of a few hundred vertices; links enter the flow network only when a
// route uses them.
//
// Contract: GPU ids are global ranks in [0, num_gpus); node = gpu / gpus_per_node. Routes
// are symmetric in length: the first half goes up (towards the spine), the second down.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/hardware.h"
#include "simulator/des/resources.h"

namespace dtplan::des {

class Topology {
 public:
  // `gpus`: every GPU a route may start or end at. `slow_nodes`: (node, factor) whose NIC
  // links run factor times below their line rate (a flaky link); bottleneck_bytes_per_s still
  // reports the nominal rate, so a transfer sized by it takes longer there.
  Topology(const HardwareProfile& hw, int num_gpus, const std::vector<int>& gpus, FlowNetwork& net,
           const std::vector<std::pair<int, double>>& slow_nodes = {});
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // Flow-network link ids along the route from `src` to `dst` (empty when src == dst).
  const std::vector<int>& route(int src, int dst);
  // The route of a ring collective as seen by one member, by symmetry: the up half of the
  // route to its successor and the down half of the route from its predecessor, so that the
  // member's own links carry both what it sends and what it receives.
  std::vector<int> ring_route(int pred, int self, int succ);
  // The smallest nominal line rate along a route, bytes/s (infinity for an empty route).
  double bottleneck_bytes_per_s(const std::vector<int>& links) const;
  int vertices() const;

 private:
  struct Graph;
  std::unique_ptr<Graph> g_;
  FlowNetwork& net_;
  std::map<std::pair<int, int>, std::vector<int>> routes_;
  std::map<int, double> nominal_;  // flow-network link -> its line rate without faults
};

}  // namespace dtplan::des
