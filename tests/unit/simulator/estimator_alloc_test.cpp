// The estimator's contract (estimator.h): an estimate allocates nothing, and with a warm
// EstimatorCache neither do the plans a search visits in a row (other ZeRO stages, schedules,
// micro-batch sizes and global batches of a layout). Heap allocations are counted by replacing
// the global operator new for this test executable alone; a change that allocates in the hot
// path fails here (bench/estimator_bench measures the same as a rate).
#include <gtest/gtest.h>

#include <vector>

#include "bench/alloc_counter.h"
#include "core/catalog.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {
namespace {

struct Case {
  const char* model;
  const char* profile;
  int gpus, tp, pp, ep;
};

// The plans a search visits for one layout: every ZeRO stage, schedule, micro-batch size and
// two global batches.
std::vector<Plan> layout_plans(const Case& k) {
  std::vector<Plan> out;
  for (const char* schedule : {"1f1b", "interleaved", "zb-h1", "gpipe"})
    for (int zero = 0; zero <= 3; ++zero)
      for (int mbs : {1, 2})
        for (int64_t gbs : {1536, 3072}) {
          Plan p;
          p.tp = k.tp;
          p.pp = k.pp;
          p.ep = k.ep;
          p.dp = k.gpus / (k.tp * k.pp);
          p.sp = k.tp > 1;
          p.zero = zero;
          p.recompute = Recompute::kSelective;
          p.schedule = schedule;
          p.vpp = std::string(schedule) == "interleaved" ? 2 : 1;
          p.uneven_pp = true;
          p.mbs = mbs;
          p.gbs = gbs;
          out.push_back(p);
        }
  return out;
}

TEST(EstimatorAllocations, NoneWithAWarmCacheNorWithout) {
  for (const Case& k : {Case{"gpt3-175b", "dgx-a100-80g", 1024, 8, 16, 1},
                        Case{"deepseek-v3", "dgx-h100", 2048, 1, 16, 64},
                        Case{"llama3.1-405b", "gb200-nvl72", 16384, 8, 16, 1}}) {
    const ModelSpec m = load_model(k.model);
    const Cluster c = load_cluster(k.profile, k.gpus);
    const std::vector<Plan> plans = layout_plans(k);
    std::vector<Workload> works;
    for (const Plan& p : plans) {
      Workload w;
      w.global_batch = p.gbs;
      works.push_back(w);
    }
    EstimatorCache cache;
    long before = testing::heap_allocations();
    for (size_t i = 0; i < plans.size(); ++i)  // warm: a cache miss allocates
      (void)estimate(m, c, works[i], plans[i], EstimatorOptions{}, &cache);
    EXPECT_GT(testing::heap_allocations() - before, 0)
        << "the counter sees the cache's allocations";
    before = testing::heap_allocations();
    double sum = 0;
    for (size_t i = 0; i < plans.size(); ++i)
      sum += estimate(m, c, works[i], plans[i], EstimatorOptions{}, &cache).step_time_s;
    EXPECT_EQ(testing::heap_allocations() - before, 0) << k.model << ": cached estimates allocated";
    before = testing::heap_allocations();
    for (size_t i = 0; i < plans.size(); i += 7)
      sum += estimate(m, c, works[i], plans[i]).step_time_s;
    EXPECT_EQ(testing::heap_allocations() - before, 0)
        << k.model << ": uncached estimates allocated";
    EXPECT_GT(sum, 0);
  }
}

}  // namespace
}  // namespace dtplan
