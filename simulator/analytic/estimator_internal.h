// The estimator's internals, shared by its translation units (estimator_cache.cpp: the cache;
// stage_times.cpp: the per-rank times every entry point computes first; estimator.cpp: the
// composition of a step). Not part of the library's interface: include only from analytic/.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/dp_cost.h"
#include "simulator/cost/layer_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/step/step_costs.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

inline constexpr int kMaxStages = kMaxPipelineStages;  // core/plan.h: validate_plan refuses more

// The layer split in one number, with whether the schedule is V-shaped (which ranks hold which
// chunks, and where the loss is): what caches of per-rank layers, parameters and times key on.
inline int layout_key(const Plan& p) { return p.split_key() | (v_shaped(p) ? 1 << 30 : 0); }

// The plan fields the per-layer op costs depend on (with the model, cluster and workload fixed).
struct LayerKey {
  int tp, cp, mbs, ep, etp;
  bool sp, flash, tp_overlap, ep_overlap;
  Recompute recompute;
  MoeDispatcher dispatcher;
  RankOrder rank_order;
  bool operator==(const LayerKey&) const = default;
};

// Hashes the integers only: the rank order is nearly always the default, and hashing its
// characters for every plan of a search costs more than comparing them on a hit.
struct LayerKeyHash {
  size_t operator()(const LayerKey& k) const {
    size_t h = static_cast<size_t>(k.rank_order);
    for (int v : {k.tp, k.cp, k.mbs, k.ep, k.etp, static_cast<int>(k.recompute),
                  k.sp * 1 + k.flash * 2 + k.tp_overlap * 4 + k.ep_overlap * 8 +
                      static_cast<int>(k.dispatcher) * 16})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Whether the plan's layer key is `k`, without building a key (no string copy).
inline bool same_layer_key(const LayerKey& k, const Plan& p) {
  return k.tp == p.tp && k.cp == p.cp && k.mbs == p.mbs && k.ep == p.ep && k.etp == p.etp &&
         k.sp == p.sp && k.flash == p.flash_attention && k.tp_overlap == p.tp_comm_overlap &&
         k.ep_overlap == p.ep_comm_overlap && k.recompute == p.recompute &&
         k.dispatcher == p.moe_dispatcher && k.rank_order == p.rank_order;
}

inline LayerKey layer_key(const Plan& p) {
  return {p.tp,
          p.cp,
          p.mbs,
          p.ep,
          p.etp,
          p.sp,
          p.flash_attention,
          p.tp_comm_overlap,
          p.ep_comm_overlap,
          p.recompute,
          p.moe_dispatcher,
          p.rank_order};
}

// What every entry point computes first: the layer costs, the group placements, the layers of
// each rank and each rank's time for one micro-batch (the pipeline schedule's input). Large
// (three 1024-entry arrays): declared without initialization; only [0, pp) is written and read.
struct StageTimes {
  EstimatorCache::Impl* memo;
  const LayerCostSet* costs;
  const Placements* groups;
  const RankLayers* layers;  // per rank
  const ParamCounts* counts;
  int pp, mb;
  double t_p2p;
  int busiest;
  double busiest_t;
  CommLedger busiest_comm;  // the busiest rank's communication per micro-batch
  double busiest_compute, busiest_recompute, busiest_overhead;
  std::array<double, kMaxStages> f, b, wg;
  // Per rank and micro-batch: compute, recomputation and host overhead (the breakdown's parts).
  std::array<double, kMaxStages> compute, recompute, overhead;
  // Filled by pipeline_time when asked: when each rank's last task ends and its last
  // weight-gradient task starts (the schedule's, PipelineInput).
  std::array<double, kMaxStages> rank_end, rank_grad_start;
  // The ranks whose times the stage loop computed, ascending; every other rank is a middle rank
  // with the layers and times of the one before it.
  std::array<int, kMaxStages> distinct;
  int n_distinct;
  // Storage for calls without a cache (a LayerCostSet or RankLayers local would be cleared on
  // every call, cached or not).
  alignas(LayerCostSet) unsigned char costs_storage[sizeof(LayerCostSet)];
  alignas(RankLayers) unsigned char layers_storage[kMaxStages * sizeof(RankLayers)];
  Placements placed;
  ParamCounts own_counts;
};
struct MemoryPeak {
  StageMemory first, last, peak;
  int peak_stage = 0;
  double peak_bytes = -1;
};

// What the stage loop's results depend on (with the model, cluster and workload of the cache):
// consecutive plans of a search that differ only in ZeRO stage, schedule or global batch share
// them.
struct StageKey {
  const LayerCostSet* costs;
  uint64_t placement;  // EstimatorCache::Impl::placement_gen
  int pp, vpp;
  int split;  // Plan::split_key
  Recompute recompute;
  int recompute_layers;
  int offload_layers;
  bool operator==(const StageKey&) const = default;
};

// What DpStage depends on besides the ZeRO stage (with the model, cluster and workload of the
// cache).
struct DpKey {
  uint64_t placement;  // EstimatorCache::Impl::placement_gen (the layout)
  int pp, vpp;
  int split;  // Plan::split_key
  double grad_bytes;
  bool per_tensor;  // Plan::zero3_gather_per_tensor
  bool operator==(const DpKey&) const = default;
};

// What the memory of a plan depends on, besides the layer costs (activations) and the schedule.
struct MemoryKey {
  const LayerCostSet* costs;
  const IPipelineSchedule* schedule;
  int tp, pp, cp, dp, ep, etp, vpp, zero, recompute_layers, offload_layers, mbs, mb;
  Recompute recompute;
  bool sp;
  int split;  // Plan::split_key
  bool main_grads_fp32;
  double optimizer_state_bytes;
  bool operator==(const MemoryKey&) const = default;
};

inline MemoryKey memory_key(const LayerCostSet* costs, const IPipelineSchedule* s, const Plan& p,
                            int mb) {
  return {costs,
          s,
          p.tp,
          p.pp,
          p.cp,
          p.dp,
          p.ep,
          p.etp,
          p.vpp,
          p.zero,
          p.recompute_layers,
          p.offload_layers,
          p.mbs,
          mb,
          p.recompute,
          p.sp,
          layout_key(p),
          p.main_grads_fp32,
          p.optimizer_state_bytes_per_param};
}

// A collective priced for one group shape; plans of one search repeat them constantly.
struct CollectiveKey {
  CollectiveOp op;
  double bytes;
  int size, ranks_per_node, nodes, busy;
  double remote_share;
  bool operator==(const CollectiveKey&) const = default;
};

struct CollectiveKeyHash {
  size_t operator()(const CollectiveKey& k) const {
    size_t h = std::hash<double>{}(k.bytes) ^ (std::hash<double>{}(k.remote_share) << 1);
    for (int v : {static_cast<int>(k.op), k.size, k.ranks_per_node, k.nodes, k.busy})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Which layers every pipeline rank holds, for one (pp, vpp, uneven) split of the model.
struct StageSplit {
  int pp, vpp;
  int split;  // Plan::split_key
  std::vector<RankLayers> ranks;
};

struct EstimatorCache::Impl {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  // The workload fields layer costs depend on (not the global batch: a search over several
  // global batches keeps its layer costs).
  int64_t seq_len = -1;
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // FP8 GEMM efficiency and quantization ops
  std::unordered_map<LayerKey, LayerCostSet, LayerKeyHash> layers;
  std::unordered_map<CollectiveKey, double, CollectiveKeyHash> collectives;
  ParamCounts counts;
  // The last layer costs used (consecutive plans of a search mostly share them); elements of an
  // unordered_map keep their address when it grows.
  const LayerKey* last_key = nullptr;
  const LayerCostSet* last_costs = nullptr;
  // The last group placement (a search evaluates many plans of one layout in a row).
  bool placed = false;
  int place_tp = 0, place_pp = 0, place_cp = 0, place_dp = 0, place_ep = 0, place_etp = 0;
  RankOrder place_order = RankOrder::kTpCpEpDpPp;
  Placements placements;
  // Stage splits seen so far (a search meets a handful), the last one first.
  std::vector<StageSplit> splits;
  // The last schedule looked up by name.
  // Bumped whenever `placements` changes.
  uint64_t placement_gen = 0;
  // The plan fields the three lookups above depend on, as of the last prepare(): a plan with
  // the same shape (the search's next ZeRO stage, schedule or global batch) skips them.
  struct Shape {
    int tp, pp, cp, dp, ep, etp, vpp, mbs;
    Recompute recompute;
    bool sp, flash, tp_overlap, ep_overlap;
    MoeDispatcher dispatcher;
    int split;  // Plan::split_key
    bool operator==(const Shape&) const = default;
  };
  std::optional<Shape> shape;
  RankOrder shape_order = RankOrder::kTpCpEpDpPp;
  const LayerCostSet* shape_costs = nullptr;
  const RankLayers* shape_layers = nullptr;
  // The last FLOP count (depends on the recomputation, the chunks and the global batch).
  struct FlopsKey {
    Recompute recompute;
    int recompute_layers, pp, vpp;
    int64_t global_batch;
    FlopsConvention convention;
    bool operator==(const FlopsKey&) const = default;
  };
  std::optional<FlopsKey> flops_for;
  StepFlops flops;
  // The last stage loop and the last memory computed, and what they were computed for.
  std::unique_ptr<StageTimes> stages = std::make_unique<StageTimes>();
  std::optional<StageKey> stage_key;
  // With mb = -1: the micro-batch count enters through the activations in flight only; the
  // memo holds the memory of memory_mb micro-batches (and of any count that holds as many).
  std::optional<MemoryKey> memory_for;
  int memory_mb = 0;
  MemoryPeak memory;
  // Parameters of ranks 0, 1 and the last for the last (tp, ep, etp, pp, vpp, uneven): what
  // memory needs, for every ZeRO stage, recomputation, micro-batch and schedule.
  std::optional<std::array<int, 6>> edge_params_for;
  std::array<ParamsOnRank, 3> edge_params;
  // Per-rank data-parallel facts for the last DpKey, per ZeRO stage, filled rank by rank as
  // estimates ask (a search tries the ZeRO stages of a plan one after the other).
  std::optional<DpKey> dp_for;
  std::array<std::vector<DpStage>, 4> dp_stages;
  std::array<std::vector<char>, 4> dp_known;

  // Collective prices: a direct-mapped front (one compare on a hit) before the hash map.
  struct Slot {
    CollectiveKey key;
    double t;
    bool used = false;
  };
  static constexpr size_t kSlots = 512;
  std::array<Slot, kSlots> front{};

  // A heterogeneous cluster's device groups, each as a homogeneous cluster of the job's size
  // with its own cache: a stage's costs come from its group's (estimator.cpp).
  std::vector<std::unique_ptr<Cluster>> group_clusters;
  std::vector<std::unique_ptr<Impl>> group_caches;

  void reset(const ModelSpec& m, const Cluster& c, const Workload& w) {
    group_clusters.clear();
    group_caches.clear();
    if (c.heterogeneous())
      for (int g = 0; g < c.groups_used(); ++g) {
        auto gc = std::make_unique<Cluster>();
        gc->profile = c.groups[static_cast<size_t>(g)].profile;
        gc->num_gpus = c.num_gpus;
        gc->services = c.services;
        group_clusters.push_back(std::move(gc));
        group_caches.push_back(std::make_unique<Impl>());
      }
    layers.clear();
    collectives.clear();
    counts = count_params(m);
    model = &m;
    cluster = &c;
    seq_len = w.seq_len;
    precision = w.precision;
    fp8_recipe = w.fp8_recipe;
    last_key = nullptr;
    last_costs = nullptr;
    placed = false;
    splits.clear();
    ++placement_gen;
    stage_key.reset();
    memory_for.reset();
    shape.reset();
    flops_for.reset();
    dp_for.reset();
    edge_params_for.reset();
    for (Slot& s : front) s.used = false;
  }

  double collective(const HardwareProfile& hw, CollectiveOp op, double bytes,
                    const GroupPlacement& g) {
    const CollectiveKey key{
        op, bytes, g.size, g.ranks_per_node, g.nodes, g.node_gpus_busy, g.remote_share};
    uint64_t bits;
    std::memcpy(&bits, &bytes, sizeof bits);
    uint64_t h = bits + static_cast<uint64_t>(op) + (static_cast<uint64_t>(g.size) << 4) +
                 (static_cast<uint64_t>(g.nodes) << 24) +
                 (static_cast<uint64_t>(g.ranks_per_node) << 44) +
                 (static_cast<uint64_t>(g.node_gpus_busy) << 54) +
                 static_cast<uint64_t>(g.remote_share * 1e6);
    h = (h ^ (h >> 33)) * 0xFF51AFD7ED558CCDull;  // MurmurHash3's finalizer
    h = (h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    Slot& slot = front[h % kSlots];
    if (slot.used && slot.key == key) return slot.t;
    double t;
    auto it = collectives.find(key);
    if (it != collectives.end()) {
      t = it->second;
    } else {
      t = collective_cost(hw, op, bytes, g).time_s;
      if (collectives.size() < 100000) collectives.emplace(key, t);
    }
    slot = {key, t, true};
    return t;
  }

  const LayerCostSet& layer_costs_for(const ModelSpec& m, const Cluster& c, const Workload& w,
                                      const Plan& p) {
    if (last_key && same_layer_key(*last_key, p)) return *last_costs;
    LayerKey key = layer_key(p);
    auto it = layers.find(key);
    if (it == layers.end()) it = layers.emplace(key, layer_costs(m, c, w, p)).first;
    last_key = &it->first;
    last_costs = &it->second;
    return it->second;
  }

  const Placements& groups_for(const Plan& p, const Cluster& c, RankOrder order) {
    if (!placed || place_tp != p.tp || place_pp != p.pp || place_cp != p.cp || place_dp != p.dp ||
        place_ep != p.ep || place_etp != p.etp || place_order != order) {
      placements = place_groups(p, c.profile, c.num_gpus);
      ++placement_gen;
      placed = true;
      place_tp = p.tp;
      place_pp = p.pp;
      place_cp = p.cp;
      place_dp = p.dp;
      place_ep = p.ep;
      place_etp = p.etp;
      place_order = order;
    }
    return placements;
  }

  const RankLayers* split_for(const ModelSpec& m, const Plan& p) {
    for (size_t i = 0; i < splits.size(); ++i) {
      const StageSplit& s = splits[i];
      if (s.pp == p.pp && s.vpp == p.vpp && s.split == layout_key(p)) {
        if (i > 0) std::swap(splits[0], splits[i]);
        return splits[0].ranks.data();
      }
    }
    StageSplit s{p.pp, p.vpp, layout_key(p), {}};
    s.ranks.reserve(static_cast<size_t>(p.pp));
    for (int r = 0; r < p.pp; ++r) s.ranks.push_back(layers_on_rank(m, p, r));
    splits.insert(splits.begin(), std::move(s));
    if (splits.size() > 64) splits.pop_back();
    return splits[0].ranks.data();
  }
};

// Layer costs, placements and the split of the layers over the ranks, from the cache into its
// own StageTimes when there is one (a later call may reuse its stage loop), else computed into
// `local` (raw storage for a StageTimes); `placement`: whether the groups are needed (not for
// memory alone).
StageTimes& prepare(void* local, const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p, EstimatorCache::Impl* ci, bool placement);
// The stage loop (each rank's forward, backward and weight-gradient time for one micro-batch,
// with its pipeline sends, and the busiest rank's breakdown), unless the cache's StageTimes
// already holds it for this plan's inputs. With `detail`, also each rank's exposed TP/CP/EP
// time (for the simulator's trace).
void run_stages(StageTimes& st, const HardwareProfile& hw, const Plan& p, StepCosts* detail);
// The schedule that times the pipeline (1F1B without pipeline parallelism or for an unknown
// name), and the memory it implies.
const IPipelineSchedule* schedule_of(const StageTimes& st, const Plan& p);
// The schedule's pipeline time; with `rank_ends`, also st.rank_end and st.rank_grad_start.
PipelineTime pipeline_time(StageTimes& st, const IPipelineSchedule* sched, const Plan& p,
                           bool rank_ends = false);
// The plan's memory, from the cache when its last memory was for the same inputs (a search
// asks for a plan's memory, then for its estimate).
const MemoryPeak& memory_of(StageTimes& st, void* local, const ModelSpec& m, const Workload& w,
                            const Plan& p, const IPipelineSchedule* sched);
// Rank i's communication per micro-batch (TP/CP/EP from its layers, pipeline sends at `t_p2p`).
CommLedger stage_comm(const StageTimes& st, const Plan& p, int i, double t_p2p);
// A collective's time through the cache when there is one.
double price_collective(const StageTimes& st, const HardwareProfile& hw, CollectiveOp op,
                        double bytes, const GroupPlacement& g);

}  // namespace dtplan
