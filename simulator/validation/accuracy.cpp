#include "simulator/validation/accuracy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/yaml_reader.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/des/step_sim.h"
#include "simulator/workload/op_program.h"

namespace dtplan {

namespace {

std::optional<int> opt_int(YamlMap& y, const char* key, int64_t min_value = 0) {
  auto v = y.opt_int(key, min_value);
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

ModelSpec case_model(YamlMap& y, int64_t seq_len) {
  ModelSpec m;
  m.name = y.opt_string("name").value_or("case");
  m.display_name = m.name;
  m.source = "accuracy case";
  m.layers = static_cast<int>(y.get_int("layers"));
  m.hidden = y.get_int("hidden");
  m.heads = static_cast<int>(y.get_int("heads"));
  m.kv_heads = static_cast<int>(y.opt_int("kv_heads").value_or(m.heads));
  m.head_dim = static_cast<int>(y.opt_int("head_dim").value_or(m.hidden / m.heads));
  m.ffn_hidden = y.get_int("ffn_hidden");
  m.ffn_act = y.get_enum("ffn_act", {"gelu", "swiglu"}) == "gelu" ? FfnAct::kGelu : FfnAct::kSwiglu;
  m.vocab = y.get_int("vocab");
  m.tied_embeddings = y.get_bool("tied_embeddings");
  m.max_seq = seq_len;
  // The case format has no norm/bias/position/dropout fields: GELU models are GPT-style
  // (LayerNorm, biases, learned positions, Megatron's default dropout 0.1: transformer_config.py
  // hidden_dropout / attention_dropout @d98e8a6), gated ones Llama-style (RMSNorm, no biases,
  // RoPE, no dropout: the Llama, Qwen and DeepSeek config.json files set attention_dropout 0).
  // Norm, bias and positions change parameter counts by <0.1%; dropout decides whether masks
  // are kept (memory) and written.
  const bool gpt = m.ffn_act == FfnAct::kGelu;
  m.norm = gpt ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.linear_bias = gpt;
  m.position_embedding = gpt ? PositionEmbedding::kLearned : PositionEmbedding::kRope;
  m.attention_dropout = m.hidden_dropout = gpt ? 0.1 : 0.0;
  if (auto mo = y.opt_map("moe")) {
    MoeSpec e;
    e.experts = static_cast<int>(mo->get_int("experts"));
    e.topk = static_cast<int>(mo->get_int("topk"));
    e.expert_ffn_hidden = mo->opt_int("expert_ffn_hidden").value_or(m.ffn_hidden);
    e.shared_experts = static_cast<int>(mo->opt_int("shared_experts", 0).value_or(0));
    e.shared_ffn_hidden = mo->opt_int("shared_ffn_hidden", 0).value_or(e.expert_ffn_hidden);
    e.dense_layers = static_cast<int>(mo->opt_int("dense_layers", 0).value_or(0));
    mo->allow("layer_freq");
    mo->finish();
    m.moe = e;
  }
  if (auto ml = y.opt_map("mla")) {
    MlaSpec a;
    a.q_lora_rank = static_cast<int>(ml->opt_int("q_lora_rank", 0).value_or(0));
    a.kv_lora_rank = static_cast<int>(ml->get_int("kv_lora_rank"));
    a.qk_nope_head_dim = static_cast<int>(ml->get_int("qk_nope_head_dim"));
    a.qk_rope_head_dim = static_cast<int>(ml->get_int("qk_rope_head_dim"));
    a.v_head_dim = static_cast<int>(ml->get_int("v_head_dim"));
    // v2: multi-token-prediction modules; null (the run does not say) is taken as none.
    m.mtp_layers = static_cast<int>(ml->opt_int("mtp_layers", 0).value_or(0));
    ml->finish();
    m.mla = a;
  }
  y.finish();
  if (const auto v = model_bounds_violation(m))
    y.fail_here(v->field.empty() ? v->reason : v->field + " " + v->reason);
  return m;
}

// The schema's fp8_recipe names (delayed, current, mxfp8, blockwise) as dtplan's recipes.
Fp8Recipe case_fp8_recipe(const std::string& r) {
  if (r == "current") return Fp8Recipe::kTensorwise;
  if (r == "mxfp8") return Fp8Recipe::kMxfp8;
  if (r == "blockwise") return Fp8Recipe::kBlockwise;
  return Fp8Recipe::kDelayed;
}

Precision case_precision(YamlMap& y) {
  auto s = y.get_enum("precision", {"bf16", "fp16", "fp8"});
  return *parse_precision(s);
}

// The v2 `framework` block (absent in v1: all null). Unknown keys are refused.
FrameworkFacts case_framework(YamlMap& y) {
  FrameworkFacts f;
  auto fw = y.opt_map("framework");
  if (!fw) return f;
  f.name = fw->opt_string("name");
  f.version = fw->opt_string("version");
  f.attention = fw->opt_enum("attention", {"flash", "unfused"});
  f.tp_comm_overlap = fw->opt_bool("tp_comm_overlap");
  f.grad_reduce_overlap = fw->opt_bool("grad_reduce_overlap");
  f.param_gather_overlap = fw->opt_bool("param_gather_overlap");
  f.fp8_recipe = fw->opt_enum("fp8_recipe", {"delayed", "current", "mxfp8", "blockwise"});
  fw->allow("notes");
  fw->finish();
  return f;
}

Recompute parse_recompute(const std::string& s) {
  return s == "full"        ? Recompute::kFull
         : s == "selective" ? Recompute::kSelective
                            : Recompute::kNone;
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// 1, 2, 4, ... up to n, each dividing n (just {1} when n < 1).
std::vector<int> powers_of_two_dividing(int64_t n) {
  std::vector<int> d{1};
  for (int64_t x = 2; n > 0 && x <= n && n % x == 0; x *= 2) d.push_back(static_cast<int>(x));
  return d;
}

// Why the candidates of a case failed, gathered over all of them (CaseResult::skipped).
class SkipReasons {
 public:
  // A candidate the published fields, the model or the hardware rule out.
  void refused(const std::vector<Violation>& v) {
    std::vector<std::string> texts;
    texts.reserve(v.size());
    for (const Violation& x : v) texts.push_back(fmt::format("{}: {}", x.flag, x.reason));
    for (const std::string& t : texts)
      if (std::find(order_.begin(), order_.end(), t) == order_.end()) order_.push_back(t);
    for (const std::string& t : texts) ++counts_[t];
    if (refused_++ == 0) {
      common_ = texts;
    } else {
      std::erase_if(common_, [&](const std::string& t) {
        return std::find(texts.begin(), texts.end(), t) == texts.end();
      });
    }
  }
  // A valid candidate that needs more memory than a GPU has.
  void too_big(const Plan& p, double need_bytes, double capacity_bytes) {
    if (too_big_++ == 0 || need_bytes < least_need_bytes_) {
      least_need_bytes_ = need_bytes;
      least_plan_ = p.describe();
    }
    capacity_bytes_ = capacity_bytes;
  }
  std::string explain() const {
    if (too_big_ > 0)
      return fmt::format(
          "no candidate fits in memory: the smallest of the {} that satisfy the published fields "
          "needs {:.1f} GiB of {:.1f} GiB ({})",
          too_big_, least_need_bytes_ / units::kGiB, capacity_bytes_ / units::kGiB, least_plan_);
    if (refused_ == 0) return "no layout satisfies the published fields";
    if (!common_.empty())
      return refused_ == 1 ? common_.front()
                           : fmt::format("{} (all {} candidates)", common_.front(), refused_);
    // No reason is shared by all: the most frequent one, first seen on ties.
    const std::string* best = &order_.front();
    for (const std::string& t : order_)
      if (counts_.at(t) > counts_.at(*best)) best = &t;
    return fmt::format(
        "no candidate satisfies the published fields; the most frequent reason "
        "({} of {} candidates): {}",
        counts_.at(*best), refused_, *best);
  }

 private:
  int refused_ = 0, too_big_ = 0;
  std::vector<std::string> common_;  // violations every refused candidate had
  std::vector<std::string> order_;   // every violation, in the order first seen
  std::map<std::string, int> counts_;
  double least_need_bytes_ = 0, capacity_bytes_ = 0;
  std::string least_plan_;
};

}  // namespace

CaseFile load_case_file(const std::string& path) {
  YAML::Node root = load_yaml_file(path);
  YamlMap top(root, path, "");
  CaseFile out;
  const int64_t version = top.get_int("version");
  if (version > 2)
    top.fail("version", fmt::format("schema {} is not known (1 and 2 are)", version));
  YAML::Node cases = top.child("cases");
  if (!cases.IsDefined() || !cases.IsSequence()) top.fail("cases", "expected a list of cases");
  size_t i = 0;
  std::map<std::string, int> ids;  // id -> its line: one case per id (results are keyed by it)
  for (const auto& node : cases) {
    YamlMap y(node, path, fmt::format("cases[{}]", i++));
    AccuracyCase c;
    c.line = location_of(node, path).line;
    c.id = y.get_string("id");
    if (c.id.empty()) y.fail("id", "must not be empty");
    if (const auto [it, fresh] = ids.emplace(c.id, c.line); !fresh)
      y.fail("id", fmt::format("'{}' is also the id of the case at line {}", c.id, it->second));
    c.group = y.get_string("group");
    c.source = y.opt_string("source").value_or("");
    y.allow("notes");
    YamlMap hw = y.get_map("hardware");
    c.profile = hw.get_string("profile");
    c.num_gpus = static_cast<int>(hw.get_int("num_gpus"));
    hw.finish();
    YamlMap tr = y.get_map("training");
    c.workload.seq_len = tr.get_int("seq_len");
    c.workload.global_batch = tr.get_int("global_batch");
    c.mbs = opt_int(tr, "micro_batch", 1);
    c.workload.precision = case_precision(tr);
    tr.finish();
    YamlMap mo = y.get_map("model");
    c.model = case_model(mo, c.workload.seq_len);
    YamlMap pl = y.get_map("plan");
    c.tp = opt_int(pl, "tp", 1);
    c.pp = opt_int(pl, "pp", 1);
    c.dp = opt_int(pl, "dp", 1);
    c.cp = opt_int(pl, "cp", 1);
    c.ep = opt_int(pl, "ep", 1);
    c.etp = opt_int(pl, "etp", 1);
    c.vpp = opt_int(pl, "vpp", 1);
    c.sp = pl.opt_bool("sp");
    c.zero = opt_int(pl, "zero", 0);
    c.recompute = pl.opt_enum("recompute", {"none", "selective", "full"});
    c.schedule = pl.opt_enum("schedule", {"gpipe", "1f1b", "interleaved", "dualpipe"});
    if (c.zero && *c.zero == 3 && c.dp && *c.dp * c.cp.value_or(1) == 1)
      pl.fail("zero", "ZeRO-3 shards over the data-parallel group, and dp x cp is 1");
    pl.finish();
    c.framework = case_framework(y);
    if (c.framework.fp8_recipe) {
      if (c.workload.precision != Precision::kFp8)
        y.get_map("framework")
            .fail("fp8_recipe", fmt::format("is set for a {} run (training.precision)",
                                            to_string(c.workload.precision)));
      c.workload.fp8_recipe = case_fp8_recipe(*c.framework.fp8_recipe);
    }
    YamlMap me = y.get_map("measured");
    c.measured_step_time_s = me.get_double("step_time_s", 0);
    c.measured_peak_memory_gib = me.opt_double("peak_memory_gib", 0);
    me.allow("derivation");
    me.allow("printed");
    me.finish();
    y.finish();
    out.cases.push_back(std::move(c));
  }
  YAML::Node layers = top.child("layer_cases");
  if (layers.IsDefined() && layers.IsSequence()) {
    i = 0;
    for (const auto& node : layers) {
      YamlMap y(node, path, fmt::format("layer_cases[{}]", i++));
      LayerCase c;
      c.id = y.get_string("id");
      c.source = y.opt_string("source").value_or("");
      y.allow("notes");
      YamlMap hw = y.get_map("hardware");
      c.profile = hw.get_string("profile");
      c.num_gpus = static_cast<int>(hw.get_int("num_gpus"));
      hw.finish();
      YamlMap tr = y.get_map("training");
      c.mbs = static_cast<int>(tr.get_int("micro_batch"));
      c.workload.seq_len = tr.get_int("seq_len");
      c.workload.precision = case_precision(tr);
      c.workload.global_batch = c.mbs;
      tr.finish();
      YamlMap mo = y.get_map("model");
      c.model = case_model(mo, c.workload.seq_len);
      YamlMap pl = y.get_map("plan");
      c.tp = static_cast<int>(pl.get_int("tp"));
      c.sp = pl.opt_bool("sp").value_or(false);
      c.recompute = pl.opt_enum("recompute", {"none", "selective", "full"}).value_or("none");
      pl.finish();
      c.framework = case_framework(y);
      YamlMap me = y.get_map("measured");
      c.measured_layer_ms = me.get_double("layer_fwd_bwd_ms", 0);
      me.finish();
      y.finish();
      out.layer_cases.push_back(std::move(c));
    }
  }
  top.finish();
  return out;
}

FrameworkSettings framework_settings(const FrameworkFacts& f, const AccuracyOptions& opt,
                                     const FrameworkProfile* fp) {
  // The override, else the case's fact, else its framework profile's default, else off.
  auto pick = [](const std::optional<bool>& over, const std::optional<bool>& fact,
                 const std::optional<bool>& dflt) {
    return over.value_or(fact.value_or(dflt.value_or(false)));
  };
  const std::optional<bool> none;
  FrameworkSettings s;
  s.flash_attention = opt.flash_attention.value_or(f.attention.value_or("unfused") == "flash");
  s.overlap_grad_reduce =
      pick(opt.overlap_grad_reduce, f.grad_reduce_overlap, fp ? fp->grad_reduce_overlap : none);
  s.overlap_param_gather = pick(none, f.param_gather_overlap, fp ? fp->param_gather_overlap : none);
  s.tp_comm_overlap = pick(opt.tp_comm_overlap, f.tp_comm_overlap, fp ? fp->tp_comm_overlap : none);
  return s;
}

namespace {

// What the case format leaves out and the zoo states.
bool same_unstated(const ModelSpec& a, const ModelSpec& b) {
  return a.norm == b.norm && a.linear_bias == b.linear_bias &&
         a.position_embedding == b.position_embedding &&
         a.attention_dropout == b.attention_dropout && a.hidden_dropout == b.hidden_dropout;
}

bool same_dimensions(const ModelSpec& a, const ModelSpec& b) {
  if (a.layers != b.layers || a.hidden != b.hidden || a.heads != b.heads ||
      a.kv_heads != b.kv_heads || a.head_dim != b.head_dim || a.ffn_hidden != b.ffn_hidden ||
      a.ffn_act != b.ffn_act || a.vocab != b.vocab || a.tied_embeddings != b.tied_embeddings ||
      a.moe.has_value() != b.moe.has_value() || a.mla.has_value() != b.mla.has_value())
    return false;
  if (a.moe && (a.moe->experts != b.moe->experts || a.moe->topk != b.moe->topk ||
                a.moe->expert_ffn_hidden != b.moe->expert_ffn_hidden))
    return false;
  return !a.mla || a.mla->kv_lora_rank == b.mla->kv_lora_rank;
}

}  // namespace

const ModelSpec* zoo_match(const ModelSpec& m, const std::vector<ModelSpec>& zoo) {
  const ModelSpec* found = nullptr;
  for (const ModelSpec& z : zoo) {
    if (!same_dimensions(m, z)) continue;
    if (found && !same_unstated(*found, z)) return nullptr;
    if (!found) found = &z;
  }
  return found;
}

CaseResult predict_case(const AccuracyCase& case_in, const AccuracyOptions& opt) {
  // The case model, with what its format leaves out taken from the zoo model it is.
  AccuracyCase c = case_in;
  if (opt.zoo)
    if (const ModelSpec* z = zoo_match(c.model, *opt.zoo)) {
      c.model.norm = z->norm;
      c.model.linear_bias = z->linear_bias;
      c.model.position_embedding = z->position_embedding;
      c.model.attention_dropout = z->attention_dropout;
      c.model.hidden_dropout = z->hidden_dropout;
    }
  CaseResult r;
  r.id = c.id;
  r.group = c.group;
  r.measured_s = c.measured_step_time_s;
  r.measured_peak_memory_gib = c.measured_peak_memory_gib;
  r.num_gpus = c.num_gpus;
  r.global_batch = c.workload.global_batch;
  r.seq_len = c.workload.seq_len;
  const FrameworkProfile* fprof =
      opt.framework && c.framework.name
          ? opt.framework(*c.framework.name, c.framework.version.value_or(""))
          : nullptr;
  const FrameworkSettings fw = framework_settings(c.framework, opt, fprof);
  r.flash_attention = fw.flash_attention;
  r.overlap_grad_reduce = fw.overlap_grad_reduce;
  r.tp_comm_overlap = fw.tp_comm_overlap;
  const HardwareProfile* hw = opt.profile ? opt.profile(c.profile) : nullptr;
  if (!hw) {
    r.skipped = fmt::format("unknown hardware profile '{}'", c.profile);
    return r;
  }
  Cluster cluster;
  cluster.profile = *hw;
  cluster.num_gpus = c.num_gpus;
  if (fprof) r.attention_kernel = apply_framework_profile(*fprof, cluster.profile);
  // The framework's defaults for what the case does not say: its FP8 recipe where the case
  // names none, its ZeRO-3 gather granularity (the overlaps are settled above, per fact).
  Workload work = c.workload;
  Plan fw_defaults;
  if (fprof) {
    FrameworkPlanGiven given;
    given.tp_comm_overlap = given.grad_reduce_overlap = given.param_gather_overlap = true;
    given.fp8_recipe = c.framework.fp8_recipe.has_value();
    apply_framework_defaults(*fprof, given, fw_defaults, work);
  }

  // Candidate values for every field (accuracy.h); a published field has exactly one.
  const int n = c.num_gpus;
  auto cands = [](const auto& v, auto all) { return v ? decltype(all){*v} : all; };
  const std::vector<int> all_div = divisors(n);
  std::vector<int> node_div;  // the sizes that tile a node
  for (int x : divisors(hw->node.gpus_per_node))
    if (n % x == 0) node_div.push_back(x);
  const std::vector<int> tps = cands(c.tp, node_div);
  const std::vector<int> pps = cands(c.pp, all_div);
  const std::vector<int> cps = cands(c.cp, std::vector<int>{1});
  const bool moe = c.model.moe.has_value();
  const std::vector<int> eps =
      moe ? cands(c.ep, divisors(c.model.moe->experts)) : std::vector<int>{c.ep.value_or(1)};
  const std::vector<int> etps =
      moe ? cands(c.etp, divisors(hw->node.gpus_per_node)) : std::vector<int>{c.etp.value_or(1)};
  const std::vector<int> vpps = cands(c.vpp, std::vector<int>{1, 2, 3, 4, 6, 8});
  const std::vector<int> zeros = cands(c.zero, std::vector<int>{0, 1});
  const std::vector<bool> sps = cands(c.sp, std::vector<bool>{false, true});
  const std::vector<Recompute> recs =
      c.recompute
          ? std::vector<Recompute>{parse_recompute(*c.recompute)}
          : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull};

  // Every candidate that satisfies the published fields, the model and the hardware.
  SkipReasons reasons;
  std::vector<Plan> valid;
  int tried = 0;
  for (int tp : tps)
    for (int pp : pps)
      for (int cp : cps) {
        const int64_t mp = int64_t{tp} * pp * cp;
        if (!c.dp && n % mp != 0) {
          ++tried;
          reasons.refused({{"--dp", fmt::format("tp*pp*cp = {}*{}*{} = {} does not divide the {} "
                                                "GPUs",
                                                tp, pp, cp, mp, n)}});
          continue;
        }
        const int dp = c.dp ? *c.dp : static_cast<int>(n / mp);
        const std::vector<int> mbss =
            cands(c.mbs,
                  powers_of_two_dividing(work.global_batch % dp == 0 ? work.global_batch / dp : 1));
        for (int ep : eps)
          for (int etp : etps)
            for (int mbs : mbss)
              for (int vpp : vpps)
                for (int zero : zeros)
                  for (bool sp : sps)
                    for (Recompute rec : recs) {
                      // Fields that do not apply take one value (README: vpp 1 without a
                      // pipeline, zero 0 without data parallelism, sp off without TP).
                      if (pp == 1 && vpp != vpps.front()) continue;
                      if (dp * cp == 1 && zero != zeros.front()) continue;
                      if (tp == 1 && sp != sps.front()) continue;
                      Plan p;
                      p.tp = tp;
                      p.pp = pp;
                      p.cp = cp;
                      p.dp = dp;
                      p.ep = ep;
                      p.etp = etp;
                      p.vpp = pp == 1 ? 1 : vpp;
                      p.sp = sp && tp > 1;
                      p.zero = dp * cp == 1 ? 0 : zero;
                      p.mbs = mbs;
                      p.gbs = work.global_batch;
                      p.recompute = rec;
                      if (c.schedule)
                        p.schedule = *c.schedule == "dualpipe" ? "dualpipe-v" : *c.schedule;
                      else
                        p.schedule = p.vpp > 1 ? "interleaved" : "1f1b";
                      if (p.pp == 1) p.schedule = "1f1b";
                      p.uneven_pp = c.model.layers % (p.pp * p.vpp) != 0;
                      // Where no first/last-fewer split exists, Megatron recipes count the
                      // embedding and the loss as pipeline layers (Llama 3.1 405B: 126 + 2 on
                      // 16 x 8 chunks): the split that divides, both counted first.
                      if (p.uneven_pp && p.pp > 1 &&
                          !uneven_split_exists(c.model.layers, p.pp, p.vpp)) {
                        const int chunks = p.pp * p.vpp;
                        for (int e : {1, 0})
                          for (int l : {1, 0})
                            if (e + l > 0 && (c.model.layers + e + l) % chunks == 0 &&
                                !p.account_for_embedding && !p.account_for_loss) {
                              p.account_for_embedding = e == 1;
                              p.account_for_loss = l == 1;
                            }
                        if (p.account_for_embedding || p.account_for_loss) p.uneven_pp = false;
                      }
                      p.flash_attention = fw.flash_attention;
                      p.overlap_grad_reduce = fw.overlap_grad_reduce;
                      p.overlap_param_gather = fw.overlap_param_gather;
                      p.tp_comm_overlap = fw.tp_comm_overlap;
                      if (moe) p.moe_dispatcher = opt.moe_dispatcher;
                      p.zero3_gather_per_tensor = fw_defaults.zero3_gather_per_tensor;
                      p.zero3_prefetch = fw_defaults.zero3_prefetch;
                      p.main_grads_fp32 = fw_defaults.main_grads_fp32;
                      p.optimizer_state_bytes_per_param =
                          fw_defaults.optimizer_state_bytes_per_param;
                      p.cuda_context_bytes = fw_defaults.cuda_context_bytes;
                      // An unpublished recomputation may as well have been activation
                      // offloading, where the framework runs Megatron-Core (which offloads
                      // without pipeline parallelism or recomputation only): a quarter, half or
                      // three quarters of the layers.
                      std::vector<int> offloads{0};
                      const int layers = c.model.layers;
                      if (!c.recompute && rec == Recompute::kNone && p.pp == 1 && fprof &&
                          fprof->stack == "megatron" && layers >= 4)
                        for (int part : {layers / 4, layers / 2, 3 * layers / 4})
                          if (part > 0 && part < layers) offloads.push_back(part);
                      for (int off : offloads) {
                        p.offload_layers = off;
                        ++tried;
                        auto v = validate_plan(c.model, n, work, p);
                        if (v.empty()) v = validate_schedule(p);
                        for (Violation& x : validate_against_hardware(*hw, work, p))
                          v.push_back(std::move(x));
                        if (!v.empty()) {
                          reasons.refused(v);
                          continue;
                        }
                        valid.push_back(p);
                      }
                    }
      }
  r.candidates = tried;

  // The fastest valid candidate that fits; a single valid one is the layout that ran.
  EstimatorCache cache;
  const Plan* best_plan = nullptr;
  Estimate best_est;
  for (const Plan& p : valid) {
    Estimate e = estimate(c.model, cluster, work, p, {}, &cache);
    if (!e.fits && valid.size() > 1) {
      reasons.too_big(p, e.memory_peak.total_bytes(), e.memory_capacity_bytes);
      continue;
    }
    if (!best_plan || e.step_time_s < best_est.step_time_s) {
      best_plan = &p;
      best_est = e;
    }
  }
  if (!best_plan) {
    r.skipped = reasons.explain();
    return r;
  }
  double best = best_est.step_time_s;
  if (opt.des && (best_plan->pp == 1 || des::simulator_supports(best_plan->schedule))) {
    best = des::simulate_step(c.model, cluster, work, *best_plan).estimate.step_time_s;
  }
  r.predicted_s = best;
  r.error_pct = (best - r.measured_s) / r.measured_s * 100.0;
  r.plan = best_plan->describe();
  r.regime = regime_of(cluster.profile, c.model, work, *best_plan, c.num_gpus,
                       fprof ? fprof->stack : "other");
  r.predicted_peak_memory_gib = best_est.memory_peak.total_bytes() / units::kGiB;
  r.fits = best_est.fits;
  return r;
}

CaseResult predict_layer_case(const LayerCase& c, const AccuracyOptions& opt) {
  CaseResult r;
  r.id = c.id;
  r.group = "layer_cases";
  r.measured_s = c.measured_layer_ms / 1000.0;
  const HardwareProfile* hw = opt.profile ? opt.profile(c.profile) : nullptr;
  if (!hw) {
    r.skipped = fmt::format("unknown hardware profile '{}'", c.profile);
    return r;
  }
  Plan p;
  p.tp = c.tp;
  p.dp = 1;
  p.mbs = c.mbs;
  p.gbs = c.mbs;
  p.sp = c.sp;
  p.recompute = c.recompute == "full"        ? Recompute::kFull
                : c.recompute == "selective" ? Recompute::kSelective
                                             : Recompute::kNone;
  p.flash_attention = framework_settings(c.framework, opt).flash_attention;
  r.flash_attention = p.flash_attention;
  Cluster cl;
  cl.profile = *hw;
  cl.num_gpus = c.tp;
  OpProgram prog;
  build_op_program(c.model, c.workload, p, cl, prog);
  ComputeCostModel cm{hw, c.workload.precision, c.workload.fp8_recipe};
  double t = 0;
  for (const Op& o : prog.dense_layer) {
    const double ot = o.kind == OpKind::kCollective
                          ? collective_cost(*hw, o.collective, o.bytes, o.group).time_s
                          : cm.op_s(o);
    t += ot;
    const bool fwd = o.pass == Pass::kForward;
    if (fwd &&
        (p.recompute == Recompute::kFull || (p.recompute == Recompute::kSelective && o.selective)))
      t += ot;
  }
  r.predicted_s = t;
  r.error_pct = (t - r.measured_s) / r.measured_s * 100.0;
  r.plan = p.describe();
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size();) {
      size_t j = i;
      while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
      const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = avg;
      i = j + 1;
    }
    return r;
  };
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double num = 0, da = 0, db = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    num += (ra[i] - ma) * (rb[i] - mb);
    da += (ra[i] - ma) * (ra[i] - ma);
    db += (rb[i] - mb) * (rb[i] - mb);
  }
  return da > 0 && db > 0 ? num / std::sqrt(da * db) : 0.0;
}

AccuracySummary summarize(const std::vector<CaseResult>& results) {
  AccuracySummary s;
  std::vector<double> abs_err;
  std::map<std::string, std::vector<const CaseResult*>> by_group;
  for (const auto& r : results) {
    ++s.cases_total;
    if (!r.skipped.empty()) continue;
    ++s.cases_predicted;
    abs_err.push_back(std::fabs(r.error_pct));
    by_group[r.group].push_back(&r);
    if (r.measured_peak_memory_gib && r.predicted_peak_memory_gib &&
        *r.measured_peak_memory_gib > 0) {
      const double e = 100 * (*r.predicted_peak_memory_gib / *r.measured_peak_memory_gib - 1);
      ++s.memory_cases;
      s.memory_mape_pct += std::fabs(e);
      s.memory_mean_signed_pct += e;
      s.memory_cases_within_10pct += std::fabs(e) <= 10;
    }
  }
  if (s.memory_cases > 0) {
    s.memory_mape_pct /= s.memory_cases;
    s.memory_mean_signed_pct /= s.memory_cases;
  }
  if (!abs_err.empty()) {
    s.mape_pct = std::accumulate(abs_err.begin(), abs_err.end(), 0.0) / abs_err.size();
    s.max_abs_pct = *std::max_element(abs_err.begin(), abs_err.end());
    std::vector<double> sorted = abs_err;
    std::sort(sorted.begin(), sorted.end());
    const size_t k = sorted.size();
    s.median_abs_pct = k % 2 ? sorted[k / 2] : 0.5 * (sorted[k / 2 - 1] + sorted[k / 2]);
  }
  for (const auto& [g, rs] : by_group) {
    GroupSummary gs;
    gs.group = g;
    gs.cases = static_cast<int>(rs.size());
    std::vector<double> pred, meas;
    double sum = 0;
    for (const CaseResult* r : rs) {
      sum += std::fabs(r->error_pct);
      pred.push_back(r->predicted_s);
      meas.push_back(r->measured_s);
    }
    gs.mape_pct = sum / rs.size();
    if (rs.size() >= 3) gs.spearman = spearman(pred, meas);
    std::map<std::pair<int, int64_t>, std::vector<const CaseResult*>> sets;
    for (const CaseResult* r : rs) sets[{r->num_gpus, r->global_batch}].push_back(r);
    for (const auto& [key, set] : sets) {
      if (set.size() < 3) continue;
      ++gs.layout_sets;
      const CaseResult* best = *std::min_element(
          set.begin(), set.end(), [](auto* a, auto* b) { return a->measured_s < b->measured_s; });
      int faster = 0;  // layouts predicted strictly faster than the measured-best one
      for (const CaseResult* r : set) faster += r->predicted_s < best->predicted_s ? 1 : 0;
      gs.best_in_top3 += faster < 3 ? 1 : 0;
    }
    s.groups.push_back(gs);
  }
  return s;
}

}  // namespace dtplan
