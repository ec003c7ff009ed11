#include "core/framework_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/yaml_reader.h"

namespace dtplan {

namespace {

Fp8Recipe parse_recipe(const std::string& r) {
  if (r == "tensorwise") return Fp8Recipe::kTensorwise;
  if (r == "mxfp8") return Fp8Recipe::kMxfp8;
  if (r == "blockwise") return Fp8Recipe::kBlockwise;
  return Fp8Recipe::kDelayed;
}

// The sections a profile and each of its versions may give.
void read_sections(YamlMap& y, FrameworkProfile& f, bool top) {
  if (auto a = top ? std::optional<YamlMap>(y.get_map("attention")) : y.opt_map("attention")) {
    YAML::Node kernels = a->child("kernels");
    if (!kernels.IsDefined() || !kernels.IsSequence() || kernels.size() == 0)
      a->fail("kernels",
              "expected a non-empty list of attention kernel names (fa2, fa3, cudnn, ...)");
    f.attention_kernels.clear();
    for (const auto& k : kernels) {
      if (!k.IsScalar()) a->fail("kernels", "expected kernel names (fa2, fa3, cudnn, ...)");
      f.attention_kernels.push_back(k.as<std::string>());
    }
    f.attention_source = a->get_string("source");
    a->finish();
  }
  if (auto o = y.opt_map("overlap")) {
    if (auto v = o->opt_bool("tp_comm_overlap")) f.tp_comm_overlap = v;
    if (auto v = o->opt_bool("grad_reduce_overlap")) f.grad_reduce_overlap = v;
    if (auto v = o->opt_bool("param_gather_overlap")) f.param_gather_overlap = v;
    f.overlap_source = o->get_string("source");
    o->finish();
  }
  if (auto c = y.opt_map("compute")) {
    // A version's `compute` overrides the keys it gives; the profile's must give `efficiency`.
    if (top)
      f.compute_efficiency = c->get_double("efficiency", 0);
    else if (auto v = c->opt_double("efficiency", 0))
      f.compute_efficiency = *v;
    if (f.compute_efficiency > 1.0)
      c->fail("efficiency",
              fmt::format("is a fraction and must be <= 1, got {}", f.compute_efficiency));
    if (auto v = c->opt_double("attention_efficiency", 0)) f.attention_efficiency = *v;
    if (f.attention_efficiency > 1.0)
      c->fail("attention_efficiency",
              fmt::format("is a fraction and must be <= 1, got {}", f.attention_efficiency));
    f.compute_source = c->get_string("source");
    c->finish();
  }
  if (auto z = y.opt_map("zero3")) {
    f.zero3_gather_per_tensor = z->get_enum("gather", {"per-layer", "per-tensor"}) == "per-tensor";
    if (auto v = z->opt_bool("prefetch")) f.zero3_prefetch = v;
    f.zero3_source = z->get_string("source");
    z->finish();
  }
  if (auto g = y.opt_map("gradients")) {
    f.main_grads_fp32 = g->get_enum("dtype", {"fp32", "16bit"}) == "fp32";
    f.gradients_source = g->get_string("source");
    g->finish();
  }
  if (auto o = y.opt_map("optimizer")) {
    const double b = o->get_double("state_bytes_per_param", 0);
    // From 2 (BF16 master-free moments) to 16 (fp32 master, moments and a spare copy).
    if (b < 2 || b > 16)
      o->fail("state_bytes_per_param", fmt::format("must lie in 2..16 bytes, got {}", b));
    f.optimizer_state_bytes_per_param = b;
    f.optimizer_source = o->get_string("source");
    o->finish();
  }
  if (auto r = y.opt_map("runtime")) {
    const double mib = r->get_double("cuda_context_mib", 0);
    // From lazy loading's few hundred MiB to a context that loads every library's kernels.
    if (mib < 100 || mib > 8192)
      r->fail("cuda_context_mib", fmt::format("must lie in 100..8192 MiB, got {}", mib));
    f.cuda_context_bytes = mib * 1048576.0;
    f.runtime_source = r->get_string("source");
    r->finish();
  }
  if (auto e = y.opt_map("fp8")) {
    f.fp8_recipe =
        parse_recipe(e->get_enum("recipe", {"delayed", "tensorwise", "mxfp8", "blockwise"}));
    f.fp8_source = e->get_string("source");
    e->finish();
  }
}

}  // namespace

FrameworkProfile load_framework_profile_file(const std::string& path, const std::string& version) {
  YAML::Node root = load_yaml_file(path);
  YamlMap y(root, path, "");
  FrameworkProfile f;
  f.name = y.get_string("name");
  f.description = y.get_string("description");
  f.stack = y.opt_enum("stack", {"megatron", "deepspeed", "torchtitan", "other"}).value_or("other");
  read_sections(y, f, true);
  if (auto vs = y.opt_map("versions")) {
    if (!vs->node().IsMap()) vs->fail_here("expected a map of version -> overrides");
    for (const auto& kv : vs->node()) f.versions.push_back(kv.first.as<std::string>());
    if (!version.empty()) {
      if (std::find(f.versions.begin(), f.versions.end(), version) == f.versions.end())
        throw InputError({}, "--framework",
                         fmt::format("framework profile '{}' has no version '{}'; known: {}",
                                     f.name, version, fmt::join(f.versions, ", ")));
      YamlMap v = vs->get_map(version);
      read_sections(v, f, false);
      v.finish();
      f.version = version;
    }
  } else if (!version.empty()) {
    throw InputError({}, "--framework",
                     fmt::format("framework profile '{}' lists no versions; name it without "
                                 "'@{}'",
                                 f.name, version));
  }
  y.finish();
  return f;
}

void apply_framework_defaults(const FrameworkProfile& f, const FrameworkPlanGiven& given, Plan& p,
                              Workload& w) {
  // TP-communication overlap needs sequence parallelism (Megatron-LM and Megatron-Bridge turn it
  // on only with it): a default never asks it of a plan without.
  if (!given.tp_comm_overlap && f.tp_comm_overlap)
    p.tp_comm_overlap = *f.tp_comm_overlap && p.sp && p.tp > 1;
  if (!given.grad_reduce_overlap && f.grad_reduce_overlap)
    p.overlap_grad_reduce = *f.grad_reduce_overlap;
  if (!given.param_gather_overlap && f.param_gather_overlap)
    p.overlap_param_gather = *f.param_gather_overlap;
  if (f.zero3_gather_per_tensor) p.zero3_gather_per_tensor = *f.zero3_gather_per_tensor;
  if (f.zero3_prefetch) p.zero3_prefetch = *f.zero3_prefetch;
  if (!given.fp8_recipe && f.fp8_recipe) w.fp8_recipe = *f.fp8_recipe;
  if (!given.grads && f.main_grads_fp32) p.main_grads_fp32 = *f.main_grads_fp32;
  if (f.optimizer_state_bytes_per_param)
    p.optimizer_state_bytes_per_param = *f.optimizer_state_bytes_per_param;
  if (f.cuda_context_bytes) p.cuda_context_bytes = *f.cuda_context_bytes;
}

std::string apply_attention_kernel(const FrameworkProfile& f, HardwareProfile& hw) {
  EfficiencyParams& e = hw.efficiency;
  for (const std::string& name : f.attention_kernels)
    for (const EfficiencyParams::AttentionCurve& c : e.attention_kernels)
      if (c.kernel == name) {
        e.attention_fwd_max_fraction = c.fwd_max_fraction;
        e.attention_fwd_half_seq = c.fwd_half_seq;
        e.attention_bwd_max_fraction = c.bwd_max_fraction;
        e.attention_bwd_half_seq = c.bwd_half_seq;
        return name;
      }
  return "";
}

std::string apply_framework_profile(const FrameworkProfile& f, HardwareProfile& hw) {
  std::string kernel = apply_attention_kernel(f, hw);
  EfficiencyParams& e = hw.efficiency;
  const double x = f.compute_efficiency;
  e.gemm_max_fraction *= x;
  e.gemm_max_fraction_fp8 *= x;
  e.gemm_max_fraction_mxfp8 *= x;
  e.attention_fwd_max_fraction *= x * f.attention_efficiency;
  e.attention_bwd_max_fraction *= x * f.attention_efficiency;
  return kernel;
}

}  // namespace dtplan
