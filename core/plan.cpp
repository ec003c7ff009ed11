#include "core/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/units.h"

namespace dtplan {

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kTensorwise:
      return "tensorwise";
    case Fp8Recipe::kMxfp8:
      return "mxfp8";
    case Fp8Recipe::kBlockwise:
      return "blockwise";
    case Fp8Recipe::kDelayed:
      break;
  }
  return "delayed";
}

ScheduleName::ScheduleName(std::string_view name) {
  // Interned under a lock: plans are built on the CLI and search threads alike. A name is made
  // once per distinct text; searches copy the ones they made.
  static std::mutex lock;
  static std::deque<std::string> names;  // stable addresses
  std::lock_guard<std::mutex> g(lock);
  for (const std::string& n : names)
    if (n == name) {
      name_ = &n;
      return;
    }
  name_ = &names.emplace_back(name);
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    case Recompute::kNone:
      break;
  }
  return "none";
}

std::string Plan::recompute_cell() const {
  if (offload_layers > 0) return fmt::format("offload({})", offload_layers);
  if (recompute_layers > 0) return fmt::format("{}({})", to_string(recompute), recompute_layers);
  return to_string(recompute);
}

const char* to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kDeepEP:
      return "deepep";
    case MoeDispatcher::kHybridEP:
      return "hybridep";
    case MoeDispatcher::kAllToAll:
      break;
  }
  return "alltoall";
}

std::optional<MoeDispatcher> parse_moe_dispatcher(const std::string& name) {
  for (MoeDispatcher d :
       {MoeDispatcher::kAllToAll, MoeDispatcher::kDeepEP, MoeDispatcher::kHybridEP})
    if (name == to_string(d)) return d;
  return std::nullopt;
}

std::string Plan::describe() const {
  std::string s = fmt::format("TP{} PP{} DP{}", tp, pp, dp);
  if (cp > 1) s += fmt::format(" CP{}", cp);
  if (ep > 1) s += fmt::format(" EP{}", ep);
  if (etp > 1) s += fmt::format(" ETP{}", etp);
  if (vpp > 1) s += fmt::format(" VPP{}", vpp);
  if (sp) s += " SP";
  if (ep > 1 && moe_dispatcher != MoeDispatcher::kAllToAll)
    s += fmt::format(" dispatcher={}", to_string(moe_dispatcher));
  s += fmt::format(" ZeRO-{} recompute={}", zero, to_string(recompute));
  if (recompute_layers > 0) s += fmt::format("({} layers/chunk)", recompute_layers);
  if (offload_layers > 0) s += fmt::format(" offload={}", offload_layers);
  s += fmt::format(" mbs={} gbs={}", mbs, gbs);
  if (uneven_pp) s += " uneven-pp";
  if (account_for_embedding) s += " embedding-in-split";
  if (account_for_loss) s += " loss-in-split";
  if (split_stages > 0) s += fmt::format(" split={}:{}", split_stages, split_layers);
  if (pp > 1) s += fmt::format(" schedule={}", schedule);
  return s;
}

UnevenEnds uneven_ends(int layers, int chunks) {
  UnevenEnds u;
  u.middle = (layers + chunks - 1) / chunks;
  const int rest = layers - (chunks - 2) * u.middle;
  u.last = std::max(0, rest / 2);
  u.first = std::max(0, rest - u.last);
  return u;
}

bool uneven_split_exists(int layers, int pp, int vpp) {
  const int chunks = pp * vpp;
  if (chunks <= 2) return layers >= chunks;
  const int mid = (layers + chunks - 1) / chunks;
  return layers - (chunks - 2) * mid >= (vpp > 1 ? 1 : 2);
}

std::vector<Violation> validate_plan(const ModelSpec& m, int num_gpus, const Workload& w,
                                     const Plan& p) {
  std::vector<Violation> v;
  auto add = [&](std::string flag, std::string reason) {
    v.push_back({std::move(flag), std::move(reason)});
  };
  struct Degree {
    const char* flag;
    int value;
  };
  for (Degree d : {Degree{"--tp", p.tp}, Degree{"--pp", p.pp}, Degree{"--dp", p.dp},
                   Degree{"--cp", p.cp}, Degree{"--ep", p.ep}, Degree{"--etp", p.etp},
                   Degree{"--vpp", p.vpp}, Degree{"--mbs", p.mbs}}) {
    if (d.value < 1) add(d.flag, fmt::format("must be >= 1, got {}", d.value));
  }
  // The flags' own ranges, for plans that did not come through them (launch/report --from,
  // what-if files): one check for every path.
  if (w.seq_len < 1 || w.seq_len > (int64_t{1} << 30))
    add("--seq", fmt::format("must lie in 1..2^30, got {}", w.seq_len));
  const int64_t batch = p.gbs > 0 ? p.gbs : w.global_batch;
  if (batch < 1 || batch > (int64_t{1} << 40))
    add("--gbs", fmt::format("must lie in 1..2^40 sequences, got {}", batch));
  if (!v.empty()) return v;  // the checks below divide by these
  // Micro-batches are counted as int: at most 2^24 per data-parallel replica are modelled.
  if (batch / (int64_t{p.mbs} * p.dp) > (int64_t{1} << 24))
    add("--gbs",
        fmt::format("{} sequences make {} micro-batches per data-parallel replica; at most "
                    "2^24 = 16,777,216 are modelled",
                    batch, batch / (int64_t{p.mbs} * p.dp)));

  if (int64_t{p.tp} * p.pp * p.cp * p.dp != num_gpus)
    add("--dp", fmt::format("world size tp*pp*cp*dp = {}*{}*{}*{} = {} does not equal the {} GPUs",
                            p.tp, p.pp, p.cp, p.dp, int64_t{p.tp} * p.pp * p.cp * p.dp, num_gpus));
  if (m.heads % p.tp != 0)
    add("--tp", fmt::format("attention heads ({}) are not divisible by tp ({})", m.heads, p.tp));
  if (!m.mla && p.tp > m.kv_heads && p.tp % m.kv_heads != 0)
    add("--tp", fmt::format("tp ({}) exceeds kv_heads ({}) and is not a multiple of it, so KV "
                            "heads cannot be replicated evenly",
                            p.tp, m.kv_heads));
  if (!m.mla && p.tp <= m.kv_heads && m.kv_heads % p.tp != 0)
    add("--tp", fmt::format("kv_heads ({}) are not divisible by tp ({})", m.kv_heads, p.tp));
  if (m.ffn_hidden % p.tp != 0)
    add("--tp", fmt::format("ffn_hidden ({}) is not divisible by tp ({})", m.ffn_hidden, p.tp));
  if (p.pp > kMaxPipelineStages)
    add("--pp", fmt::format("at most {} pipeline stages, got {}", kMaxPipelineStages, p.pp));
  if (p.vpp > 1 && p.pp == 1) add("--vpp", "virtual pipeline stages need pp > 1");
  const int64_t chunks = int64_t{p.pp} * p.vpp;
  const int counted_extra = (p.account_for_embedding ? 1 : 0) + (p.account_for_loss ? 1 : 0);
  if (m.layers + counted_extra < chunks)
    add("--pp", fmt::format("{} layers cannot fill pp*vpp = {} pipeline chunks", m.layers, chunks));
  else if (p.account_for_embedding || p.account_for_loss) {
    // Megatron-Core get_num_layers_to_build (transformer_block.py:147-202, NVIDIA/Megatron-LM
    // @d98e8a6): the counted embedding and loss join the layers, which must divide by pp*vpp.
    const int64_t counted =
        m.layers + (p.account_for_embedding ? 1 : 0) + (p.account_for_loss ? 1 : 0);
    if (p.pp == 1)
      add("--account-for-embedding-in-pipeline-split",
          "counting the embedding or loss as a layer needs pp > 1");
    else if (p.uneven_pp)
      add("--uneven-pp",
          "the embedding/loss pipeline split and first/last stage layer counts exclude each other "
          "(TransformerConfig.__post_init__, transformer_config.py:2229-2262)");
    else if (counted % chunks != 0 || (p.vpp == 1 && counted / chunks < 2))
      add("--pp",
          fmt::format("layers + embedding/loss ({}) are not divisible by pp*vpp = {}{}", counted,
                      chunks, p.vpp == 1 ? " into stages of at least one decoder layer" : ""));
  } else if (p.split_stages == 0 && m.layers % chunks != 0 &&
             uneven_split_exists(m.layers, p.pp, p.vpp) && !p.uneven_pp)
    add("--pp", fmt::format("layers ({}) are not divisible by pp*vpp = {}; pass --uneven-pp to "
                            "let the first and last stages take fewer layers",
                            m.layers, chunks));
  else if (p.split_stages == 0 && m.layers % chunks != 0 &&
           !uneven_split_exists(m.layers, p.pp, p.vpp)) {
    const int64_t mid = (m.layers + chunks - 1) / chunks;
    const int64_t left = m.layers - (chunks - 2) * mid;
    add("--pp", fmt::format("layers ({}) are not divisible by pp*vpp = {}, and no split exists "
                            "with fewer layers on the first and last chunks (the {} middle "
                            "chunks would take {} each, {})",
                            m.layers, chunks, chunks - 2, mid,
                            left < 0 ? std::string("more than all the layers")
                                     : fmt::format("leaving {} for the first and last, which "
                                                   "need one each",
                                                   left)));
  }
  if (p.split_stages != 0 || p.split_layers != 0) {
    const int k = p.split_stages, a = p.split_layers;
    const int64_t rest = int64_t{m.layers} - int64_t{k} * a;
    if (p.pp < 2 || k < 1 || k >= p.pp)
      add("--stage-split", fmt::format("K (the stages holding A layers) must lie in 1..pp-1 = "
                                       "1..{}, got {}",
                                       p.pp - 1, k));
    else if (a < 1 || rest < p.pp - k || rest % (p.pp - k) != 0)
      add("--stage-split",
          rest < p.pp - k
              ? fmt::format("{} stages of {} layers take {} of the {} layers, leaving fewer than "
                            "one for each of the other {} stages",
                            k, a, int64_t{k} * a, m.layers, p.pp - k)
              : fmt::format("{} stages of {} layers leave {} of the {} layers for the other {} "
                            "stages: they must divide evenly",
                            k, a, rest, m.layers, p.pp - k));
    else if (p.vpp > 1 || p.uneven_pp || p.account_for_embedding || p.account_for_loss)
      add("--stage-split",
          "a two-part split excludes interleaving, --uneven-pp and the embedding/loss split");
  }
  const int64_t gbs = p.gbs > 0 ? p.gbs : w.global_batch;
  if (gbs % (int64_t{p.mbs} * p.dp) != 0)
    add("--gbs",
        fmt::format("global batch ({}) is not divisible by mbs*dp = {}*{}", gbs, p.mbs, p.dp));
  if (p.sp && p.tp == 1) add("--sp", "sequence parallelism needs tp > 1");
  if (p.cp > 1 && w.seq_len % (int64_t{2} * p.cp) != 0)
    add("--cp", fmt::format("sequence length ({}) is not divisible by 2*cp = {} (load-balanced "
                            "causal context parallelism splits each sequence into 2*cp chunks)",
                            w.seq_len, 2 * p.cp));
  if (w.seq_len > m.max_seq)
    add("--seq",
        fmt::format("sequence length {} exceeds the model's max_seq {}", w.seq_len, m.max_seq));
  if (p.zero < 0 || p.zero > 3) add("--zero", fmt::format("must be 0..3, got {}", p.zero));
  if (p.zero > 0 && p.dp * p.cp == 1)
    add("--zero", "ZeRO shards over data-parallel ranks but dp*cp = 1");
  if (p.vpp > 1 && p.schedule == "1f1b")
    add("--vpp",
        fmt::format("vpp = {} needs an interleaved or V-shaped schedule, not '1f1b'", p.vpp));
  if (p.recompute_layers < 0) add("--recompute-layers", "must be >= 0");
  if (p.recompute_layers > 0 && p.recompute != Recompute::kFull)
    add("--recompute-layers", "a layer count applies to full recompute only");
  // The count is per chunk (Megatron's --recompute-num-layers with the uniform method); the
  // largest chunk holds ceil(layers / (pp x vpp)) layers.
  if (p.recompute_layers > 0 && chunks > 0 && p.recompute_layers > (m.layers + chunks - 1) / chunks)
    add("--recompute-layers",
        fmt::format("{} layers per chunk, but a chunk holds at most {} ({} layers over pp x vpp "
                    "= {} chunks)",
                    p.recompute_layers, (m.layers + chunks - 1) / chunks, m.layers, chunks));
  if (p.offload_layers < 0) add("--cpu-offloading-num-layers", "must be >= 0");
  // Megatron-Core offloads fewer layers than a chunk holds (transformer_config.py:1884-1889
  // @d98e8a6: cpu_offloading_num_layers < num_layers); the smallest chunk holds
  // floor(layers / (pp x vpp)).
  if (p.offload_layers > 0 && chunks > 0 && p.offload_layers >= m.layers / chunks)
    add("--cpu-offloading-num-layers",
        fmt::format("{} layers offloaded per chunk, but a chunk may hold only {} ({} layers over "
                    "pp x vpp = {} chunks); at least one layer stays",
                    p.offload_layers, m.layers / chunks, m.layers, chunks));
  if (w.precision == Precision::kTf32 || w.precision == Precision::kFp32)
    add("--precision", "training precision must be bf16, fp16 or fp8");

  if (m.moe) {
    if (m.moe->experts % p.ep != 0)
      add("--ep", fmt::format("experts ({}) are not divisible by ep ({})", m.moe->experts, p.ep));
    if (m.moe->expert_ffn_hidden % p.etp != 0)
      add("--etp", fmt::format("expert_ffn_hidden ({}) is not divisible by etp ({})",
                               m.moe->expert_ffn_hidden, p.etp));
    const int64_t dense_grid = int64_t{p.tp} * p.cp * p.dp;  // ranks per pipeline stage
    if (dense_grid % (int64_t{p.etp} * p.ep) != 0)
      add("--ep", fmt::format("the expert grid etp*ep = {}*{} does not divide tp*cp*dp = {}, so "
                              "etp*ep*edp*pp cannot equal the world size",
                              p.etp, p.ep, dense_grid));
  } else {
    if (p.ep != 1) add("--ep", fmt::format("ep = {} but the model has no experts", p.ep));
    if (p.etp != 1) add("--etp", fmt::format("etp = {} but the model has no experts", p.etp));
  }
  return v;
}

}  // namespace dtplan

namespace dtplan {

std::vector<Violation> validate_against_hardware(const HardwareProfile& hw, const Workload& w,
                                                 const Plan& p) {
  std::vector<Violation> v;
  if (hw.gpu.peak_flops(w.precision) <= 0)
    v.push_back({"--precision", fmt::format("{} has no {} tensor-core peak in profile {} (its "
                                            "datasheet lists none)",
                                            hw.gpu.name, to_string(w.precision), hw.name)});
  if (p.offload_layers > 0 && hw.host.pcie_gbps_per_gpu <= 0)
    v.push_back({"--cpu-offloading-num-layers",
                 fmt::format("activation offloading needs the host link, and profile {} gives "
                             "none (host.pcie_gbps_per_gpu)",
                             hw.name)});
  return v;
}

int stage_device_group(const Cluster& c, const Plan& p, int stage) {
  if (!c.heterogeneous()) return 0;
  if (pp_inside_dp(p.rank_order) || p.pp < 1 || c.num_gpus % p.pp != 0) return -1;
  // pp outermost: stage s holds ranks [s * n / pp, (s + 1) * n / pp).
  const int64_t per_stage = c.num_gpus / p.pp;
  const int64_t first = stage * per_stage, last = first + per_stage - 1;
  for (int g = 0; g < c.groups_used(); ++g) {
    const int64_t lo = c.group_first_rank(g), hi = c.group_first_rank(g + 1);
    if (first >= lo && first < hi) return last < hi ? g : -1;
  }
  return -1;
}

double stage_memory_capacity_bytes(const Cluster& c, const Plan& p, int stage) {
  const int g = stage_device_group(c, p, stage);
  const HardwareProfile& hw =
      c.heterogeneous() && g >= 0 ? c.groups[static_cast<size_t>(g)].profile : c.profile;
  return hw.gpu.memory_gib * units::kGiB;
}

std::vector<Violation> validate_against_cluster(const Cluster& c, const Workload& w,
                                                const Plan& p) {
  if (!c.heterogeneous()) return validate_against_hardware(c.profile, w, p);
  std::vector<Violation> v;
  for (int g = 0; g < c.groups_used(); ++g)
    for (Violation& x : validate_against_hardware(c.groups[static_cast<size_t>(g)].profile, w, p))
      v.push_back(std::move(x));
  if (c.groups_used() < 2) return v;
  if (pp_inside_dp(p.rank_order)) {
    v.push_back({"--rank-order",
                 fmt::format("{} numbers pipeline stages inside data-parallel replicas, so every "
                             "stage spans all device groups; a heterogeneous cluster needs "
                             "tp-cp-ep-dp-pp (pp outermost)",
                             to_string(p.rank_order))});
    return v;
  }
  if (p.pp < 1 || c.num_gpus % p.pp != 0) return v;  // validate_plan says why
  const int per_stage = c.num_gpus / p.pp;
  for (int s = 0; s < p.pp; ++s)
    if (stage_device_group(c, p, s) < 0) {
      std::string bounds;
      for (int g = 1; g < c.groups_used(); ++g)
        bounds += fmt::format("{}{}", g > 1 ? ", " : "", c.group_first_rank(g));
      v.push_back(
          {"--pp", fmt::format("pipeline stage {} (ranks {}-{}) spans two device groups; "
                               "every stage must lie inside one group: choose pp so that "
                               "the groups' first ranks ({}) are multiples of {} / pp",
                               s, s * per_stage, (s + 1) * per_stage - 1, bounds, c.num_gpus)});
      break;
    }
  return v;
}

const std::vector<std::string>& rank_order_names() {
  static const std::vector<std::string> names = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-dp"};
  return names;
}

const char* to_string(RankOrder o) { return rank_order_names()[static_cast<size_t>(o)].c_str(); }

std::optional<RankOrder> parse_rank_order(const std::string& name) {
  const auto& names = rank_order_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<RankOrder>(i);
  return std::nullopt;
}

}  // namespace dtplan
