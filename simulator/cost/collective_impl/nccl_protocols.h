// NCCL's protocol model, shared by the ring and tree algorithms (ring.cpp, tree.cpp): NCCL
// prices every (algorithm, protocol) pair and runs the cheapest (src/enqueue.cc:2035-2044,
// NVIDIA/nccl@5067397c). A profile's per-step latencies are the Simple protocol's; LL and LL128
// steps take a fraction of them, for another base latency and less bandwidth (the ratios of
// src/graph/tuning.cc at that commit: hwLat NVLINK Ring {LL 0.6, LL128 1.9, Simple 3.4}, Tree
// {0.6, 1.25, 4}; NET Ring {2.7, 4.0, 14}, Tree {5.0, 8.5, 14}; baseLat Ring {6.6, 14, 8.4},
// Tree {6.8, 14, 0}; LL128 bandwidth 0.92 of Simple's; LL min(0.5 of it, llMaxBw)).
#pragma once

namespace dtplan::nccl {

struct ProtocolRatios {
  double nvlink_latency;  // per NVLink step, of the Simple step
  double net_latency;     // per network step, of the Simple step
  double extra_base_s;    // base latency beyond Simple's
};

inline constexpr ProtocolRatios kRingLl{0.6 / 3.4, 2.7 / 14.0, (6.6 - 8.4) * 1e-6};
inline constexpr ProtocolRatios kRingLl128{1.9 / 3.4, 4.0 / 14.0, (14.0 - 8.4) * 1e-6};
inline constexpr ProtocolRatios kTreeLl{0.6 / 4.0, 5.0 / 14.0, 6.8e-6};
inline constexpr ProtocolRatios kTreeLl128{1.25 / 4.0, 8.5 / 14.0, 14.0e-6};
inline constexpr double kLl128BandwidthFraction = 0.92;
inline constexpr double kLlBandwidthFraction = 0.5;

// NCCL's llMaxBws (GB/s): one node (Ampere's row; Hopper's 141, which LL reaches only at sizes
// where LL128 already wins), two nodes and more (the Intel-host rows; AMD's are lower).
inline double ll_max_gbps(int nodes) { return nodes <= 1 ? 87.7 : nodes == 2 ? 39.0 : 20.4; }

}  // namespace dtplan::nccl
