// A step term is a plug-in (issue #14): this file alone (with its lines in tests/CMakeLists.txt,
// its own test executable so that no other test sees the term) adds a term to every step; the
// estimate, the breakdown list every output iterates and the simulator all carry it.
#include <gtest/gtest.h>

#include <string>

#include "core/catalog.h"
#include "core/registry.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"
#include "simulator/step/step_terms.h"
#include "tests/unit/simulator/test_plans.h"

namespace dtplan {
namespace {

// A fixed 250 ms per step for every pipeline stage beyond the first (a made-up stall).
class StageStall final : public IStepTerm {
 public:
  const char* key() const override { return "test_stage_stall_s"; }
  const char* label() const override { return "test stage stall"; }
  double seconds(const ModelSpec&, const Cluster&, const Workload&, const Plan& p,
                 const Estimate&) const override {
    return 0.25 * (p.pp - 1);
  }
};

}  // namespace
DTPLAN_REGISTER(IStepTerm, StageStall, "test-stage-stall", "test-only example step term")
namespace {

TEST(StepTermPlugin, ARegisteredTermIsInTheStepTheBreakdownAndTheSimulation) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  const Plan p = testing::megatron_plan(8, 8, 4, 256);
  const Workload w = testing::workload_for(p);
  const Estimate e = estimate(m, c, w, p);
  // Its slot among the registered terms (the built-in data stall is registered too).
  size_t slot = 0;
  const auto& entries = Registry<IStepTerm>::global().entries();
  while (slot < entries.size() && entries[slot].name != "test-stage-stall") ++slot;
  ASSERT_LT(slot, entries.size());
  EXPECT_DOUBLE_EQ(e.extra_terms_s[slot], 0.25 * 7);
  double sum = 0;
  bool listed = false;
  for (const StepTermValue& t : step_terms(e)) {
    sum += t.seconds;
    if (std::string(t.key) == "test_stage_stall_s") {
      listed = true;
      EXPECT_EQ(std::string(t.label), "test stage stall");
      EXPECT_DOUBLE_EQ(t.seconds, 1.75);
    }
  }
  EXPECT_TRUE(listed);
  EXPECT_NEAR(sum, e.step_time_s, 1e-9 * e.step_time_s);
  // Throughput follows the step with the term.
  EXPECT_NEAR(e.tokens_per_s, 256.0 * w.seq_len / e.step_time_s, 1e-9 * e.tokens_per_s);
  // The simulator keeps the term outside its bubble.
  const des::StepSimResult r = des::simulate_step(m, c, w, p, /*link_sharing=*/false);
  EXPECT_DOUBLE_EQ(r.estimate.extra_terms_s[slot], 1.75);
  double sim_sum = 0;
  for (const StepTermValue& t : step_terms(r.estimate)) sim_sum += t.seconds;
  EXPECT_NEAR(sim_sum, r.estimate.step_time_s, 1e-9 * r.estimate.step_time_s);
  EXPECT_NEAR(r.estimate.step_time_s, r.analytic_step_s, 0.01 * r.analytic_step_s);
}

}  // namespace
}  // namespace dtplan
