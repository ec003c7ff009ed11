#include "simulator/analytic/estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "core/error.h"
#include "core/registry.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

std::vector<std::string> schedule_names() { return Registry<IPipelineSchedule>::global().names(); }

std::vector<Violation> validate_schedule(const Plan& p) {
  std::vector<Violation> v;
  const IPipelineSchedule* s = find_schedule(p.schedule);
  if (!s) {
    auto names = schedule_names();
    v.push_back(
        {"--schedule",
         fmt::format("unknown schedule '{}'{}; `dtplan list schedules` shows "
                     "the registered ones",
                     p.schedule, did_you_mean(p.schedule, std::span<const std::string>(names)))});
    return v;
  }
  if (p.pp > 1 && !s->accepts_chunks(p.vpp))
    v.push_back({"--vpp", fmt::format("schedule '{}' cannot run vpp = {}: {}", p.schedule, p.vpp,
                                      s->chunks_rule())});
  if (p.pp > 1 && p.gbs > 0 && !s->accepts_microbatches(p.pp, p.vpp, p.num_microbatches()))
    v.push_back(
        {"--mbs", fmt::format("schedule '{}' with pp = {} cannot run {} micro-batches: {}",
                              p.schedule, p.pp, p.num_microbatches(), s->microbatches_rule())});
  if (p.pp > 1024) v.push_back({"--pp", "at most 1024 pipeline stages are modelled"});
  return v;
}

// Megatron-LM's schedules.py batches each send with the next receive: without interleaving an
// interior rank exchanges once after its forward (activations out, gradients in) and once
// after its backward, one transfer per pass; the first and last ranks exchange once per
// micro-batch (nothing arrives before the first forward or leaves after the last backward),
// half a transfer per pass. Interleaved, the steady state runs a forward and a backward, then
// one batched exchange for both: v transfers per micro-batch, v/2 per pass.
double pipeline_exchanges_per_pass(int stage, int pp, int vpp) {
  if (vpp > 1) return 0.5 * vpp;
  return stage == 0 || stage == pp - 1 ? 0.5 : 1.0;
}

namespace {

constexpr int kMaxStages = 1024;

// Parameter tensors of one layer as frameworks hold them (Megatron module layout): fused QKV
// and output projections (MLA: four), two MLP matrices (the SwiGLU gate and up are fused), their
// biases, and the two norms (weight, plus bias for LayerNorm).
int param_tensors_per_layer(const ModelSpec& m) {
  const int linears = (m.mla ? 4 : 2) + 2;
  const int norms = 2 * (m.norm == NormKind::kLayerNorm ? 2 : 1);
  return linears * (m.linear_bias ? 2 : 1) + norms;
}

// Costs of one layer kind for one micro-batch, split by pass.
struct LayerCost {
  double f = 0, b = 0, w = 0;  // compute + exposed communication
  double r = 0;                // recomputation (forward ops re-run before the backward)
  double compute_f = 0, compute_b = 0, compute_w = 0, compute_r = 0;
  double overhead = 0;                        // host-dispatch time the GPU waits for (all passes)
  std::array<double, kCommDims> exposed{};    // per micro-batch, forward + backward (no recompute)
  std::array<double, kCommDims> exposed_r{};  // communication re-run by recomputation
  std::array<double, kCommDims> volume{};     // bytes sent per rank per micro-batch
  std::array<double, kCommDims> comm_time{};
  // Forward-only parts, which full recomputation sends again.
  std::array<double, kCommDims> volume_fwd{}, comm_time_fwd{};
};

double sent_bytes(const Op& o) {
  const int n = o.group.size;
  switch (o.collective) {
    case CollectiveOp::kAllReduce:
      return o.bytes * 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return o.bytes * (n - 1.0) / n;
    case CollectiveOp::kSendRecv:
      return o.bytes;
  }
  return o.bytes;
}

template <typename List>
LayerCost cost_ops(const List& ops, const HardwareProfile& hw, const ComputeCostModel& cm,
                   const Plan& p) {
  LayerCost lc;
  const double slowdown = hw.efficiency.comm_compute_slowdown;
  // Pass 1: GPU compute and host dispatch time per pass; each collective's time, once.
  std::array<double, kMaxLayerOps> comm_t;  // written before read, for collectives only
  double hidden_f = 0, hidden_b = 0, exposed_f = 0, exposed_b = 0;
  double host_f = 0, host_b = 0, host_w = 0, host_r = 0, exposed_rr = 0;
  int idx = 0;
  for (const Op& o : ops) {
    const int i = idx++;
    const bool fwd = o.pass == Pass::kForward;
    const bool recomputed = fwd && (p.recompute == Recompute::kFull ||
                                    (p.recompute == Recompute::kSelective && o.selective));
    const double host = cm.host_s(o);
    if (fwd)
      host_f += host;
    else if (o.pass == Pass::kBackwardInput)
      host_b += host;
    else
      host_w += host;
    if (recomputed) host_r += host;
    if (o.kind != OpKind::kCollective) {
      const double t = cm.op_s(o);
      if (fwd)
        lc.compute_f += t;
      else if (o.pass == Pass::kBackwardInput)
        lc.compute_b += t;
      else
        lc.compute_w += t;
      if (recomputed) lc.compute_r += t;
      continue;
    }
    const int d = static_cast<int>(o.dim);
    // A layer repeats the same collective (TP all-reduces forward and backward): price each
    // distinct one once.
    double t = -1;
    for (int k = 0; k < i && t < 0; ++k) {
      const Op& q = ops[k];
      if (q.kind == OpKind::kCollective && q.collective == o.collective && q.bytes == o.bytes &&
          q.group.size == o.group.size && q.group.nodes == o.group.nodes &&
          q.group.ranks_per_node == o.group.ranks_per_node)
        t = comm_t[static_cast<size_t>(k)];
    }
    if (t < 0) t = collective_cost(hw, o.collective, o.bytes, o.group).time_s;
    comm_t[static_cast<size_t>(i)] = t;
    lc.volume[d] += sent_bytes(o);
    lc.comm_time[d] += t;
    if (fwd) {
      lc.volume_fwd[d] += sent_bytes(o);
      lc.comm_time_fwd[d] += t;
    }
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (overlapped) {
      (fwd ? hidden_f : hidden_b) += t;
    } else {
      lc.exposed[d] += t;
      (fwd ? exposed_f : exposed_b) += t;
      if (recomputed) {  // full recomputation re-runs the forward, collectives included
        lc.exposed_r[d] += t;
        exposed_rr += t;
      }
    }
  }
  // Overlapped communication hides behind the same pass's compute, slowing it by the SM
  // contention factor; what does not fit is exposed, attributed to the dims that carried it.
  const double bwd_compute = lc.compute_b + lc.compute_w;
  const double extra_f = std::max(0.0, hidden_f - lc.compute_f);
  const double extra_b = std::max(0.0, hidden_b - bwd_compute);
  idx = 0;
  for (const Op& o : ops) {
    const int i = idx++;
    if (o.kind != OpKind::kCollective) continue;
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (!overlapped) continue;
    const bool fwd = o.pass == Pass::kForward;
    const double total = fwd ? hidden_f : hidden_b;
    const double extra = fwd ? extra_f : extra_b;
    if (total > 0)
      lc.exposed[static_cast<int>(o.dim)] += extra * comm_t[static_cast<size_t>(i)] / total;
  }
  const double slow_f = slowdown * std::min(hidden_f, lc.compute_f);
  const double slow_b = slowdown * std::min(hidden_b, bwd_compute);
  // GPU time per pass, then the host floor: a pass cannot finish before the host has launched
  // all of its kernels. The excess is framework overhead.
  const double gpu_f = lc.compute_f + slow_f + extra_f + exposed_f;
  const double gpu_b = lc.compute_b + slow_b + extra_b + exposed_b;
  const double gpu_w = lc.compute_w;
  const double gpu_r = p.recompute == Recompute::kFull ? gpu_f : lc.compute_r + exposed_rr;
  lc.f = std::max(gpu_f, host_f);
  lc.b = std::max(gpu_b, host_b);
  lc.w = std::max(gpu_w, host_w);
  lc.r = p.recompute == Recompute::kNone ? 0.0 : std::max(gpu_r, host_r);
  lc.overhead = (lc.f - gpu_f) + (lc.b - gpu_b) + (lc.w - gpu_w) +
                (p.recompute == Recompute::kNone ? 0.0 : lc.r - gpu_r);
  return lc;
}

// Everything about one layer's ops that does not depend on pp, dp, vpp, zero or the schedule.
struct LayerCostSet {
  LayerCost dense, moe, emb, head;
  double pp_message_bytes = 0;
  ActivationInputs activations;
};

LayerCostSet layer_costs(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p) {
  const HardwareProfile& hw = c.profile;
  OpProgram prog;
  build_op_program(m, w, p, c, prog);
  ComputeCostModel cm{&hw, w.precision};
  LayerCostSet s;
  s.dense = cost_ops(prog.dense_layer, hw, cm, p);
  if (m.moe) s.moe = cost_ops(prog.moe_layer, hw, cm, p);
  s.emb = cost_ops(prog.embedding, hw, cm, p);
  s.head = cost_ops(prog.head, hw, cm, p);
  s.pp_message_bytes = prog.pp_message_bytes;
  s.activations = activation_inputs(m, w, p);
  return s;
}

// The plan fields the per-layer op costs depend on (with the model, cluster and workload fixed).
struct LayerKey {
  int tp, cp, mbs, ep, etp;
  bool sp, flash, tp_overlap, ep_overlap;
  Recompute recompute;
  std::string rank_order;
  bool operator==(const LayerKey&) const = default;
};

// Hashes the integers only: the rank order is nearly always the default, and hashing its
// characters for every plan of a search costs more than comparing them on a hit.
struct LayerKeyHash {
  size_t operator()(const LayerKey& k) const {
    size_t h = k.rank_order.size();
    for (int v : {k.tp, k.cp, k.mbs, k.ep, k.etp, static_cast<int>(k.recompute),
                  k.sp * 1 + k.flash * 2 + k.tp_overlap * 4 + k.ep_overlap * 8})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Equal short strings (rank orders, schedule names: a dozen characters), compared in place;
// std::string's == calls memcmp, which shows in a search's profile.
bool same_text(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t u, v;
    std::memcpy(&u, x + i, 8);
    std::memcpy(&v, y + i, 8);
    if (u != v) return false;
  }
  for (; i < n; ++i)
    if (x[i] != y[i]) return false;
  return true;
}

// Whether the plan's layer key is `k`, without building a key (no string copy).
bool same_layer_key(const LayerKey& k, const Plan& p) {
  return k.tp == p.tp && k.cp == p.cp && k.mbs == p.mbs && k.ep == p.ep && k.etp == p.etp &&
         k.sp == p.sp && k.flash == p.flash_attention && k.tp_overlap == p.tp_comm_overlap &&
         k.ep_overlap == p.ep_comm_overlap && k.recompute == p.recompute &&
         same_text(k.rank_order, p.rank_order);
}

LayerKey layer_key(const Plan& p) {
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
          p.rank_order};
}

}  // namespace

namespace {

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
  std::array<double, kCommDims> busiest_exposed;
  double busiest_compute, busiest_recompute, busiest_overhead;
  std::array<double, kMaxStages> f, b, wg;
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
  bool uneven;
  Recompute recompute;
  int recompute_layers;
  bool operator==(const StageKey&) const = default;
};

// One pipeline rank's parameters and data-parallel collectives, which do not depend on the
// recomputation, micro-batch, schedule or global batch: the reduction (time and bytes sent) for
// ZeRO 0-2, the per-layer gather and reduce-scatter for ZeRO-3.
struct DpStage {
  ParamsOnRank prm;
  double t_dp, vol;   // ZeRO 0-2 gradient reduction (and parameter gather); 0 with ZeRO-3
  double t_ag, t_rs;  // ZeRO-3, per layer (when the data-parallel group has more than one rank)
};

// What DpStage depends on besides the ZeRO stage (with the model, cluster and workload of the
// cache).
struct DpKey {
  uint64_t placement;  // EstimatorCache::Impl::placement_gen (the layout)
  int pp, vpp;
  bool uneven;
  double grad_bytes;
  bool operator==(const DpKey&) const = default;
};

// What the memory of a plan depends on, besides the layer costs (activations) and the schedule.
struct MemoryKey {
  const LayerCostSet* costs;
  const IPipelineSchedule* schedule;
  int tp, pp, cp, dp, ep, etp, vpp, zero, recompute_layers, mbs, mb;
  Recompute recompute;
  bool sp, uneven, main_grads_fp32;
  bool operator==(const MemoryKey&) const = default;
};

MemoryKey memory_key(const LayerCostSet* costs, const IPipelineSchedule* s, const Plan& p, int mb) {
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
          p.mbs,
          mb,
          p.recompute,
          p.sp,
          p.uneven_pp,
          p.main_grads_fp32};
}

}  // namespace

// A collective priced for one group shape; plans of one search repeat them constantly.
struct CollectiveKey {
  CollectiveOp op;
  double bytes;
  int size, ranks_per_node, nodes, busy;
  bool operator==(const CollectiveKey&) const = default;
};

struct CollectiveKeyHash {
  size_t operator()(const CollectiveKey& k) const {
    size_t h = std::hash<double>{}(k.bytes);
    for (int v : {static_cast<int>(k.op), k.size, k.ranks_per_node, k.nodes, k.busy})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Which layers every pipeline rank holds, for one (pp, vpp, uneven) split of the model.
struct StageSplit {
  int pp, vpp;
  bool uneven;
  std::vector<RankLayers> ranks;
};

struct EstimatorCache::Impl {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  // The workload fields layer costs depend on (not the global batch: a search over several
  // global batches keeps its layer costs).
  int64_t seq_len = -1;
  Precision precision = Precision::kBf16;
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
  int place_order = -1;  // index in `orders`
  Placements placements;
  // Stage splits seen so far (a search meets a handful), the last one first.
  std::vector<StageSplit> splits;
  // The last schedule looked up by name.
  std::string schedule_name;
  const IPipelineSchedule* schedule = nullptr;
  // Bumped whenever `placements` changes.
  uint64_t placement_gen = 0;
  // The plan fields the three lookups above depend on, as of the last prepare(): a plan with
  // the same shape (the search's next ZeRO stage, schedule or global batch) skips them.
  struct Shape {
    int tp, pp, cp, dp, ep, etp, vpp, mbs;
    Recompute recompute;
    bool sp, flash, tp_overlap, ep_overlap, uneven;
    bool operator==(const Shape&) const = default;
  };
  std::optional<Shape> shape;
  std::string shape_order;
  int shape_order_id = -1;
  // The rank orders seen (plans of a search share one): groups_for() compares indices.
  std::vector<std::string> orders;
  int order_id(const std::string& order) {
    for (size_t i = 0; i < orders.size(); ++i)
      if (same_text(orders[i], order)) return static_cast<int>(i);
    orders.push_back(order);
    return static_cast<int>(orders.size() - 1);
  }
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
  std::optional<MemoryKey> memory_for;
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

  void reset(const ModelSpec& m, const Cluster& c, const Workload& w) {
    layers.clear();
    collectives.clear();
    counts = count_params(m);
    model = &m;
    cluster = &c;
    seq_len = w.seq_len;
    precision = w.precision;
    last_key = nullptr;
    last_costs = nullptr;
    placed = false;
    splits.clear();
    schedule_name.clear();
    schedule = nullptr;
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
    const CollectiveKey key{op, bytes, g.size, g.ranks_per_node, g.nodes, g.node_gpus_busy};
    uint64_t bits;
    std::memcpy(&bits, &bytes, sizeof bits);
    uint64_t h = bits + static_cast<uint64_t>(op) + (static_cast<uint64_t>(g.size) << 4) +
                 (static_cast<uint64_t>(g.nodes) << 24) +
                 (static_cast<uint64_t>(g.ranks_per_node) << 44) +
                 (static_cast<uint64_t>(g.node_gpus_busy) << 54);
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
    if (it == layers.end()) it = layers.emplace(std::move(key), layer_costs(m, c, w, p)).first;
    last_key = &it->first;
    last_costs = &it->second;
    return it->second;
  }

  // `order`: order_id(p.rank_order).
  const Placements& groups_for(const Plan& p, const Cluster& c, int order) {
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
      if (s.pp == p.pp && s.vpp == p.vpp && s.uneven == p.uneven_pp) {
        if (i > 0) std::swap(splits[0], splits[i]);
        return splits[0].ranks.data();
      }
    }
    StageSplit s{p.pp, p.vpp, p.uneven_pp, {}};
    s.ranks.reserve(static_cast<size_t>(p.pp));
    for (int r = 0; r < p.pp; ++r) s.ranks.push_back(layers_on_rank(m, p, r));
    splits.insert(splits.begin(), std::move(s));
    if (splits.size() > 64) splits.pop_back();
    return splits[0].ranks.data();
  }

  const IPipelineSchedule* schedule_for(const std::string& name) {
    if (schedule && same_text(name, schedule_name)) return schedule;
    const IPipelineSchedule* s = find_schedule(name);
    if (s) {
      schedule_name = name;
      schedule = s;
    }
    return s;
  }
};

EstimatorCache::EstimatorCache() : impl_(std::make_unique<Impl>()) {}
EstimatorCache::~EstimatorCache() = default;
size_t EstimatorCache::size() const { return impl_->layers.size(); }

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt) {
  return estimate(m, c, w, p, opt, nullptr);
}

namespace {

static_assert(std::is_trivially_destructible_v<LayerCostSet>);

double price_collective(const StageTimes& st, const HardwareProfile& hw, CollectiveOp op,
                        double bytes, const GroupPlacement& g) {
  return st.memo ? st.memo->collective(hw, op, bytes, g) : collective_cost(hw, op, bytes, g).time_s;
}

// Layer costs, placements and the split of the layers over the ranks, from the cache into its
// own StageTimes when there is one (a later call may reuse its stage loop), else computed into
// `local` (raw storage for a StageTimes); `placement`: whether the groups are needed (not for
// memory alone).
StageTimes& prepare(void* local, const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p, EstimatorCache::Impl* ci, bool placement) {
  if (ci) {
    if (ci->model != &m || ci->cluster != &c || ci->seq_len != w.seq_len ||
        ci->precision != w.precision)
      ci->reset(m, c, w);
    StageTimes& st = *ci->stages;
    st.memo = ci;
    const EstimatorCache::Impl::Shape shape{p.tp,
                                            p.pp,
                                            p.cp,
                                            p.dp,
                                            p.ep,
                                            p.etp,
                                            p.vpp,
                                            p.mbs,
                                            p.recompute,
                                            p.sp,
                                            p.flash_attention,
                                            p.tp_comm_overlap,
                                            p.ep_comm_overlap,
                                            p.uneven_pp};
    if (!(ci->shape == shape && same_text(ci->shape_order, p.rank_order))) {
      ci->shape.reset();  // until the lookups below are done
      ci->shape_costs = &ci->layer_costs_for(m, c, w, p);
      ci->shape_layers = ci->split_for(m, p);
      ci->shape = shape;
      ci->shape_order = p.rank_order;
      ci->shape_order_id = ci->order_id(p.rank_order);
    }
    st.costs = ci->shape_costs;
    st.layers = ci->shape_layers;
    // groups_for() compares the layout itself: cheap when it is the last one.
    st.groups = placement ? &ci->groups_for(p, c, ci->shape_order_id) : nullptr;
    st.counts = &ci->counts;
    st.pp = std::min(p.pp, kMaxStages);
    st.mb = std::max(1, p.num_microbatches());
    return st;
  }
  StageTimes& st = *new (local) StageTimes;
  st.memo = nullptr;
  st.costs = new (st.costs_storage) LayerCostSet(layer_costs(m, c, w, p));
  if (placement) {
    st.placed = place_groups(p, c.profile, c.num_gpus);
    st.groups = &st.placed;
  } else {
    st.groups = nullptr;
  }
  RankLayers* fresh = reinterpret_cast<RankLayers*>(st.layers_storage);
  for (int i = 0; i < std::min(p.pp, kMaxStages); ++i)
    new (&fresh[i]) RankLayers(layers_on_rank(m, p, i));
  st.layers = fresh;
  st.own_counts = count_params(m);
  st.counts = &st.own_counts;
  st.pp = std::min(p.pp, kMaxStages);
  st.mb = std::max(1, p.num_microbatches());
  return st;
}

// Each rank's forward, backward and weight-gradient time for one micro-batch (all its chunks,
// with its pipeline sends), and the busiest rank's breakdown.
// With `detail`, also each rank's exposed TP/CP/EP time (for the simulator's trace).
void stage_loop(StageTimes& st, const HardwareProfile& hw, const Plan& p,
                PipelineDetail* detail = nullptr) {
  const LayerCost& dense = st.costs->dense;
  const LayerCost& moe = st.costs->moe;
  const LayerCost& emb = st.costs->emb;
  const LayerCost& head = st.costs->head;
  const int pp = st.pp;
  // Pipeline point-to-point: one activation (forward) and one gradient (backward) per
  // micro-batch per chunk boundary; blocking in Megatron's schedules, so exposed.
  const double t_p2p = pp > 1 ? price_collective(st, hw, CollectiveOp::kSendRecv,
                                                 st.costs->pp_message_bytes, st.groups->pp)
                              : 0;
  st.t_p2p = t_p2p;
  const RankLayers* stage_layers = st.layers;
  std::array<double, kMaxStages>& f = st.f;
  std::array<double, kMaxStages>& b = st.b;
  std::array<double, kMaxStages>& wg = st.wg;
  int busiest = 0;
  double busiest_t = -1;
  std::array<double, kCommDims> busiest_exposed{};
  double busiest_compute = 0, busiest_recompute = 0, busiest_overhead = 0;
  st.n_distinct = 0;
  if (detail) detail->exposed_tp_cp_ep.assign(static_cast<size_t>(pp), {});
  for (int i = 0; i < pp; ++i) {
    const RankLayers l = stage_layers[i];
    // Middle stages with the same layers as the previous middle stage take the same time.
    if (i >= 2 && i < pp - 1 && l == stage_layers[static_cast<size_t>(i - 1)]) {
      if (detail)
        detail->exposed_tp_cp_ep[static_cast<size_t>(i)] =
            detail->exposed_tp_cp_ep[static_cast<size_t>(i - 1)];
      f[static_cast<size_t>(i)] = f[static_cast<size_t>(i - 1)];
      b[static_cast<size_t>(i)] = b[static_cast<size_t>(i - 1)];
      wg[static_cast<size_t>(i)] = wg[static_cast<size_t>(i - 1)];
      continue;
    }
    st.distinct[static_cast<size_t>(st.n_distinct++)] = i;
    f[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] = wg[static_cast<size_t>(i)] = 0;
    // n layers of a kind, nr of them recomputed.
    auto add = [&](const LayerCost& lc, double n, double nr, std::array<double, kCommDims>& exp,
                   double& comp, double& rec, double& ovh) {
      f[i] += n * lc.f;
      b[i] += n * lc.b + nr * lc.r;
      wg[i] += n * lc.w;
      ovh += n * lc.overhead;
      comp += n * (lc.compute_f + lc.compute_b + lc.compute_w);
      rec += nr * (p.recompute == Recompute::kFull ? lc.compute_f : lc.compute_r);
      for (int d = 0; d < kCommDims; ++d) exp[d] += n * lc.exposed[d] + nr * lc.exposed_r[d];
    };
    const RankLayers rl = recomputed_layers(p, l);  // --recompute-layers: some layers only
    std::array<double, kCommDims> exp{};
    double comp = 0, rec = 0, ovh = 0;
    add(dense, l.dense, rl.dense, exp, comp, rec, ovh);
    add(moe, l.moe, rl.moe, exp, comp, rec, ovh);
    if (i == 0) add(emb, 1, 1, exp, comp, rec, ovh);
    if (i == pp - 1) add(head, 1, 1, exp, comp, rec, ovh);
    if (pp > 1) {
      const double hops = pipeline_exchanges_per_pass(i, pp, p.vpp);
      f[i] += hops * t_p2p;
      b[i] += hops * t_p2p;
      exp[static_cast<int>(CommDim::kPP)] += 2 * hops * t_p2p;
    }
    if (detail) detail->exposed_tp_cp_ep[static_cast<size_t>(i)] = {exp[0], exp[1], exp[2]};
    const double t = f[i] + b[i] + wg[i];
    if (t > busiest_t) {
      busiest_t = t;
      busiest = i;
      busiest_exposed = exp;
      busiest_compute = comp;
      busiest_recompute = rec;
      busiest_overhead = ovh;
    }
  }
  st.busiest = busiest;
  st.busiest_t = busiest_t;
  st.busiest_exposed = busiest_exposed;
  st.busiest_compute = busiest_compute;
  st.busiest_recompute = busiest_recompute;
  st.busiest_overhead = busiest_overhead;
}

// The stage loop, unless the cache's StageTimes already holds it for this plan's inputs.
void run_stages(StageTimes& st, const HardwareProfile& hw, const Plan& p, PipelineDetail* detail) {
  if (!st.memo) {
    stage_loop(st, hw, p, detail);
    return;
  }
  // With `detail` the loop runs anyway (the cached times do not include it); its times are
  // the same, so the key stays valid.
  const StageKey key{st.costs,    st.memo->placement_gen, st.pp, p.vpp, p.uneven_pp,
                     p.recompute, p.recompute_layers};
  if (st.memo->stage_key == key && !detail) return;
  stage_loop(st, hw, p, detail);
  st.memo->stage_key = key;
}

// The schedule that times the pipeline (1F1B without pipeline parallelism or for an unknown
// name), and the memory it implies.
const IPipelineSchedule* schedule_of(const StageTimes& st, const Plan& p) {
  const IPipelineSchedule* sched =
      st.memo ? st.memo->schedule_for(p.schedule) : find_schedule(p.schedule);
  if (!sched || st.pp == 1) {
    static const IPipelineSchedule* const one_f_one_b = find_schedule("1f1b");
    sched = one_f_one_b;
  }
  return sched;
}

PipelineTime pipeline_time(const StageTimes& st, const IPipelineSchedule* sched, const Plan& p) {
  PipelineInput in{st.pp, p.vpp, st.mb, st.f.data(), st.b.data(), st.wg.data()};
  return sched ? sched->time(in) : PipelineTime{st.mb * st.busiest_t, 0};
}

// Memory: first, last and the most loaded stage.
void memory_peak(MemoryPeak& out, const StageTimes& st, const ModelSpec& m, const Workload& w,
                 const Plan& p, const IPipelineSchedule* msched) {
  const int pp = st.pp;
  // Middle stages are alike; evaluate the first, stage 1 (most in flight after 0), the last.
  const int ranks[3] = {0, 1, pp - 1};
  const int visited = std::min(pp, 3);  // pp 1: rank 0; pp 2: ranks 0 and 1
  // Their parameters do not depend on ZeRO, recomputation, micro-batch or schedule: kept.
  const ParamsOnRank* params = nullptr;
  if (EstimatorCache::Impl* ci = st.memo) {
    const std::array<int, 6> key{p.tp, p.ep, p.etp, p.pp, p.vpp, p.uneven_pp ? 1 : 0};
    if (ci->edge_params_for != key) {
      for (int k = 0; k < visited; ++k)
        ci->edge_params[static_cast<size_t>(k)] =
            params_on_rank(m, *st.counts, p, ranks[k], st.layers[static_cast<size_t>(ranks[k])]);
      ci->edge_params_for = key;
    }
    params = ci->edge_params.data();
  }
  for (int k = 0; k < visited; ++k) {
    const int i = ranks[k];
    StageMemory s = stage_memory(m, w, p, *msched, i, *st.counts, st.costs->activations,
                                 st.layers[static_cast<size_t>(i)], params ? &params[k] : nullptr);
    if (i == 0) out.first = s;
    if (i == pp - 1) out.last = s;
    if (s.total_bytes() > out.peak_bytes) {
      out.peak_bytes = s.total_bytes();
      out.peak = s;
      out.peak_stage = i;
    }
  }
}

// The plan's memory, from the cache when its last memory was for the same inputs (a search
// asks for a plan's memory, then for its estimate).
const MemoryPeak& memory_of(StageTimes& st, void* local, const ModelSpec& m, const Workload& w,
                            const Plan& p, const IPipelineSchedule* sched) {
  if (!st.memo) {
    MemoryPeak& out = *new (local) MemoryPeak;
    memory_peak(out, st, m, w, p, sched);
    return out;
  }
  const MemoryKey key = memory_key(st.costs, sched, p, st.mb);
  if (st.memo->memory_for != key) {
    st.memo->memory = MemoryPeak{};
    memory_peak(st.memo->memory, st, m, w, p, sched);
    st.memo->memory_for = key;
  }
  return st.memo->memory;
}

static_assert(std::is_trivially_destructible_v<StageTimes>);
static_assert(std::is_trivially_destructible_v<MemoryPeak>);

}  // namespace

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt, EstimatorCache* cache, PipelineDetail* detail) {
  const HardwareProfile& hw = c.profile;
  Estimate e;
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  run_stages(st, hw, p, detail);
  const LayerCost& dense = st.costs->dense;
  const LayerCost& moe = st.costs->moe;
  struct {
    const Placements& groups;
    double pp_message_bytes;
  } prog{*st.groups, st.costs->pp_message_bytes};
  const int pp = st.pp;
  const int mb = st.mb;
  e.microbatches = mb;
  const double t_p2p = st.t_p2p;
  const std::array<double, kMaxStages>& f = st.f;
  const std::array<double, kMaxStages>& b = st.b;
  const std::array<double, kMaxStages>& wg = st.wg;
  const RankLayers* stage_layers = st.layers;
  const ParamCounts& counts = *st.counts;
  const int busiest = st.busiest;
  const double busiest_t = st.busiest_t;
  const std::array<double, kCommDims>& busiest_exposed = st.busiest_exposed;
  const double busiest_compute = st.busiest_compute, busiest_recompute = st.busiest_recompute,
               busiest_overhead = st.busiest_overhead;
  struct Priced {
    double time_s;
  };
  auto price = [&](CollectiveOp op, double bytes, const GroupPlacement& g) {
    return Priced{price_collective(st, hw, op, bytes, g)};
  };

  if (detail) {
    detail->f.assign(f.begin(), f.begin() + pp);
    detail->b.assign(b.begin(), b.begin() + pp);
    detail->w.assign(wg.begin(), wg.begin() + pp);
    for (int i = 0; i < pp; ++i) {
      const double hops = pp > 1 ? pipeline_exchanges_per_pass(i, pp, p.vpp) : 0;
      detail->f[static_cast<size_t>(i)] -= hops * t_p2p;
      detail->b[static_cast<size_t>(i)] -= hops * t_p2p;
    }
    detail->p2p_s = t_p2p;
    detail->p2p_bytes = prog.pp_message_bytes;
  }
  const IPipelineSchedule* sched = schedule_of(st, p);
  const PipelineTime pipe = pipeline_time(st, sched, p);
  if (detail) detail->pipeline_s = pipe.total_s;

  // Data-parallel gradient reduction and parameter gather, per rank, after the last backward.
  // Gradients are reduced in fp32 when kept in fp32 with bf16 (Megatron forces
  // accumulate_allreduce_grads_in_fp32 for bf16); fp16 runs reduce 16-bit gradients.
  const double grad_bytes = p.main_grads_fp32 && w.precision != Precision::kFp16 ? 4.0 : 2.0;
  double exposed_dp = 0, dp_time_total = 0, dp_volume = 0;
  if (detail) detail->dp_s.assign(p.zero == 3 ? 0 : static_cast<size_t>(pp), -1.0);
  // Middle pipeline stages hold the same parameters: remember recent collective costs.
  struct CostMemo {
    CollectiveOp op;
    double bytes;
    const GroupPlacement* group;
    double t;
  };
  std::array<CostMemo, 8> memo;  // only [0, memo_size) is read
  int memo_next = 0, memo_size = 0;
  auto cached_cost = [&](CollectiveOp op, double bytes, const GroupPlacement& g) {
    for (int k = 0; k < memo_size; ++k)
      if (memo[k].op == op && memo[k].bytes == bytes && memo[k].group == &g) return memo[k].t;
    const double t = price(op, bytes, g).time_s;
    memo[static_cast<size_t>(memo_next)] = {op, bytes, &g, t};
    memo_next = (memo_next + 1) % 8;
    memo_size = std::min(memo_size + 1, 8);
    return t;
  };
  // One rank's DpStage: from the cache when it holds the layout's, else computed (and kept).
  auto compute_dp_stage = [&](int i) {
    DpStage ds;
    ds.prm = params_on_rank(m, counts, p, i, stage_layers[static_cast<size_t>(i)]);
    double t_dp = 0, vol = 0;
    auto reduce = [&](double params, const GroupPlacement& g) {
      if (g.size <= 1 || params <= 0 || p.zero == 3) return;
      const double n = g.size;
      if (p.zero == 0) {
        t_dp += cached_cost(CollectiveOp::kAllReduce, params * grad_bytes, g);
        vol += params * grad_bytes * 2 * (n - 1) / n;
      } else {
        t_dp += cached_cost(CollectiveOp::kReduceScatter, params * grad_bytes, g);
        vol += params * grad_bytes * (n - 1) / n;
        if (p.zero <= 2) {
          t_dp += cached_cost(CollectiveOp::kAllGather, params * 2.0, g);
          vol += params * 2.0 * (n - 1) / n;
        }
      }
    };
    reduce(ds.prm.dense, prog.groups.dp);
    reduce(ds.prm.expert, prog.groups.edp);
    ds.t_dp = t_dp;
    ds.vol = vol;
    ds.t_ag = ds.t_rs = 0;
    if (p.zero == 3 && prog.groups.dp.size > 1) {
      const GroupPlacement& g = prog.groups.dp;
      const RankLayers& l = stage_layers[static_cast<size_t>(i)];
      const double layers = std::max(1, l.total());
      const double layer_params = ds.prm.total() / layers;
      const int tensors = param_tensors_per_layer(m);
      auto per_layer = [&](CollectiveOp op, double bytes_per_param) {
        return tensors * cached_cost(op, layer_params / tensors * bytes_per_param, g);
      };
      ds.t_ag = per_layer(CollectiveOp::kAllGather, 2.0);
      ds.t_rs = per_layer(CollectiveOp::kReduceScatter, grad_bytes);
    }
    return ds;
  };
  DpStage own_dp;  // without a cache
  auto dp_stage = [&](int i) -> const DpStage& {
    EstimatorCache::Impl* ci = st.memo;
    if (!ci || p.zero < 0 || p.zero > 3) return own_dp = compute_dp_stage(i);
    const DpKey key{ci->placement_gen, pp, p.vpp, p.uneven_pp, grad_bytes};
    if (ci->dp_for != key) {
      ci->dp_for = key;
      for (int z = 0; z < 4; ++z) {
        ci->dp_stages[static_cast<size_t>(z)].resize(static_cast<size_t>(pp));
        ci->dp_known[static_cast<size_t>(z)].assign(static_cast<size_t>(pp), 0);
      }
    }
    std::vector<DpStage>& stages = ci->dp_stages[static_cast<size_t>(p.zero)];
    std::vector<char>& known = ci->dp_known[static_cast<size_t>(p.zero)];
    if (!known[static_cast<size_t>(i)]) {
      stages[static_cast<size_t>(i)] = compute_dp_stage(i);
      known[static_cast<size_t>(i)] = 1;
    }
    return stages[static_cast<size_t>(i)];
  };
  // A middle stage like the previous one has the same reduction, started later (more slack):
  // it cannot expose more than the previous one. Those are the ranks the stage loop copied
  // (never the busiest: it is the first rank with the longest time), so only the distinct ranks
  // are visited, in the same order.
  for (int k = 0; k < st.n_distinct; ++k) {
    const int i = st.distinct[static_cast<size_t>(k)];
    if (i >= 2 && i < pp - 1 &&
        stage_layers[static_cast<size_t>(i)] == stage_layers[static_cast<size_t>(i - 1)] &&
        b[static_cast<size_t>(i)] + wg[static_cast<size_t>(i)] ==
            b[static_cast<size_t>(i - 1)] + wg[static_cast<size_t>(i - 1)] &&
        i != busiest)
      continue;
    const DpStage& ds = dp_stage(i);
    const ParamsOnRank& prm = ds.prm;
    double t_dp = ds.t_dp, vol = ds.vol;
    // ZeRO-3 / FSDP: every parameter tensor of a layer is all-gathered before its forward, again
    // before a recomputed forward and before its backward, and its gradient reduce-scattered
    // after the backward, for every micro-batch (DeepSpeed stage 3 reduces each micro-step).
    // Gathers prefetch behind the previous layer's compute; what does not fit is exposed.
    double z3_exposed = 0;
    if (p.zero == 3 && prog.groups.dp.size > 1) {
      const GroupPlacement& g = prog.groups.dp;
      const double n = g.size;
      const RankLayers& l = stage_layers[static_cast<size_t>(i)];
      const double layers = std::max(1, l.total());
      const double layer_params = prm.total() / layers;
      const double t_ag = ds.t_ag;
      const double t_rs = ds.t_rs;
      const double gathers_f = p.recompute == Recompute::kFull ? 2.0 : 1.0;
      const double per_layer_f = f[i] / layers;
      const double per_layer_b = (b[i] + wg[i]) / layers;
      z3_exposed = mb * (layers * (gathers_f * std::max(0.0, t_ag - per_layer_f / gathers_f) +
                                   std::max(0.0, t_ag + t_rs - per_layer_b)) +
                         t_ag);
      vol += mb * layers * layer_params * ((gathers_f + 1) * 2.0 + grad_bytes) * (n - 1) / n;
      t_dp += mb * layers * ((gathers_f + 1) * t_ag + t_rs);
    }
    // Overlap with the backward: the reduction of a stage starts as its last backward
    // produces gradients (bucketed); stage i finishes i backward slots before stage 0.
    const double slack = i * (b[i] + wg[i]);
    double exposed_i;
    if (p.zero == 3) {
      exposed_i = z3_exposed;
    } else if (p.overlap_grad_reduce) {
      // Bucketed: the last bucket (about a tenth of the traffic) always trails the backward.
      exposed_i = std::max(0.1 * t_dp, t_dp - (b[i] + wg[i]));
    } else {
      exposed_i = t_dp;
    }
    exposed_i = std::max(0.0, exposed_i - slack);
    if (detail && p.zero != 3) detail->dp_s[static_cast<size_t>(i)] = t_dp;
    exposed_dp = std::max(exposed_dp, exposed_i);
    dp_time_total = std::max(dp_time_total, t_dp);
    if (i == busiest) dp_volume = vol;
  }
  if (detail) {
    // Ranks the loop skipped hold the same parameters as the rank before them.
    for (size_t i = 1; i < detail->dp_s.size(); ++i)
      if (detail->dp_s[i] < 0) detail->dp_s[i] = detail->dp_s[i - 1];
    detail->dp_exposed_s = exposed_dp;
  }
  // Tied embeddings across pipeline stages: the first and last stage all-reduce the
  // embedding gradient every step (Megatron _allreduce_embedding_grads).
  if (pp > 1 && m.tied_embeddings) {
    GroupPlacement g;
    g.size = 2;
    g.ranks_per_node = 1;
    g.nodes = 2;
    g.node_gpus_busy = 1;
    const double bytes = static_cast<double>(m.vocab) * m.hidden / p.tp * grad_bytes;
    const double t = price(CollectiveOp::kAllReduce, bytes, g).time_s;
    exposed_dp += t;
    dp_volume += bytes;
  }

  // Optimizer: Adam is memory-bound: read fp32 grad (4), read+write master, m, v (24), write
  // 16-bit weights (2), plus the gradient-norm pass (4) = 34 bytes per local parameter.
  const ParamsOnRank prm0 = dp_stage(busiest).prm;
  const double opt_params =
      p.zero >= 1 ? prm0.dense / std::max(1, p.dp * p.cp) + prm0.expert / std::max(1, p.edp())
                  : prm0.total();
  e.optimizer_s = ComputeCostModel{&hw, w.precision}.memory_s(opt_params * 34.0) +
                  20 * hw.efficiency.host_dispatch_us * 1e-6;

  // Breakdown of the busiest rank's time.
  e.busiest_stage = busiest;
  const double busy = mb * busiest_t;
  e.bubble_s = std::max(0.0, pipe.total_s - busy);
  for (int d = 0; d < kCommDims; ++d) e.exposed_comm_s[d] = mb * busiest_exposed[d];
  e.exposed_comm_s[static_cast<int>(CommDim::kDP)] += exposed_dp;
  e.recompute_s = mb * busiest_recompute;
  e.compute_s = mb * busiest_compute;
  e.overhead_s = mb * busiest_overhead;
  // Whatever of the busiest rank's time is neither compute nor exposed comm is the SM-contention
  // slowdown of overlapped communication; count it as compute.
  double accounted = e.compute_s + e.recompute_s + e.overhead_s;
  for (int d = 0; d < kCommDims; ++d)
    if (d != static_cast<int>(CommDim::kDP)) accounted += e.exposed_comm_s[d];
  e.compute_s += std::max(0.0, busy - accounted);
  e.step_time_s = pipe.total_s + exposed_dp + e.optimizer_s;

  // Volumes and total communication time per GPU per step (busiest rank).
  {
    const RankLayers& l = stage_layers[static_cast<size_t>(busiest)];
    for (int d = 0; d < kCommDims; ++d) {
      e.comm_volume_bytes[d] = mb * (l.dense * dense.volume[d] + l.moe * moe.volume[d]);
      e.comm_time_s[d] = mb * (l.dense * dense.comm_time[d] + l.moe * moe.comm_time[d]);
      if (p.recompute == Recompute::kFull) {  // the recomputed forward sends again
        e.comm_volume_bytes[d] += mb * (l.dense * dense.volume_fwd[d] + l.moe * moe.volume_fwd[d]);
        e.comm_time_s[d] += mb * (l.dense * dense.comm_time_fwd[d] + l.moe * moe.comm_time_fwd[d]);
      }
    }
    if (pp > 1) {
      e.comm_volume_bytes[static_cast<int>(CommDim::kPP)] =
          mb * 2.0 * p.vpp * prog.pp_message_bytes;
      e.comm_time_s[static_cast<int>(CommDim::kPP)] = mb * 2.0 * p.vpp * t_p2p;
    }
    e.comm_volume_bytes[static_cast<int>(CommDim::kDP)] = dp_volume;
    e.comm_time_s[static_cast<int>(CommDim::kDP)] = dp_time_total;
  }

  // Throughput and FLOP utilization.
  StepFlops fl;
  if (EstimatorCache::Impl* ci = st.memo) {
    const EstimatorCache::Impl::FlopsKey key{p.recompute, p.recompute_layers, p.pp,
                                             p.vpp,       w.global_batch,     opt.flops};
    if (ci->flops_for != key) {
      ci->flops = step_flops(m, counts, w, p, opt.flops);
      ci->flops_for = key;
    }
    fl = ci->flops;
  } else {
    fl = step_flops(m, counts, w, p, opt.flops);
  }
  const double n = c.num_gpus;
  const double peak = hw.gpu.peak_flops(w.precision);
  const double tokens = static_cast<double>(w.global_batch) * w.seq_len;
  e.model_flops = fl.model;
  e.hardware_flops = fl.model + fl.recompute;
  e.mfu = fl.model / (e.step_time_s * n * peak);
  e.hfu = e.hardware_flops / (e.step_time_s * n * peak);
  e.model_tflops_per_gpu = fl.model / (e.step_time_s * n) / 1e12;
  e.tokens_per_s = tokens / e.step_time_s;
  e.tokens_per_s_per_gpu = e.tokens_per_s / n;
  if (w.train_tokens > 0)
    e.time_to_train_days = w.train_tokens / e.tokens_per_s / units::kSecondsPerDay;
  e.bubble_fraction = e.bubble_s / e.step_time_s;
  e.comm_share = e.exposed_comm_total_s() / e.step_time_s;

  e.memory_capacity_bytes = hw.gpu.memory_gib * units::kGiB;
  alignas(MemoryPeak) unsigned char mem_local[sizeof(MemoryPeak)];
  const MemoryPeak& mem = memory_of(st, mem_local, m, w, p, sched);
  e.memory_first = mem.first;
  e.memory_last = mem.last;
  e.memory_peak = mem.peak;
  e.peak_stage = mem.peak_stage;
  e.fits = mem.peak_bytes <= e.memory_capacity_bytes;
  return e;
}

double peak_memory_bytes(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                         EstimatorCache* cache) {
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, false);
  alignas(MemoryPeak) unsigned char mem_local[sizeof(MemoryPeak)];
  return memory_of(st, mem_local, m, w, p, schedule_of(st, p)).peak.total_bytes();
}

double step_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                       EstimatorCache* cache) {
  // step = pipeline + exposed DP communication (>= 0) + optimizer (memory time >= 0 plus the
  // fixed host floor below); the pipeline time does not depend on the ZeRO stage. The sums are
  // the estimate's own, in its order, and rounding is monotone, so the floor never exceeds it.
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  run_stages(st, c.profile, p, nullptr);
  const PipelineTime pipe = pipeline_time(st, schedule_of(st, p), p);
  return pipe.total_s + 20 * c.profile.efficiency.host_dispatch_us * 1e-6;
}

std::vector<StageMemory> all_stage_memory(const ModelSpec& m, const Workload& w, const Plan& p) {
  const IPipelineSchedule* s = find_schedule(p.pp > 1 ? p.schedule : "1f1b");
  if (!s) s = find_schedule("1f1b");
  std::vector<StageMemory> out;
  for (int i = 0; i < p.pp; ++i) out.push_back(stage_memory(m, w, p, *s, i));
  return out;
}

}  // namespace dtplan
