// torchtitan: the TOML job config of v0.2.x ([job], [model], [training], [parallelism],
// [activation_checkpoint]) or the Python config module of its main branch (a function returning
// Trainer.Config, launched with --module/--config), and a Slurm script launching torchrun on
// every node (CONVENTIONS.md §3 and §5).
//
// torchtitan builds the model from a registered name and flavor, not from the job config: the
// emitter names the flavor whose architecture equals the model's, field by field, and refuses
// (naming the field and torchtitan's source line) when none does, rather than train another
// model. Checked against tests/data/framework_flags/torchtitan-*.json by
// scripts/framework_flags/check_torchtitan.py in tests/e2e/launch_frameworks.sh.
#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {
namespace {

constexpr FrameworkVersion kTorchtitanVersions[] = {
    {"0.2.2",
     "torchtitan v0.2.2 (pytorch/torchtitan@73a0e6979dd10b6b1904098eb3c8f62c18ab87ce, TOML job "
     "config)"},
    {"main",
     "torchtitan main @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21, Python config "
     "module; TOML was removed in 9810191)"},
};

bool is_main(const FrameworkVersion& v) { return std::string_view(v.name) == "main"; }

// A registered torchtitan model flavor and the architecture it builds, transcribed from the
// model's __init__.py / args at the version named (`source`).
struct Flavor {
  const char* name;
  const char* flavor;
  const char* source;
  ModelSpec spec;
};

// Llama 3 in torchtitan: SwiGLU width multiple_of x ceil(int(8 dim / 3) x multiplier /
// multiple_of), RMSNorm 1e-5, vocab 128256, untied, Llama 3.1 rope scaling 8 / 1 / 4 / 8192
// always (v0.2.2 llama3/model/args.py:20-40; main llama3/__init__.py scaling="llama").
ModelSpec llama3(int layers, int64_t dim, int heads, int kv, int64_t ffn) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = dim;
  m.heads = heads;
  m.kv_heads = kv;
  m.head_dim = static_cast<int>(dim / heads);
  m.ffn_hidden = ffn;
  m.vocab = 128256;
  m.norm_eps = 1e-5;
  m.rope.theta = 500000;
  m.rope.scaling = RopeScaling::kLlama3;
  m.rope.factor = 8;
  m.rope.low_freq_factor = 1;
  m.rope.high_freq_factor = 4;
  m.rope.original_max_seq = 8192;
  return m;
}

std::vector<Flavor> flavors_v022() {
  std::vector<Flavor> f = {
      {"llama3", "8B", "torchtitan/models/llama3/__init__.py:51@v0.2.2",
       llama3(32, 4096, 32, 8, 14336)},
      {"llama3", "70B", "torchtitan/models/llama3/__init__.py:82@v0.2.2",
       llama3(80, 8192, 64, 8, 28672)},
      {"llama3", "405B", "torchtitan/models/llama3/__init__.py:91@v0.2.2",
       llama3(126, 16384, 128, 8, 53248)},
  };
  {
    // qwen3/__init__.py:168-190@v0.2.2; Qwen3ModelArgs defaults norm_eps 1e-6
    // (qwen3/model/args.py:33); MoEArgs load_balance_coeff 1e-3: an expert bias
    // (models/moe/moe.py:38).
    ModelSpec m;
    m.layers = 94;
    m.hidden = 4096;
    m.heads = 64;
    m.kv_heads = 4;
    m.head_dim = 128;
    m.ffn_hidden = 12288;
    m.vocab = 151936;
    m.norm_eps = 1e-6;
    m.qk_norm = true;
    m.rope.theta = 5000000;
    MoeSpec e;
    e.experts = 128;
    e.topk = 8;
    e.expert_ffn_hidden = 1536;
    e.router.normalize_topk = true;
    e.router.expert_bias = true;
    m.moe = e;
    f.push_back({"qwen3", "235B-A22B", "torchtitan/models/qwen3/__init__.py:168@v0.2.2", m});
  }
  {
    // deepseek_v3/__init__.py:130-156@v0.2.2; DeepSeekV3ModelArgs defaults norm_eps 1e-5,
    // rope 10000 with YaRN factor 40 over 4096, beta 32 / 1, mscale 1
    // (deepseek_v3/model/args.py:54-85); no multi-token prediction module.
    ModelSpec m;
    m.layers = 61;
    m.hidden = 7168;
    m.heads = 128;
    m.kv_heads = 128;
    m.head_dim = 128;
    m.ffn_hidden = 18432;
    m.vocab = 129280;
    m.norm_eps = 1e-5;
    m.rope.theta = 10000;
    m.rope.scaling = RopeScaling::kYarn;
    m.rope.factor = 40;
    m.rope.original_max_seq = 4096;
    m.rope.mscale = m.rope.mscale_all_dim = 1.0;
    MoeSpec e;
    e.experts = 256;
    e.topk = 8;
    e.expert_ffn_hidden = 2048;
    e.shared_experts = 1;
    e.shared_ffn_hidden = 2048;
    e.dense_layers = 3;
    e.router = {RouterScore::kSigmoid, true, true, 2.5, 8, 4};
    m.moe = e;
    m.mla = MlaSpec{1536, 512, 128, 64, 128};
    f.push_back({"deepseek_v3", "671B", "torchtitan/models/deepseek_v3/__init__.py:130@v0.2.2", m});
  }
  return f;
}

// At main the llama3 flavors build the same architectures (llama3/__init__.py:150-360@b5bcd76,
// ComplexRoPE scaling "llama"); dtplan has not checked the other families there.
std::vector<Flavor> flavors_main() {
  return {
      {"llama3", "8B", "torchtitan/models/llama3/__init__.py@b5bcd76 (_8b)",
       llama3(32, 4096, 32, 8, 14336)},
      {"llama3", "70B", "torchtitan/models/llama3/__init__.py@b5bcd76 (_70b)",
       llama3(80, 8192, 64, 8, 28672)},
      {"llama3", "405B", "torchtitan/models/llama3/__init__.py:318@b5bcd76 (_405b)",
       llama3(126, 16384, 128, 8, 53248)},
  };
}

// The first architecture field where `m` and the flavor differ, or "".
std::string difference(const ModelSpec& m, const ModelSpec& t) {
  auto num = [](double v) { return fmt::format("{}", v); };
  struct Field {
    const char* name;
    std::string model, theirs;
  };
  const auto moe_text = [](const ModelSpec& s) {
    if (!s.moe) return std::string("dense");
    const MoeSpec& e = *s.moe;
    const RouterSpec& r = e.router;
    return fmt::format(
        "{} experts top-{} width {}, {} shared of {}, {} dense layers first, every {}; router "
        "{}{}{}, scale {}, groups {}/{}",
        e.experts, e.topk, e.expert_ffn_hidden, e.shared_experts, e.shared_ffn_hidden,
        e.dense_layers, e.layer_freq, to_string(r.score), r.normalize_topk ? " renormalised" : "",
        r.expert_bias ? " with expert bias" : "", r.topk_scaling, r.groups, r.group_topk);
  };
  const auto mla_text = [](const ModelSpec& s) {
    if (!s.mla) return std::string("none");
    const MlaSpec& a = *s.mla;
    return fmt::format("q_lora {} kv_lora {} qk {}+{} v {}", a.q_lora_rank, a.kv_lora_rank,
                       a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim);
  };
  const auto rope_text = [&](const ModelSpec& s) {
    const RopeSpec& r = s.rope;
    std::string text = fmt::format("theta {}", num(r.theta));
    if (r.scaling == RopeScaling::kLlama3)
      text += fmt::format(", llama3 scaling {} ({}/{} over {})", num(r.factor),
                          num(r.low_freq_factor), num(r.high_freq_factor), r.original_max_seq);
    if (r.scaling == RopeScaling::kYarn)
      text += fmt::format(", yarn {} over {} (beta {}/{}, mscale {}/{})", num(r.factor),
                          r.original_max_seq, num(r.beta_fast), num(r.beta_slow), num(r.mscale),
                          num(r.mscale_all_dim));
    return text;
  };
  const Field fields[] = {
      {"layers", num(m.layers), num(t.layers)},
      {"hidden", num(static_cast<double>(m.hidden)), num(static_cast<double>(t.hidden))},
      {"heads", num(m.heads), num(t.heads)},
      {"kv_heads", num(m.mla ? m.heads : m.kv_heads), num(t.mla ? t.heads : t.kv_heads)},
      {"head_dim", num(m.mla ? 0 : m.head_dim), num(t.mla ? 0 : t.head_dim)},
      {"ffn_hidden", num(static_cast<double>(m.ffn_hidden)),
       num(static_cast<double>(t.ffn_hidden))},
      {"ffn_act", to_string(m.ffn_act), to_string(t.ffn_act)},
      {"vocab", num(static_cast<double>(m.vocab)), num(static_cast<double>(t.vocab))},
      {"tied_embeddings", m.tied_embeddings ? "true" : "false",
       t.tied_embeddings ? "true" : "false"},
      {"norm", to_string(m.norm), to_string(t.norm)},
      {"norm_eps", num(m.norm_eps), num(t.norm_eps)},
      {"linear_bias", m.linear_bias ? "true" : "false", t.linear_bias ? "true" : "false"},
      {"qkv_bias", m.qkv_bias ? "true" : "false", t.qkv_bias ? "true" : "false"},
      {"qk_norm", m.qk_norm ? "true" : "false", t.qk_norm ? "true" : "false"},
      {"position_embedding", to_string(m.position_embedding), to_string(t.position_embedding)},
      {"rope", rope_text(m), rope_text(t)},
      {"moe", moe_text(m), moe_text(t)},
      {"mla", mla_text(m), mla_text(t)},
      {"mtp_layers", num(m.mtp_layers), num(t.mtp_layers)},
      // torchtitan's models have no dropout.
      {"attention_dropout", num(m.attention_dropout), num(t.attention_dropout)},
      {"hidden_dropout", num(m.hidden_dropout), num(t.hidden_dropout)},
  };
  for (const Field& f : fields)
    if (f.model != f.theirs)
      return fmt::format("{}: the model has {}, torchtitan's has {}", f.name, f.model, f.theirs);
  return "";
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// What the emitter writes, decided once for refusal() and emit().
struct Resolved {
  std::string refusal;
  const Flavor* flavor = nullptr;
  std::vector<Flavor> table;
};

Resolved resolve(const EmitInput& in, const FrameworkVersion& v) {
  Resolved r;
  const ModelSpec& m = *in.model;
  const Plan& p = *in.plan;
  const Workload& w = *in.work;
  auto refuse = [&](std::string why) {
    if (r.refusal.empty()) r.refusal = std::move(why);
  };
  for (const FrameworkRule& rule : framework_rules(Framework::kTorchtitan))
    if (rule.refuses(p, m) && !(is_main(v) && torchtitan_main_lifts(rule)))
      refuse(fmt::format("{} ({})", rule.reason, *rule.source ? rule.source : "dtplan's reading"));
  r.table = is_main(v) ? flavors_main() : flavors_v022();
  // The flavor of the same shape (layers, width, heads, dense or MoE), then every other field:
  // a dense flavor is no near match for an MoE model (Mixtral 8x7B was refused as Llama 3 8B
  // "differing in vocab", found by a new-user trial).
  std::string near;
  for (const Flavor& f : r.table) {
    const std::string d = difference(m, f.spec);
    if (d.empty()) {
      r.flavor = &f;
      break;
    }
    if (f.spec.layers == m.layers && f.spec.hidden == m.hidden && f.spec.heads == m.heads &&
        f.spec.moe.has_value() == m.moe.has_value() && f.spec.mla.has_value() == m.mla.has_value())
      near = fmt::format("{} {} ({}) differs in {}", f.name, f.flavor, f.source, d);
  }
  if (!r.flavor) {
    std::vector<std::string> names;
    for (const Flavor& f : r.table)
      names.push_back(fmt::format("{} {} ({})", f.name, f.flavor, f.source));
    refuse(near.empty() ? fmt::format("torchtitan {} builds models from registered flavors and "
                                      "none has this architecture ({} layers, hidden {}, {} "
                                      "heads{}); dtplan knows: {}",
                                      v.name, m.layers, m.hidden, m.heads,
                                      m.moe ? fmt::format(", MoE of {} experts, top-{}",
                                                          m.moe->experts, m.moe->topk)
                                            : "",
                                      fmt::join(names, ", "))
                        : fmt::format("torchtitan {} would train another model: {}", v.name, near));
  }
  // job_config.py@v0.2.2 (configs.py at main): mixed_precision_param bfloat16|float32 (:282),
  // mixed_precision_reduce float32 only (:290).
  if (w.precision == Precision::kFp16)
    refuse(
        "torchtitan trains in bfloat16 or float32 (training.mixed_precision_param, "
        "torchtitan/config/job_config.py:282@v0.2.2), not fp16");
  if (!p.main_grads_fp32)
    refuse(
        "torchtitan reduces gradients in float32 only (training.mixed_precision_reduce, "
        "job_config.py:290@v0.2.2); the plan reduces them in 16 bits");
  if (!p.flash_attention)
    refuse(
        "torchtitan's attention is SDPA or FlexAttention (fused kernels); it has no unfused "
        "attention setting");
  if (p.recompute == Recompute::kFull && p.recompute_layers > 0)
    refuse(
        "torchtitan recomputes every block or every N-th block (selective_ac_option N, "
        "torchtitan/distributed/activation_checkpoint.py:20@v0.2.2), not the first k blocks "
        "of each stage (--recompute-layers)");
  if (p.recompute == Recompute::kSelective)
    refuse(
        "torchtitan's selective recomputation is op-level (it saves every other matmul, "
        "torchtitan/distributed/activation_checkpoint.py:109-116@v0.2.2) or every N-th "
        "block, not the attention-core recomputation dtplan prices (Megatron's selective)");
  if (!is_main(v) && p.zero == 0)
    refuse(
        "torchtitan v0.2.2 without FSDP is DDP, which refuses TP, PP or EP beside it "
        "(torchtitan/models/llama3/infra/parallelize.py:148-151@v0.2.2) and turns mixed "
        "precision off on a single replica (torchtitan/distributed/utils.py:246-256); shard "
        "with --zero 3");
  if (p.rank_order != RankOrder::kTpCpEpDpPp)
    refuse(
        fmt::format("torchtitan builds its device mesh in its own order "
                    "(torchtitan/distributed/parallel_dims.py@v0.2.2); the plan's rank order "
                    "is {}",
                    to_string(p.rank_order)));
  if (w.precision == Precision::kFp8) {
    // torchao float8 through quantize.linear.float8 (recipe_name tensorwise | rowwise,
    // job_config.py:731-757@v0.2.2): no delayed scaling, no MXFP8 or blockwise here.
    if (is_main(v))
      refuse(
          "torchtitan main's Float8LinearConverter scales rowwise only (recipe_name rowwise | "
          "rowwise_with_gw_hp, torchtitan/components/quantization/float8.py:57@b5bcd76), a "
          "recipe dtplan does not price; --framework-version 0.2.2 has tensorwise");
    else if (w.fp8_recipe != Fp8Recipe::kTensorwise)
      refuse(
          fmt::format("torchtitan's float8 training scales tensorwise or rowwise "
                      "(quantize.linear.float8.recipe_name, job_config.py:731@v0.2.2); the "
                      "plan's FP8 recipe is {} (--fp8-recipe tensorwise)",
                      to_string(w.fp8_recipe)));
    // Float8 grouped GEMMs assert PP 1 and CP 1 (components/quantization/float8.py:193-198
    // @v0.2.2).
    if (m.moe && (p.pp > 1 || p.cp > 1))
      refuse(
          "torchtitan's float8 grouped GEMMs for experts run without PP and CP only "
          "(torchtitan/components/quantization/float8.py:193-198@v0.2.2)");
  }
  if (is_main(v) && p.etp != 1)
    refuse(
        "torchtitan main has no expert tensor parallelism (expert_tensor_parallel_degree was "
        "removed in c4b409a, 2026-04-30)");
  return r;
}

// The module names of each pipeline stage in stage order (module_fqns_per_model_part,
// job_config.py:367@v0.2.2, configs.py:187@b5bcd76): the embedding on the first, the final norm
// and output head on the last; torchtitan names the head "output" at v0.2.2 and "lm_head" at
// main (generate_llm_fqn_per_model_part, distributed/pipeline_parallel.py:236@v0.2.2).
std::vector<std::vector<std::string>> stage_modules(const ModelSpec& m, const Plan& p, bool main) {
  std::vector<std::vector<std::string>> stages;
  const int chunks = p.pp * p.vpp;
  for (int c = 0; c < chunks; ++c) {
    std::vector<std::string> s;
    if (c == 0) s.emplace_back("tok_embeddings");
    const LayerRange range = chunk_layers(m, p, c);
    for (int i = range.begin; i < range.end; ++i) s.push_back(fmt::format("layers.{}", i));
    if (c == chunks - 1) {
      s.emplace_back("norm");
      s.emplace_back(main ? "lm_head" : "output");
    }
    stages.push_back(std::move(s));
  }
  return stages;
}

std::string quoted_lists(const std::vector<std::vector<std::string>>& stages) {
  std::string out = "[\n";
  for (const auto& s : stages) {
    out += "  [";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + toml_string(s[i]);
    out += "],\n";
  }
  return out + "]";
}

// torchtitan's name for the plan's schedule; refusal() keeps out the ones it has not.
const char* schedule_name(const std::string& s) {
  if (const char* name = torchtitan_schedule_name(s)) return name;
  throw InputError({}, "--schedule",
                   fmt::format("torchtitan has no pipeline schedule '{}'; known: {}", s,
                               fmt::join(torchtitan_schedules(), ", ")));
}

std::string header(const EmitInput& in, const FrameworkVersion& v) {
  std::string t;
  t += fmt::format("# torchtitan job config for {} on {} x {} ({}), written by dtplan.\n",
                   comment_safe(in.model->name), in.cluster->num_gpus,
                   comment_safe(in.cluster->profile.gpu.name),
                   comment_safe(in.cluster->profile.name));
  t += fmt::format("# Plan: {}\n", comment_safe(in.plan->describe()));
  t += fmt::format("# For {}\n", v.description);
  t += "# FSDP2 prefetches and reduce-scatters each block's collectives as it goes; the plan's\n"
       "# overlap settings are what torchtitan does.\n";
  return t;
}

std::string toml_config(const EmitInput& in, const FrameworkVersion& v, const Flavor& f) {
  const ModelSpec& m = *in.model;
  const Plan& p = *in.plan;
  const Workload& w = *in.work;
  const int64_t gbs = p.gbs > 0 ? p.gbs : w.global_batch;
  std::string t = header(in, v);
  t += "\n[job]\n";
  t += fmt::format("description = {}\n", toml_string(in.job_name));
  t += "\n[model]\n";
  t += fmt::format("name = {}\nflavor = {}\n", toml_string(f.name), toml_string(f.flavor));
  if (w.precision == Precision::kFp8)
    // quantize.linear.float8 / quantize.grouped_mm.float8
    // (components/quantization/float8.py:238-239@v0.2.2; "float8" is v0.1.0's name).
    t += m.moe ? "converters = [\"quantize.linear.float8\", \"quantize.grouped_mm.float8\"]\n"
               : "converters = [\"quantize.linear.float8\"]\n";
  t += "\n[training]\n";
  // With pipelining the local batch is split into micro-batches; without, the micro-batch is
  // the local batch and the global batch implies gradient accumulation.
  t += fmt::format("local_batch_size = {}\n", p.pp > 1 ? gbs / p.dp : p.mbs);
  t += fmt::format("global_batch_size = {}\n", gbs);
  t += fmt::format("seq_len = {}\n", w.seq_len);
  t += "mixed_precision_param = \"bfloat16\"\n";
  t += "mixed_precision_reduce = \"float32\"\n";
  t += "\n[parallelism]\n";
  t += fmt::format("data_parallel_replicate_degree = {}\n", p.zero == 3 ? 1 : p.dp);
  t += fmt::format("data_parallel_shard_degree = {}\n", p.zero == 3 ? p.dp : 1);
  t += fmt::format("tensor_parallel_degree = {}\n", p.tp);
  t += fmt::format("pipeline_parallel_degree = {}\n", p.pp);
  t += fmt::format("context_parallel_degree = {}\n", p.cp);
  t += fmt::format("expert_parallel_degree = {}\n", p.ep);
  t += fmt::format("expert_tensor_parallel_degree = {}\n", p.etp);
  // FSDP with pipelining: torchtitan's "default" keeps each stage's parameters gathered from
  // the forward to the backward of every micro-batch (reshard_after_forward = not pp_enabled,
  // llama3/infra/parallelize.py:327@v0.2.2, distributed/fsdp.py:129-132@b5bcd76); dtplan
  // prices ZeRO-3 as resharding after every forward (a gather per micro-batch forward and
  // backward, the shard alone held), so the file asks for that (job_config.py:336@v0.2.2).
  if (p.zero == 3 && p.pp > 1) t += "fsdp_reshard_after_forward = \"always\"\n";
  if (p.pp > 1) {
    t += fmt::format("pipeline_parallel_schedule = {}\n", toml_string(schedule_name(p.schedule)));
    t += fmt::format("pipeline_parallel_microbatch_size = {}\n", p.mbs);
    t += fmt::format("module_fqns_per_model_part = {}\n", quoted_lists(stage_modules(m, p, false)));
  }
  if (p.tp_comm_overlap) t += "enable_async_tensor_parallel = true\n";
  t += "\n[activation_checkpoint]\n";
  t += fmt::format("mode = {}\n", toml_string(to_string(p.recompute)));
  // [checkpoint] enable, interval, async_mode (job_config.py:487-519, 591@v0.2.2): off, as
  // torchtitan's default, at the interval dtplan prices when turned on.
  t += "\n[checkpoint]\n";
  t += fmt::format("# Set enable = true to write checkpoints; interval: {}.\n",
                   comment_safe(in.save_interval_why.empty() ? "dtplan's" : in.save_interval_why));
  t += fmt::format("enable = false\ninterval = {}\n", in.save_interval_steps);
  if (in.async_save) t += "async_mode = \"async\"\n";
  if (w.precision == Precision::kFp8) {
    // The output head (and a router) stay in 16 bits, as dtplan prices FP8 (Megatron keeps
    // them so); filter_fqns defaults to none (job_config.py:741@v0.2.2). Grouped GEMMs apply
    // to the named MoE modules only (fqns, default none: :757).
    t += "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n";
    t += m.moe ? "filter_fqns = [\"output\", \"router.gate\"]\n" : "filter_fqns = [\"output\"]\n";
    if (m.moe) t += "\n[quantize.grouped_mm.float8]\nfqns = [\"experts\"]\n";
  }
  if (p.tp_comm_overlap)
    // Async TP runs under torch.compile (job_config.py:357@v0.2.2).
    t += "\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n";
  return t;
}

std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// torchtitan main: a module with a function returning Trainer.Config, as
// torchtitan/models/llama3/config_registry.py:305@b5bcd76 (llama3_405b) writes it.
std::string python_config(const EmitInput& in, const FrameworkVersion& v, const Flavor& f) {
  const ModelSpec& m = *in.model;
  const Plan& p = *in.plan;
  const Workload& w = *in.work;
  const int64_t gbs = p.gbs > 0 ? p.gbs : w.global_batch;
  std::string t = header(in, v);
  t += fmt::format("# Job: {}\n", comment_safe(in.job_name));
  // components/checkpointer/__init__.py@b5bcd76 (llama3/config_registry.py:9 imports it so).
  t += "from torchtitan.components.checkpointer import CheckpointManager\n";
  t += fmt::format("from torchtitan.config import {}ParallelismConfig, TrainingConfig\n",
                   p.tp_comm_overlap ? "CompileConfig, " : "");
  if (p.recompute != Recompute::kNone)
    t += fmt::format("from torchtitan.distributed.activation_checkpoint import {}\n",
                     p.recompute == Recompute::kFull ? "FullAC" : "SelectiveAC");
  t += fmt::format("from torchtitan.models.{} import model_registry\n", f.name);
  t += "from torchtitan.trainer import Trainer\n\n\n";
  t += "def dtplan_job() -> Trainer.Config:\n";
  t += fmt::format("    model_spec = model_registry({})\n", py_string(f.flavor));
  t += "    return Trainer.Config(\n";
  t += "        model_spec=model_spec,\n";
  // configs.py:37-51@b5bcd76: tokens per micro-batch per DP rank (one pipeline micro-batch),
  // tokens per step over all ranks; num_pp_microbatches (:232) when pipelined.
  t += "        training=TrainingConfig(\n";
  t += fmt::format("            num_tokens_per_microbatch_per_dp_rank={},\n",
                   int64_t{p.mbs} * w.seq_len);
  t += fmt::format("            num_tokens_per_train_step={},\n", gbs * w.seq_len);
  t += fmt::format("            max_context_length={},\n", w.seq_len);
  t += "            mixed_precision_param=\"bfloat16\",\n";
  t += "            mixed_precision_reduce=\"float32\",\n";
  t += "        ),\n";
  t += "        parallelism=ParallelismConfig(\n";
  t += fmt::format("            data_parallel_replicate_degree={},\n", p.zero == 3 ? 1 : p.dp);
  t += fmt::format("            data_parallel_shard_degree={},\n", p.zero == 3 ? p.dp : 1);
  t += fmt::format("            tensor_parallel_degree={},\n", p.tp);
  if (p.tp > 1)
    t += fmt::format("            enable_sequence_parallel={},\n", p.sp ? "True" : "False");
  t += fmt::format("            pipeline_parallel_degree={},\n", p.pp);
  t += fmt::format("            context_parallel_degree={},\n", p.cp);
  t += fmt::format("            expert_parallel_degree={},\n", p.ep);
  // As in the TOML above: what dtplan prices (configs.py:145@b5bcd76).
  if (p.zero == 3 && p.pp > 1) t += "            fsdp_reshard_after_forward=\"always\",\n";
  if (p.pp > 1) {
    t += fmt::format("            pipeline_parallel_schedule={},\n",
                     py_string(schedule_name(p.schedule)));
    t += fmt::format("            num_pp_microbatches={},\n", gbs / (int64_t{p.mbs} * p.dp));
    std::string lists = "[\n";
    for (const auto& s : stage_modules(m, p, true)) {
      lists += "                [";
      for (size_t i = 0; i < s.size(); ++i) lists += (i ? ", " : "") + py_string(s[i]);
      lists += "],\n";
    }
    t += "            module_fqns_per_model_part=" + lists + "            ],\n";
  }
  t += "        ),\n";
  // activation_checkpoint.py:332-337@b5bcd76: SelectiveAC (op level), FullAC (every block).
  t += fmt::format("        activation_checkpoint={},\n",
                   p.recompute == Recompute::kFull        ? "FullAC.Config()"
                   : p.recompute == Recompute::kSelective ? "SelectiveAC.Config()"
                                                          : "None");
  // CheckpointManager.Config: enable, interval (components/checkpointer/base.py:278-284),
  // async_mode (dcp.py:137) @b5bcd76; off, as torchtitan's default.
  t += fmt::format("        # Set enable=True to write checkpoints; interval: {}.\n",
                   comment_safe(in.save_interval_why.empty() ? "dtplan's" : in.save_interval_why));
  t += fmt::format("        checkpoint=CheckpointManager.Config(enable=False, interval={}{}),\n",
                   in.save_interval_steps, in.async_save ? ", async_mode=\"async\"" : "");
  if (p.tp_comm_overlap)
    t += "        compile=CompileConfig(enable=True, enable_async_tensor_parallel=True),\n";
  t += "    )\n";
  return t;
}

class TorchtitanEmitter final : public IEmitter {
 public:
  std::span<const FrameworkVersion> versions() const override { return kTorchtitanVersions; }

  std::string refusal(const EmitInput& in) const override {
    return resolve(in, chosen_version(*this, in)).refusal;
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const FrameworkVersion& v = chosen_version(*this, in);
    const Resolved r = resolve(in, v);
    if (!r.refusal.empty()) throw InputError({}, "--format", r.refusal);
    const ModelSpec& m = *in.model;
    const int gpn = in.cluster->ranks_per_node();
    const int nodes = in.cluster->nodes();
    const bool main = is_main(v);
    const std::string config = main ? "dtplan_job.py" : "torchtitan.toml";

    std::string s;
    s += "#!/bin/bash\n";
    // Every value is single-quoted on purpose (literal text, nothing expands here).
    s += "# shellcheck disable=SC2016\n";
    s += fmt::format("# torchtitan launch for {} on {} x {} ({}), written by dtplan.\n",
                     comment_safe(m.name), in.cluster->num_gpus,
                     comment_safe(in.cluster->profile.gpu.name),
                     comment_safe(in.cluster->profile.name));
    s += fmt::format("# For {}\n", v.description);
    s += fmt::format("#SBATCH --job-name={}\n", slurm_name(in.job_name));
    s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks={}\n#SBATCH --gpus-per-task={}\n", nodes,
                     nodes, gpn);
    // In the submit folder: Slurm opens the output file before the script runs and does not
    // create a missing folder (a logs/ folder made by the script would be too late).
    s += "#SBATCH --output=%x-%j.out\n";
    s += slurm_options(in);
    s += "set -euo pipefail\n";
    s += "head_node=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)\n";
    s += "head_node_ip=$(srun --nodes=1 --ntasks=1 -w \"$head_node\" hostname --ip-address)\n";
    // sbatch runs a spooled copy of this script ($0 is not this folder); the job starts in the
    // directory sbatch was called from (SLURM_SUBMIT_DIR), which must hold the files below.
    const char* file = main ? "dtplan_job.py" : "torchtitan.toml";
    s += "job_dir=\"${SLURM_SUBMIT_DIR:-$PWD}\"\n";
    s += fmt::format(
        "if [[ ! -f \"$job_dir/{0}\"{1} ]]; then\n"
        "  echo \"submit from the folder holding {0}: cd <that folder> && sbatch "
        "train_torchtitan.sbatch\" >&2\n  exit 1\nfi\n",
        file, main ? "" : " && -z \"${CONFIG:-}\"");
    if (main) {
      // torchtitan/config/manager.py:48@b5bcd76: --module names an importable module (here the
      // job folder on PYTHONPATH), --config the function returning Trainer.Config.
      s += "export PYTHONPATH=\"$job_dir${PYTHONPATH:+:$PYTHONPATH}\"\n";
      s += fmt::format(
          "srun torchrun --nnodes {} --nproc_per_node {} --rdzv_id \"$SLURM_JOB_ID\" "
          "--rdzv_backend c10d \\\n  --rdzv_endpoint \"$head_node_ip:29500\" -m torchtitan.train "
          "--module dtplan_job --config dtplan_job \"$@\"\n",
          nodes, gpn);
    } else {
      s += "CONFIG=\"${CONFIG:-$job_dir/torchtitan.toml}\"\n";
      s += fmt::format(
          "srun torchrun --nnodes {} --nproc_per_node {} --rdzv_id \"$SLURM_JOB_ID\" "
          "--rdzv_backend c10d \\\n  --rdzv_endpoint \"$head_node_ip:29500\" -m torchtitan.train "
          "--job.config_file \"$CONFIG\" \"$@\"\n",
          nodes, gpn);
    }
    const std::string needs =
        main ? fmt::format(
                   "a torchtitan main install (b5bcd76), the model's tokenizer "
                   "(Trainer.Config hf_assets_path, a folder with the {} {} tokenizer) "
                   "and a dataset (dataloader), checkpointing if wanted (checkpoint)",
                   r.flavor->name, r.flavor->flavor)
             : fmt::format(
                   "a torchtitan v0.2.2 install, the model's tokenizer ([model] "
                   "hf_assets_path, a folder with the {} {} tokenizer) and a dataset "
                   "([training] dataset), checkpointing if wanted ([checkpoint])",
                   r.flavor->name, r.flavor->flavor);
    return {{config, main ? python_config(in, v, *r.flavor) : toml_config(in, v, *r.flavor), false,
             needs},
            {"train_torchtitan.sbatch", s, true, ""}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, TorchtitanEmitter, "torchtitan",
                "torchtitan job config (v0.2.2 TOML or main's Python module) and a Slurm torchrun "
                "script")
}  // namespace dtplan
