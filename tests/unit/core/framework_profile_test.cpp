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
  // Its FA2 curve, times the framework's own attention factor (fitted alongside, <= 1).
  ASSERT_GT(foundry.attention_efficiency, 0.3);
  ASSERT_LE(foundry.attention_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(h100.efficiency.attention_fwd_max_fraction,
                   0.352 * x * foundry.attention_efficiency);
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

// The defaults sections (zero3, fp8, gradients) and versions: what a shipped profile states,
// how the defaults apply to a plan where the user set nothing, and the located refusals.
TEST(FrameworkProfiles, DefaultsApplyWhereTheUserSetNothing) {
  // Megatron-Bridge's perf recipes: per-tensor current scaling as "FP8", BF16 gradients.
  const FrameworkProfile bridge = load_framework_profile("megatron-bridge");
  ASSERT_TRUE(bridge.fp8_recipe.has_value());
  EXPECT_EQ(*bridge.fp8_recipe, Fp8Recipe::kTensorwise);
  ASSERT_TRUE(bridge.main_grads_fp32.has_value());
  EXPECT_FALSE(*bridge.main_grads_fp32);
  EXPECT_NE(bridge.gradients_source.find("grad_reduce_in_fp32"), std::string::npos);
  // DeepSpeed stage 3 of 2021 gathered per parameter tensor.
  const FrameworkProfile ds = load_framework_profile("megatron-deepspeed");
  ASSERT_TRUE(ds.zero3_gather_per_tensor.has_value());
  EXPECT_TRUE(*ds.zero3_gather_per_tensor);

  Plan p;
  p.tp = 2;
  p.sp = true;
  Workload w;
  w.precision = Precision::kFp8;
  apply_framework_defaults(bridge, FrameworkPlanGiven{}, p, w);
  EXPECT_EQ(w.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_FALSE(p.main_grads_fp32);
  EXPECT_TRUE(p.overlap_grad_reduce);  // the profile's true
  // What the user gave stays.
  Plan q;
  Workload v;
  v.fp8_recipe = Fp8Recipe::kMxfp8;
  FrameworkPlanGiven given;
  given.fp8_recipe = given.grads = true;
  apply_framework_defaults(bridge, given, q, v);
  EXPECT_EQ(v.fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_TRUE(q.main_grads_fp32);
  // A TP-overlap default never asks it of a plan without sequence parallelism.
  FrameworkProfile f = bridge;
  f.tp_comm_overlap = true;
  Plan no_sp;
  no_sp.tp = 4;
  apply_framework_defaults(f, FrameworkPlanGiven{}, no_sp, v);
  EXPECT_FALSE(no_sp.tp_comm_overlap);
  apply_framework_defaults(f, FrameworkPlanGiven{}, p, v);
  EXPECT_TRUE(p.tp_comm_overlap);
  Plan z;
  apply_framework_defaults(ds, FrameworkPlanGiven{}, z, v);
  EXPECT_TRUE(z.zero3_gather_per_tensor);
  EXPECT_EQ(z.optimizer_state_bytes_per_param, 12);  // no optimizer section: Adam's 12 bytes
}

// NeMo 24.07 runs Apex DistributedFusedAdam with store_param_remainders: a 16-bit remainder
// beside the BF16 parameter instead of an fp32 master (10 bytes of state per parameter), and
// reduces gradients in BF16 (grad_sync_dtype=bf16 in its FP8 performance examples).
TEST(FrameworkProfiles, NemoKeepsParamRemaindersAndBf16Gradients) {
  const FrameworkProfile nemo = load_framework_profile("nemo");
  ASSERT_TRUE(nemo.optimizer_state_bytes_per_param.has_value());
  EXPECT_EQ(*nemo.optimizer_state_bytes_per_param, 10);
  EXPECT_NE(nemo.optimizer_source.find("store_param_remainders"), std::string::npos);
  ASSERT_TRUE(nemo.main_grads_fp32.has_value());
  EXPECT_FALSE(*nemo.main_grads_fp32);
  EXPECT_NE(nemo.gradients_source.find("grad_sync_dtype=bf16"), std::string::npos);
  Plan p;
  Workload w;
  apply_framework_defaults(nemo, FrameworkPlanGiven{}, p, w);
  EXPECT_EQ(p.optimizer_state_bytes_per_param, 10);
  EXPECT_FALSE(p.main_grads_fp32);
  // Out of range: refused with its place.
  const std::string path = ::testing::TempDir() + "bad_optimizer.yaml";
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: [fa2]\n  source: z\n"
         "optimizer:\n  state_bytes_per_param: 40\n  source: z\n";
  }
  try {
    load_framework_profile_file(path);
    FAIL() << "accepted 40 bytes of optimizer state";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_optimizer.yaml:7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2..16"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// The megatron-deepspeed profile's runs (BLOOM, PyTorch 1.11 with CUDA 11.5) loaded every
// kernel at start-up: their own measurement, 1573 MiB per GPU, is the profile's CUDA context.
TEST(FrameworkProfiles, RuntimeCudaContextFromTheProfile) {
  const FrameworkProfile ds = load_framework_profile("megatron-deepspeed");
  ASSERT_TRUE(ds.cuda_context_bytes.has_value());
  EXPECT_EQ(*ds.cuda_context_bytes, 1573.0 * 1048576);
  EXPECT_NE(ds.runtime_source.find("chronicles-prequel.md"), std::string::npos);
  Plan p;
  Workload w;
  EXPECT_EQ(p.cuda_context_bytes, 300e6);  // lazy module loading, no profile
  apply_framework_defaults(ds, FrameworkPlanGiven{}, p, w);
  EXPECT_EQ(p.cuda_context_bytes, 1573.0 * 1048576);
  Plan q;
  apply_framework_defaults(load_framework_profile("megatron-lm"), FrameworkPlanGiven{}, q, w);
  EXPECT_EQ(q.cuda_context_bytes, 300e6);  // no runtime section
  const std::string path = ::testing::TempDir() + "bad_runtime.yaml";
  for (const char* bad : {"20", "1e9", "nan"}) {
    {
      std::ofstream f(path);
      f << "name: x\ndescription: y\nattention:\n  kernels: [fa2]\n  source: z\n"
           "runtime:\n  cuda_context_mib: "
        << bad << "\n  source: z\n";
    }
    try {
      load_framework_profile_file(path);
      FAIL() << "accepted a CUDA context of " << bad << " MiB";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad_runtime.yaml:7"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(FrameworkProfiles, VersionsOverrideTheirSections) {
  const std::string path = ::testing::TempDir() + "versioned_framework.yaml";
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: [fa2]\n  source: z\n"
         "fp8:\n  recipe: delayed\n  source: a\n"
         "versions:\n  '1.0': {}\n  '2.0':\n    fp8:\n      recipe: mxfp8\n      source: b\n"
         "    zero3:\n      gather: per-tensor\n      source: c\n";
  }
  const FrameworkProfile base = load_framework_profile_file(path);
  EXPECT_EQ(base.versions, (std::vector<std::string>{"1.0", "2.0"}));
  EXPECT_EQ(*base.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_FALSE(base.zero3_gather_per_tensor.has_value());
  const FrameworkProfile v1 = load_framework_profile_file(path, "1.0");
  EXPECT_EQ(v1.version, "1.0");
  EXPECT_EQ(*v1.fp8_recipe, Fp8Recipe::kDelayed);
  const FrameworkProfile v2 = load_framework_profile_file(path, "2.0");
  EXPECT_EQ(*v2.fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_TRUE(*v2.zero3_gather_per_tensor);
  try {
    load_framework_profile_file(path, "3.0");
    FAIL() << "accepted an unknown version";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no version '3.0'; known: 1.0, 2.0"), std::string::npos)
        << e.what();
  }
  // A profile without versions refuses one.
  EXPECT_THROW(load_framework_profile("megatron-bridge@25.09"), InputError);
  {
    std::ofstream f(path);
    f << "name: x\ndescription: y\nattention:\n  kernels: [fa2]\n  source: z\n"
         "zero3:\n  gather: per-block\n  source: c\n";
  }
  try {
    load_framework_profile_file(path);
    FAIL() << "accepted an unknown zero3.gather";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("versioned_framework.yaml:7"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtplan
