#include "simulator/des/topology.h"

#include <algorithm>
#include <limits>

#include "core/units.h"

namespace dtplan::des {

namespace {

// Link keys: index x 8 + kind. GPU links are indexed by GPU, NIC links by node x nics + rail,
// spine links by rail.
enum LinkKind : uint64_t {
  kGpuSwUp = 0,
  kGpuSwDown = 1,
  kGpuNicUp = 2,
  kGpuNicDown = 3,
  kNicLeafUp = 4,
  kNicLeafDown = 5,
  kLeafSpineUp = 6,
  kLeafSpineDown = 7,
};
uint64_t key(LinkKind kind, int64_t index) { return static_cast<uint64_t>(index) * 8 + kind; }

}  // namespace

RailFabric::RailFabric(const HardwareProfile& hw, int num_gpus)
    : per_node_(std::max(1, hw.node.gpus_per_node)),
      domain_(std::max(per_node_, hw.node.placement_domain_gpus())),
      nics_(std::max(1, hw.scale_out.nics_per_node)),
      num_gpus_(std::max(1, num_gpus)),
      nvlink_(hw.node.nvlink_gbps_per_direction * units::kGB),
      nic_(hw.scale_out.nic_gbps * units::kGB) {
  const int nodes = (num_gpus_ + per_node_ - 1) / per_node_;
  uplink_ = nodes * nic_ / std::max(1.0, hw.scale_out.oversubscription);
}

void RailFabric::route(int src, int dst, std::vector<uint64_t>& keys) const {
  if (src == dst) return;
  const int ns = src / per_node_, nd = dst / per_node_;
  auto rail = [&](int gpu) { return (gpu % per_node_) * nics_ / per_node_; };
  auto nic = [&](int node, int r) { return static_cast<int64_t>(node) * nics_ + r; };
  if (static_cast<int64_t>(ns) * per_node_ / domain_ ==
      static_cast<int64_t>(nd) * per_node_ / domain_) {
    keys.push_back(key(kGpuSwUp, src));
    keys.push_back(key(kGpuSwDown, dst));
    return;
  }
  const int r = rail(dst);
  if (rail(src) == r) {
    keys.push_back(key(kGpuNicUp, src));
    keys.push_back(key(kNicLeafUp, nic(ns, r)));
    keys.push_back(key(kNicLeafDown, nic(nd, r)));
    keys.push_back(key(kGpuNicDown, dst));
    return;
  }
  // PXN: the lowest GPU of the source's node on rail r.
  const int first = (r * per_node_ + nics_ - 1) / nics_;  // smallest l with l*nics/per_node == r
  const int via = ns * per_node_ + first;
  if (via < num_gpus_) {
    keys.push_back(key(kGpuSwUp, src));
    keys.push_back(key(kGpuSwDown, via));
    keys.push_back(key(kGpuNicUp, via));
  } else {  // no such GPU: up the source's rail and over the spine
    keys.push_back(key(kGpuNicUp, src));
    keys.push_back(key(kNicLeafUp, nic(ns, rail(src))));
    keys.push_back(key(kLeafSpineUp, rail(src)));
    keys.push_back(key(kLeafSpineDown, r));
    keys.push_back(key(kNicLeafDown, nic(nd, r)));
    keys.push_back(key(kGpuNicDown, dst));
    return;
  }
  keys.push_back(key(kNicLeafUp, nic(ns, r)));
  keys.push_back(key(kNicLeafDown, nic(nd, r)));
  keys.push_back(key(kGpuNicDown, dst));
}

void RailFabric::ring_route(int pred, int self, int succ, std::vector<uint64_t>& keys) const {
  const size_t at = keys.size();
  route(self, succ, keys);
  keys.resize(at + (keys.size() - at) / 2);  // the up half of the route out
  const size_t in = keys.size();
  route(pred, self, keys);
  const size_t n = keys.size() - in;  // the down half of the route in
  keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(in),
             keys.begin() + static_cast<std::ptrdiff_t>(in + n / 2));
}

double RailFabric::capacity_bytes_per_s(uint64_t k) const {
  switch (k % 8) {
    case kGpuSwUp:
    case kGpuSwDown:
      return nvlink_;
    case kLeafSpineUp:
    case kLeafSpineDown:
      return uplink_;
    default:
      return nic_;
  }
}

int RailFabric::nic_node(uint64_t k) const {
  const uint64_t index = k / 8;
  switch (k % 8) {
    case kGpuNicUp:
    case kGpuNicDown:
      return static_cast<int>(index / static_cast<uint64_t>(per_node_));
    case kNicLeafUp:
    case kNicLeafDown:
      return static_cast<int>(index / static_cast<uint64_t>(nics_));
    default:
      return -1;
  }
}

Topology::Topology(const HardwareProfile& hw, int num_gpus, FlowNetwork& net,
                   const std::vector<std::pair<int, double>>& slow_nodes)
    : fabric_(hw, num_gpus), net_(net), slow_nodes_(slow_nodes) {}

int Topology::link(uint64_t k) {
  const auto it = link_of_key_.find(k);
  if (it != link_of_key_.end()) return it->second;
  const double nominal = fabric_.capacity_bytes_per_s(k);
  double slow = 1.0;
  if (const int node = fabric_.nic_node(k); node >= 0)
    for (const auto& [n, f] : slow_nodes_)
      if (n == node) slow = std::max(slow, f);
  const int id = net_.add_link(nominal / slow);
  if (static_cast<size_t>(id) >= nominal_.size()) nominal_.resize(static_cast<size_t>(id) + 1, 0);
  nominal_[static_cast<size_t>(id)] = nominal;
  link_of_key_.emplace(k, id);
  return id;
}

const std::vector<int>& Topology::route(int src, int dst) {
  const uint64_t k =
      (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) | static_cast<uint32_t>(dst);
  const auto it = routes_.find(k);
  if (it != routes_.end()) return it->second;
  scratch_.clear();
  fabric_.route(src, dst, scratch_);
  return routes_.emplace(k, links_of(scratch_)).first->second;
}

std::vector<int> Topology::links_of(const std::vector<uint64_t>& keys) {
  std::vector<int> links;
  links.reserve(keys.size());
  for (uint64_t key : keys) links.push_back(link(key));
  return links;
}

std::vector<int> Topology::ring_route(int pred, int self, int succ) {
  scratch_.clear();
  fabric_.ring_route(pred, self, succ, scratch_);
  return links_of(scratch_);
}

double Topology::bottleneck_bytes_per_s(const std::vector<int>& links) const {
  double r = std::numeric_limits<double>::infinity();
  for (int l : links) {
    const auto li = static_cast<size_t>(l);
    r = std::min(r, li < nominal_.size() && nominal_[li] > 0 ? nominal_[li] : net_.capacity(l));
  }
  return r;
}

}  // namespace dtplan::des
