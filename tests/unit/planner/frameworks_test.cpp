// Framework rules (planner/frameworks.h): unknown names refused with the known list and a "did
// you mean", the rule table, framework_warnings() per plan, torchtitan's schedule names.
#include "planner/frameworks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/error.h"
#include "planner/emit/i_emitter.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {
namespace {

Plan plan(int tp, int pp, int dp, int zero, const char* schedule) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.zero = zero;
  p.schedule = schedule;
  p.mbs = 1;
  p.gbs = 512;
  return p;
}

// The same plan with sequence parallelism wherever it shards tensors (torchtitan v0.2.2 always
// does).
Plan with_sp(Plan p) {
  p.sp = p.tp > 1;
  return p;
}

// A dense model: the rules that look at the model (MoE) do not apply.
const ModelSpec& dense() {
  static const ModelSpec m = load_model("llama3-8b");
  return m;
}

std::vector<std::string> codes(Framework f, const Plan& p) {
  std::vector<std::string> c;
  for (const auto& w : framework_warnings(f, p, dense())) c.push_back(w.code);
  return c;
}

std::string message(Framework f, const Plan& p, const std::string& code) {
  for (const auto& w : framework_warnings(f, p, dense()))
    if (w.code == code) return w.message;
  return "";
}

// Expectation: each known name parses to its own value, in framework_names() order.
TEST(Frameworks, ParseKnownNames) {
  EXPECT_EQ(parse_framework("megatron"), Framework::kMegatron);
  EXPECT_EQ(parse_framework("deepspeed"), Framework::kDeepSpeed);
  EXPECT_EQ(parse_framework("torchtitan"), Framework::kTorchtitan);
  for (const auto& n : framework_names()) EXPECT_EQ(framework_name(parse_framework(n)), n);
}

// Expectation: an unknown name is an InputError on the given field, naming the value, the
// nearest known name and every known one (it used to become Megatron silently).
TEST(Frameworks, UnknownNameIsRefusedWithTheKnownOnes) {
  try {
    parse_framework("megatrom");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--framework");
    const std::string& r = e.reason();
    EXPECT_NE(r.find("unknown framework 'megatrom'"), std::string::npos) << r;
    EXPECT_NE(r.find("(did you mean 'megatron'?)"), std::string::npos) << r;
    EXPECT_NE(r.find("known: megatron, deepspeed, torchtitan"), std::string::npos) << r;
  }
  try {
    parse_framework("jax", "framework");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "framework");
    EXPECT_EQ(std::string(e.reason()).find("did you mean"), std::string::npos) << e.reason();
  }
  EXPECT_THROW(parse_framework(""), InputError);
  EXPECT_THROW(parse_framework("Megatron"), InputError);  // names are lower case
}

// Expectation: every rule has a reason and a predicate, a cited source names a commit, and
// framework_refusal() is the first refusing rule's reason.
TEST(Frameworks, RuleTable) {
  for (const auto& n : framework_names()) {
    const Framework f = parse_framework(n);
    ASSERT_FALSE(framework_rules(f).empty()) << n;
    for (const FrameworkRule& r : framework_rules(f)) {
      EXPECT_NE(r.reason, nullptr);
      EXPECT_NE(r.refuses, nullptr);
      ASSERT_NE(r.source, nullptr);
      if (*r.source) {
        EXPECT_NE(std::string(r.source).find('@'), std::string::npos) << r.source;
      }
    }
  }
  const Plan p = plan(8, 4, 8, 3, "interleaved");  // DeepSpeed: ZeRO-3 with PP, and a schedule
  const FrameworkRule* r = refusing_rule(Framework::kDeepSpeed, p, dense());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, &framework_rules(Framework::kDeepSpeed)[0]);
  EXPECT_STREQ(framework_refusal(Framework::kDeepSpeed, p, dense()), r->reason);
  EXPECT_EQ(framework_refusal(Framework::kMegatron, p, dense()), nullptr);
}

// Expectation: a plain Megatron plan (distributed optimizer, 1F1B, PP 8) earns no warning.
TEST(FrameworkWarnings, NoneForADefaultMegatronPlan) {
  EXPECT_TRUE(framework_warnings(Framework::kMegatron, plan(8, 8, 4, 1, "1f1b"), dense()).empty());
  EXPECT_TRUE(framework_warnings(Framework::kMegatron, plan(8, 1, 32, 0, "1f1b"), dense()).empty());
  EXPECT_TRUE(framework_warnings(Framework::kTorchtitan, with_sp(plan(8, 4, 8, 3, "1f1b")), dense())
                  .empty());
}

// Expectation: ZeRO-3 under Megatron needs Megatron-FSDP; with PP also version 1 of it (the
// issue's TP8 PP16 ZeRO-3 report recommendation).
TEST(FrameworkWarnings, Zero3UnderMegatron) {
  EXPECT_EQ(codes(Framework::kMegatron, plan(8, 1, 32, 3, "1f1b")),
            (std::vector<std::string>{"megatron-fsdp"}));
  const Plan pp16 = plan(8, 16, 8, 3, "1f1b");
  EXPECT_EQ(codes(Framework::kMegatron, pp16),
            (std::vector<std::string>{"megatron-fsdp", "zero3-with-pp"}));
  EXPECT_NE(message(Framework::kMegatron, pp16, "megatron-fsdp").find("--use-megatron-fsdp"),
            std::string::npos);
  EXPECT_NE(message(Framework::kMegatron, pp16, "zero3-with-pp").find("PP 16"), std::string::npos);
}

// Expectation: a plan the framework refuses earns "framework-cannot-run" with the rule and the
// frameworks that can run it (ZeRO-2 with PP 1 under torchtitan: Megatron-FSDP's optim_grads
// and DeepSpeed can, not torchtitan's FSDP2).
TEST(FrameworkWarnings, CannotRunNamesTheRuleAndWhoCan) {
  const Plan z2 = with_sp(plan(8, 1, 32, 2, "1f1b"));
  EXPECT_EQ(codes(Framework::kTorchtitan, z2), (std::vector<std::string>{"framework-cannot-run"}));
  const std::string m = message(Framework::kTorchtitan, z2, "framework-cannot-run");
  EXPECT_NE(m.find("torchtitan cannot run this plan"), std::string::npos) << m;
  EXPECT_NE(m.find(framework_refusal(Framework::kTorchtitan, z2, dense())), std::string::npos) << m;
  EXPECT_NE(m.find("megatron, deepspeed can (--framework megatron)"), std::string::npos) << m;

  // GPipe: Megatron lacks it, torchtitan has it (ZeRO-0, no expert TP).
  const std::string g =
      message(Framework::kMegatron, with_sp(plan(8, 4, 8, 0, "gpipe")), "framework-cannot-run");
  EXPECT_NE(g.find("torchtitan can"), std::string::npos) << g;
  EXPECT_NE(g.find("schedules.py@d98e8a6"), std::string::npos) << g;  // the rule's source

  // ZB-H1: no framework dtplan knows runs it.
  const std::string z =
      message(Framework::kMegatron, plan(8, 4, 8, 1, "zb-h1"), "framework-cannot-run");
  EXPECT_NE(z.find("no other framework dtplan knows can"), std::string::npos) << z;

  // ZeRO-3 with PP under DeepSpeed: Megatron (FSDP) and torchtitan can.
  const std::string d =
      message(Framework::kDeepSpeed, with_sp(plan(8, 2, 8, 3, "1f1b")), "framework-cannot-run");
  EXPECT_NE(d.find("megatron, torchtitan can (--framework megatron)"), std::string::npos) << d;
}

// Expectation: torchtitan's schedule names come from one table: each maps, and every registered
// schedule either maps or is refused by torchtitan's rule.
TEST(Frameworks, TorchtitanSchedules) {
  for (const auto& s : torchtitan_schedules()) EXPECT_NE(torchtitan_schedule_name(s), nullptr);
  EXPECT_STREQ(torchtitan_schedule_name("zb-v"), "ZBVZeroBubble");
  EXPECT_EQ(torchtitan_schedule_name("zb-h1"), nullptr);
  for (const auto& s : schedule_names()) {
    const Plan p = with_sp(plan(8, 4, 8, 3, s.c_str()));
    EXPECT_EQ(torchtitan_schedule_name(s) == nullptr,
              framework_refusal(Framework::kTorchtitan, p, dense()) != nullptr)
        << s;
  }
}

// Expectation: the torchtitan emitter refuses a schedule it has no name for, naming the rule,
// instead of writing 1F1B (a plan that bypassed refusal()).
TEST(Frameworks, TorchtitanEmitterRefusesAnUnknownSchedule) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster c = load_cluster("dgx-h100", 64);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 512;
  const Plan p = with_sp(plan(8, 4, 2, 3, "zb-h1"));
  EmitInput in;
  in.model = &m;
  in.cluster = &c;
  in.work = &w;
  in.plan = &p;
  in.job_name = "dtplan";
  const IEmitter* em = find_emitter("torchtitan");
  ASSERT_NE(em, nullptr);
  EXPECT_NE(em->refusal(in), "");
  try {
    em->emit(in);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--format");
    EXPECT_NE(std::string(e.reason()).find("torchtitan runs 1F1B, interleaved, GPipe and ZB-V"),
              std::string::npos)
        << e.reason();
  }
}

// Expectation: torchtitan v0.2.2 has no switch to turn sequence parallelism off beside TP
// ([parallelism] in torchtitan/config/job_config.py:312-480@v0.2.2), so --framework torchtitan
// refuses TP without SP in estimate, check and simulate as the launch writer does; main has
// parallelism.enable_sequence_parallel, and its emitter writes the plan.
TEST(Frameworks, TorchtitanReleaseNeedsSequenceParallelismWithTp) {
  const Plan nosp = plan(8, 2, 4, 3, "1f1b");
  const char* why = framework_refusal(Framework::kTorchtitan, nosp, dense());
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("TP > 1 needs sequence parallelism"), std::string::npos) << why;
  EXPECT_EQ(framework_refusal(Framework::kTorchtitan, with_sp(nosp), dense()), nullptr);
  EXPECT_EQ(framework_refusal(Framework::kMegatron, nosp, dense()), nullptr);

  // Llama 3.1 70B: main's llama3 70B flavor has Llama 3.1's RoPE scaling.
  const ModelSpec m = load_model("llama3.1-70b");
  const Cluster c = load_cluster("dgx-h100", 64);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 512;
  EmitInput in;
  in.model = &m;
  in.cluster = &c;
  in.work = &w;
  in.plan = &nosp;
  in.job_name = "dtplan";
  const IEmitter* em = find_emitter("torchtitan");
  ASSERT_NE(em, nullptr);
  EXPECT_NE(em->refusal(in).find("TP > 1 needs sequence parallelism"), std::string::npos)
      << em->refusal(in);
  in.version = "main";
  EXPECT_EQ(em->refusal(in), "");
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Expectation: the rules that depend on the model. Megatron-LM raises for MoE + TP without SP
// (megatron/core/transformer/moe/moe_layer.py:636 @d98e8a6); DeepSpeed asserts "MoE not
// supported with Stage 3"; a dense model with the same plans passes both.
TEST(Frameworks, MoeRules) {
  const ModelSpec moe = load_model("mixtral-8x7b");
  Plan p = plan(2, 1, 32, 1, "1f1b");
  p.ep = 8;
  EXPECT_NE(framework_refusal(Framework::kMegatron, p, moe), nullptr);
  EXPECT_EQ(framework_refusal(Framework::kMegatron, p, dense()), nullptr);
  p.sp = true;
  EXPECT_EQ(framework_refusal(Framework::kMegatron, p, moe), nullptr);
  p.zero = 3;
  const char* ds = framework_refusal(Framework::kDeepSpeed, p, moe);
  ASSERT_NE(ds, nullptr);
  EXPECT_NE(std::string(ds).find("MoE with ZeRO-3"), std::string::npos) << ds;
  EXPECT_EQ(framework_refusal(Framework::kDeepSpeed, p, dense()), nullptr);
  EXPECT_EQ(framework_refusal(Framework::kMegatron, p, moe), nullptr);  // Megatron-FSDP runs it
}

// Megatron-Core offloads activations neither with a pipeline nor with recomputation
// (transformer_config.py:1891-1899 @d98e8a6); Megatron-DeepSpeed and torchtitan have no
// layer-wise activation offloading.
TEST(FrameworkRules, ActivationOffloadingIsMegatronCoresWithoutPipelineOrRecompute) {
  const ModelSpec m = load_model("llama3-8b");
  Plan off;
  off.dp = 8;
  off.offload_layers = 8;
  EXPECT_EQ(framework_refusal(Framework::kMegatron, off, m), nullptr);
  Plan piped = off;
  piped.pp = 2;
  piped.dp = 4;
  EXPECT_NE(framework_refusal(Framework::kMegatron, piped, m), nullptr);
  Plan rec = off;
  rec.recompute = Recompute::kSelective;
  EXPECT_NE(framework_refusal(Framework::kMegatron, rec, m), nullptr);
  EXPECT_NE(framework_refusal(Framework::kDeepSpeed, off, m), nullptr);
  EXPECT_NE(framework_refusal(Framework::kTorchtitan, off, m), nullptr);
}

}  // namespace
}  // namespace dtplan
