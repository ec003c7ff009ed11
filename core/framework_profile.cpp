#include "core/framework_profile.h"

#include <fmt/format.h>

#include "core/yaml_reader.h"

namespace dtplan {

FrameworkProfile load_framework_profile_file(const std::string& path) {
  YAML::Node root = load_yaml_file(path);
  YamlMap y(root, path, "");
  FrameworkProfile f;
  f.name = y.get_string("name");
  f.description = y.get_string("description");
  f.stack = y.opt_enum("stack", {"megatron", "deepspeed", "torchtitan", "other"}).value_or("other");
  YamlMap a = y.get_map("attention");
  YAML::Node kernels = a.child("kernels");
  if (!kernels.IsDefined() || !kernels.IsSequence() || kernels.size() == 0)
    a.fail("kernels", "expected a non-empty list of attention kernel names (fa2, fa3, cudnn, ...)");
  for (const auto& k : kernels) {
    if (!k.IsScalar()) a.fail("kernels", "expected kernel names (fa2, fa3, cudnn, ...)");
    f.attention_kernels.push_back(k.as<std::string>());
  }
  f.attention_source = a.get_string("source");
  a.finish();
  if (auto o = y.opt_map("overlap")) {
    f.tp_comm_overlap = o->opt_bool("tp_comm_overlap");
    f.grad_reduce_overlap = o->opt_bool("grad_reduce_overlap");
    f.param_gather_overlap = o->opt_bool("param_gather_overlap");
    f.overlap_source = o->get_string("source");
    o->finish();
  }
  if (auto c = y.opt_map("compute")) {
    f.compute_efficiency = c->get_double("efficiency", 0);
    if (f.compute_efficiency > 1.0)
      c->fail("efficiency",
              fmt::format("is a fraction and must be <= 1, got {}", f.compute_efficiency));
    f.compute_source = c->get_string("source");
    c->finish();
  }
  y.allow("versions");
  y.finish();
  return f;
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
  e.attention_fwd_max_fraction *= x;
  e.attention_bwd_max_fraction *= x;
  return kernel;
}

}  // namespace dtplan
