// Framework profiles (frameworks/*.yaml, issue #15): every shipped profile loads with its
// sources; a framework's attention kernel preference picks the first kernel the hardware profile
// has a curve for (Transformer Engine: cuDNN on Hopper, flash-attn below; llm-foundry:
// flash-attn v2 everywhere); malformed files are refused naming file:line:col.
#include "core/framework_profile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/catalog.h"
#include "core/error.h"

namespace dtplan {
namespace {

TEST(FrameworkProfiles, ShippedProfilesLoadWithSources) {
  const std::vector<std::string> names = list_framework_profile_names();
  for (const char* n : {"megatron-lm", "megatron-core", "megatron-deepspeed", "nemo",
                        "megatron-bridge", "llm-foundry", "torchtitan", "vtrain-megatron"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const std::string& n : names) {
    const FrameworkProfile f = load_framework_profile(n);
    EXPECT_EQ(f.name, n);
    EXPECT_FALSE(f.attention_kernels.empty()) << n;
    EXPECT_FALSE(f.attention_source.empty()) << n;
  }
}

TEST(FrameworkProfiles, AttentionKernelIsTheFirstTheGpuHas) {
  HardwareProfile h100 = load_profile("dgx-h100");
  const HardwareProfile h100_default = h100;
  // Megatron-Bridge (Transformer Engine): cuDNN on Hopper, the profile's default curve.
  EXPECT_EQ(apply_attention_kernel(load_framework_profile("megatron-bridge"), h100), "cudnn");
  EXPECT_EQ(h100.efficiency.attention_fwd_max_fraction,
            h100_default.efficiency.attention_fwd_max_fraction);
  // llm-foundry runs flash-attn v2: on H100 its curve (0.352 forward, 0.332 backward).
  EXPECT_EQ(apply_attention_kernel(load_framework_profile("llm-foundry"), h100), "fa2");
  EXPECT_DOUBLE_EQ(h100.efficiency.attention_fwd_max_fraction, 0.352);
  EXPECT_DOUBLE_EQ(h100.efficiency.attention_bwd_half_seq, 593);
  // On A100 Transformer Engine's preference [cudnn, fa2] finds flash-attn only.
  HardwareProfile a100 = load_profile("dgx-a100-80g");
  EXPECT_EQ(apply_attention_kernel(load_framework_profile("megatron-lm"), a100), "fa2");
}

TEST(FrameworkProfiles, ComputeEfficiencyScalesTheKernelAsymptotes) {
  const FrameworkProfile foundry = load_framework_profile("llm-foundry");
  ASSERT_GT(foundry.compute_efficiency, 0.3);
  ASSERT_LE(foundry.compute_efficiency, 1.0);
  EXPECT_NE(foundry.compute_source.find("fit_efficiency.py"), std::string::npos);
  HardwareProfile h100 = load_profile("dgx-h100");
  const HardwareProfile before = h100;
  apply_framework_profile(foundry, h100);
  const double x = foundry.compute_efficiency;
  EXPECT_DOUBLE_EQ(h100.efficiency.gemm_max_fraction, before.efficiency.gemm_max_fraction * x);
  EXPECT_DOUBLE_EQ(h100.efficiency.gemm_max_fraction_fp8,
                   before.efficiency.gemm_max_fraction_fp8 * x);
  EXPECT_DOUBLE_EQ(h100.efficiency.attention_fwd_max_fraction, 0.352 * x);  // its FA2 curve
  // Megatron-family profiles keep the kernels' efficiency (1.0).
  EXPECT_DOUBLE_EQ(load_framework_profile("megatron-bridge").compute_efficiency, 1.0);
}

TEST(FrameworkProfiles, MalformedProfilesAreRefusedWithTheirPlace) {
  const std::string path = ::testing::TempDir() + "bad_framework.yaml";
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: [fa2]\n  source: z\n  speed: 3\n";
  }
  try {
    load_framework_profile_file(path);
    FAIL() << "accepted an unknown key";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_framework.yaml:6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("speed"), std::string::npos) << e.what();
  }
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: []\n  source: z\n";
  }
  EXPECT_THROW(load_framework_profile_file(path), InputError);
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: [{fa2: 1}]\n  source: z\n";
  }
  EXPECT_THROW(load_framework_profile_file(path), InputError);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtplan
