// The cluster's links, for the simulator's flow-level bandwidth sharing. The fabric is regular,
// so routes are computed in closed form (no graph search). Vertices, conceptually: GPUs, one
// NVSwitch per NVLink domain, the NICs of each node (one rail each), one leaf switch per rail
// and one spine. Every link is one direction of a physical link, with its line rate:
//
//   GPU <-> NVSwitch       node.nvlink_gbps_per_direction
//   GPU <-> NIC (its rail) scale_out.nic_gbps (GPU i of a node uses rail i * nics / gpus)
//   NIC <-> leaf (rail)    scale_out.nic_gbps
//   leaf <-> spine         nodes x nic_gbps / oversubscription (aggregate uplink of a rail)
//
// Routes (the fewest hops; docs/simulator.md "The network"): within an NVLink domain, GPU ->
// NVSwitch -> GPU; across domains on one rail, GPU -> NIC -> leaf -> NIC -> GPU; between rails,
// first over NVLink to the GPU of the source's node on the destination's rail, then that rail
// (NCCL's PXN; 6 links). The spine is used only where no such GPU exists. Links enter the flow
// network only when a route uses them, so a 131K-GPU cluster with a few simulated ranks costs
// a few dozen links.
//
// Contract: GPU ids are global ranks in [0, num_gpus); node = gpu / gpus_per_node. Routes
// are symmetric in length: the first half goes up (towards the spine), the second down.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/hardware.h"
#include "simulator/des/resources.h"

namespace dtplan::des {

// The geometry alone: which physical link directions a route crosses, each named by a key
// that is the same for every caller (the symmetry reduction compares routes by these keys).
class RailFabric {
 public:
  RailFabric(const HardwareProfile& hw, int num_gpus);
  // Appends the keys of the links from `src` to `dst` (nothing when src == dst).
  void route(int src, int dst, std::vector<uint64_t>& keys) const;
  // Appends the keys of a ring member's route (Topology::ring_route): the up half of its route
  // to `succ`, the down half of the route from `pred`.
  void ring_route(int pred, int self, int succ, std::vector<uint64_t>& keys) const;
  // Line rate of a link, bytes/s, without faults.
  double capacity_bytes_per_s(uint64_t key) const;
  // The node whose NIC (or GPU-NIC) link this is, or -1 for NVLink and spine links.
  int nic_node(uint64_t key) const;
  int gpus_per_node() const { return per_node_; }

 private:
  int per_node_, domain_, nics_, num_gpus_;
  double nvlink_, nic_, uplink_;
};

class Topology {
 public:
  // Any GPU in [0, num_gpus) may be routed. `slow_nodes`: (node, factor) whose NIC links run
  // factor times below their line rate (a flaky link); bottleneck_bytes_per_s still reports the
  // nominal rate, so a transfer sized by it takes longer there.
  Topology(const HardwareProfile& hw, int num_gpus, FlowNetwork& net,
           const std::vector<std::pair<int, double>>& slow_nodes = {});
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
  // Flow-network links created so far.
  int links() const { return static_cast<int>(link_of_key_.size()); }

 private:
  int link(uint64_t key);
  std::vector<int> links_of(const std::vector<uint64_t>& keys);
  RailFabric fabric_;
  FlowNetwork& net_;
  std::vector<std::pair<int, double>> slow_nodes_;
  std::unordered_map<uint64_t, int> link_of_key_;
  std::unordered_map<uint64_t, std::vector<int>> routes_;  // by src << 32 | dst
  std::vector<double> nominal_;  // by flow-network link id (0: not a fabric link)
  std::vector<uint64_t> scratch_;
};

}  // namespace dtplan::des
