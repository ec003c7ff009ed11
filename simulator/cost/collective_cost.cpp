#include "simulator/cost/collective_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/registry.h"
#include "simulator/cost/calibration_coverage.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {

double busbw_factor(CollectiveOp op, int n) {
  if (n <= 1) return 0;
  const double nn = n;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (nn - 1) / nn;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return (nn - 1) / nn;
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

LinkRates link_rates(const HardwareProfile& hw, const GroupPlacement& g) {
  LinkRates r;
  const EfficiencyParams& e = hw.efficiency;
  r.intra_busbw_gbps = hw.node.nvlink_gbps_per_direction * e.nvlink_bw_fraction;
  // The NICs of the NVLink domain (every tray's, nics_per_node per gpus_per_node GPUs) are
  // shared by every GPU of the domain whose groups communicate at once; this group owns
  // ranks_per_node of them (rail-optimized: one NIC rail per local rank). On a DGX the domain
  // is one node; on an NVL72 rack a 64-GPU domain holds 16 trays' NICs, one per GPU.
  // A rank reaches only its own rail's NICs (nics_per_node / gpus_per_node of them: one on a
  // DGX or a GB200 tray), so a group never gets more than its ranks' rails, even alone on the
  // node: one GPU per node sending is one NIC's bandwidth, not the node's (nccl-tests with one
  // GPU per node report about one NIC's busbw).
  const double busy = std::max(1, g.node_gpus_busy);
  const double gpus_per_tray = std::max(1, hw.node.gpus_per_node);
  const double share = std::min(1.0, g.ranks_per_node / busy);
  const double trays = std::ceil(busy / gpus_per_tray);
  const double tray_share = std::min(trays * share, g.ranks_per_node / gpus_per_tray);
  double node_bw = hw.scale_out.node_gbps() * e.network_bw_fraction * tray_share;
  if (hw.scale_out.oversubscription > 1.0 && g.nodes > 1) node_bw /= hw.scale_out.oversubscription;
  r.node_network_gbps = std::max(node_bw, 1e-3);
  r.inter_busbw_gbps = std::min(r.intra_busbw_gbps, r.node_network_gbps);
  r.alpha_intra_s = hw.node.latency_us * 1e-6;
  r.alpha_inter_s = hw.scale_out.latency_us * 1e-6;
  // Default: one server per physical node (tray) the group spans.
  const int per_node = std::max(1, hw.node.gpus_per_node);
  r.servers = hw.parameter_servers > 0 ? hw.parameter_servers
                                       : std::max(1, (g.size + per_node - 1) / per_node);
  r.server_gbps = hw.scale_out.node_gbps() * e.network_bw_fraction;
  return r;
}

static double interpolate_busbw(const CollectiveTable& t, double bytes) {
  const auto& p = t.points;
  if (bytes <= p.front().first) return p.front().second * bytes / p.front().first;  // latency-bound
  if (bytes >= p.back().first) return p.back().second;
  for (size_t i = 1; i < p.size(); ++i) {
    if (bytes <= p[i].first) {
      const double x0 = std::log(p[i - 1].first), x1 = std::log(p[i].first);
      const double w = (std::log(bytes) - x0) / (x1 - x0);
      return p[i - 1].second + w * (p[i].second - p[i - 1].second);
    }
  }
  return p.back().second;
}

CollectiveCost collective_cost(const HardwareProfile& hw, CollectiveOp op, double bytes,
                               const GroupPlacement& g) {
  if (g.size <= 1 || bytes <= 0) return {0, "none"};
  const CommScope scope = g.crosses_nodes() ? CommScope::kInterNode : CommScope::kIntraNode;
  // Calibrated table: same op and scope, nearest group size within a factor of 2.
  const CollectiveTable* best = nullptr;
  for (const auto& t : hw.calibration.collectives) {
    if (t.op != op || t.scope != scope) continue;
    if (t.group_size * 2 < g.size || t.group_size > 2 * g.size) continue;
    if (!best || std::abs(t.group_size - g.size) < std::abs(best->group_size - g.size)) best = &t;
  }
  if (auto* cov = active_coverage()) cov->note_collective(hw, op, bytes, g, best);
  if (best) {
    const double f = op == CollectiveOp::kSendRecv ? 1.0 : busbw_factor(op, g.size);
    // Measured tables already include launch and synchronization costs.
    return {bytes * f / (interpolate_busbw(*best, bytes) * 1e9), "calibrated"};
  }
  const LinkRates links = link_rates(hw, g);
  CollectiveCost out{std::numeric_limits<double>::infinity(), ""};
  // A pinned algorithm applies where it implements the call (NCCL_ALGO=Tree still runs
  // all-gathers as rings; a hierarchical all-reduce needs several ranks on several nodes);
  // elsewhere the fastest registered one NCCL would pick.
  if (!hw.collective_algorithm.empty()) {
    for (const auto& e : Registry<ICollectiveAlgorithm>::global().entries()) {
      if (e.name != hw.collective_algorithm || !e.instance->supports(op)) continue;
      const AlgorithmTime t = e.instance->cost(op, bytes, g, links);
      if (t.supported()) out = {t.time_s(), e.name.c_str()};
    }
  }
  if (!std::isfinite(out.time_s)) {
    for (const auto& e : Registry<ICollectiveAlgorithm>::global().entries()) {
      if (!e.instance->supports(op) || !e.instance->auto_selected()) continue;
      const AlgorithmTime t = e.instance->cost(op, bytes, g, links);
      if (t.supported() && t.time_s() < out.time_s) out = {t.time_s(), e.name.c_str()};
    }
  }
  if (!std::isfinite(out.time_s)) out = {0, "none"};
  out.time_s += hw.efficiency.collective_overhead_us * 1e-6;
  return out;
}

std::vector<AlgorithmCost> collective_cost_by_algorithm(const HardwareProfile& hw, CollectiveOp op,
                                                        double bytes, const GroupPlacement& g) {
  std::vector<AlgorithmCost> out;
  if (g.size <= 1 || bytes <= 0) return out;
  const LinkRates links = link_rates(hw, g);
  for (const auto& e : Registry<ICollectiveAlgorithm>::global().entries()) {
    if (!e.instance->supports(op)) continue;
    AlgorithmCost c{e.name, e.instance->cost(op, bytes, g, links), e.instance->auto_selected()};
    if (!c.time.supported()) continue;
    c.time.alpha_s += hw.efficiency.collective_overhead_us * 1e-6;
    out.push_back(std::move(c));
  }
  return out;
}

const char* to_string(Bottleneck b) {
  switch (b) {
    case Bottleneck::kNvlink:
      return "nvlink";
    case Bottleneck::kNetwork:
      return "network";
    case Bottleneck::kServer:
      return "server";
    case Bottleneck::kNone:
      break;
  }
  return "none";
}

}  // namespace dtplan
