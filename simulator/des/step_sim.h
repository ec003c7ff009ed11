// One training step through the discrete-event pipeline simulator, with the same costs the
// analytic estimator uses (one cost model, two evaluators): the pipeline (schedule order,
// dependencies, sends) and the data-parallel gradient reduction (after each stage's last
// backward, or bucketed with it) are simulated on the cluster's links (Topology: NVLink,
// NIC rails, leaf and spine, max-min fair sharing between concurrent transfers); the optimizer
// step and ZeRO-3's per-layer gathers are taken from the estimate.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/des/pipeline_sim.h"

namespace dtplan {
class EstimatorCache;
}

namespace dtplan::des {

struct StepSimResult {
  Estimate estimate;           // the analytic estimate with step time and bubble simulated
  double analytic_step_s = 0;  // what the closed form says
  double pipeline_s = 0;       // simulated makespan of the pipeline
  long events = 0;
  std::vector<TraceEvent> trace;
  std::vector<int> gpus;  // per simulated rank: its GPU (global rank)
  // Per simulated rank: what a --slow-gpu fault on another GPU does to its timeline, e.g.
  // "runs at GPU 13's x1.5 (--slow-gpu)": its TP/CP group synchronises every layer, and with one
  // rank per stage the representative stands for the stage's slowest replica. "" when none.
  std::vector<std::string> slowed_by;
  int ranks = 0;  // simulated ranks: pp, or every GPU with all_ranks
  // Of those, the ranks the simulator ran (fewer when alike replicas share one simulation) and
  // the independent replica groups it found.
  int simulated_ranks = 0;
  int replica_groups = 1;
  // Per simulated rank: the rank whose timeline it has (PipelineSimResult::same_as; `trace`
  // holds only the ranks that were simulated) and when its last task or reduction ended.
  std::vector<int> same_as;
  std::vector<double> end_s;
  // Per pipeline stage: the most micro-batches whose activations the timeline held at once,
  // what the schedule plug-in states, and the stage's peak memory with the simulated count.
  std::vector<double> peak_inflight_microbatches, schedule_inflight_microbatches;
  std::vector<double> peak_memory_bytes;
};

// Faults to simulate (docs/simulator.md "Slow GPUs, flaky links and jitter").
struct SimFaults {
  std::vector<std::pair<int, double>> slow_gpus;   // (global rank, factor >= 1): its kernels
  std::vector<std::pair<int, double>> slow_links;  // (node, factor >= 1): its NICs
  double jitter_sigma = 0;  // per-task lognormal noise (mean one), sigma of log
  uint64_t seed = 1;
  bool empty() const { return slow_gpus.empty() && slow_links.empty() && jitter_sigma <= 0; }
};

// The pipeline stage of a global rank under the plan's rank order.
int stage_of_rank(const Plan& p, int rank);

// Schedules the simulator can order (others: InputError naming --schedule).
bool simulator_supports(const std::string& schedule);

// `all_ranks`: simulate every GPU (each pipeline replica, each TP/CP rank with its own NIC
// rail) instead of one representative rank per stage, up to `max_ranks` GPUs (simulate
// --max-ranks). Replicas that share no link and are alike run one simulation between them
// (PipelineSimInput::reduce_symmetry), so a symmetric 131,072-GPU step costs about one replica.
inline constexpr int kMaxAllRanks = 131072;
struct SimOptions {
  bool link_sharing = true;
  bool record_trace = false;
  bool all_ranks = false;
  int max_ranks = kMaxAllRanks;
  bool reduce_symmetry = true;  // false: simulate every replica (the reference the tests use)
  // The estimator's cache for the step costs (per thread; none: computed afresh).
  EstimatorCache* cache = nullptr;
  // Budget check and progress display (pipeline_sim.h); none: run whatever it costs, silently.
  const SimHooks* hooks = nullptr;
};
StepSimResult simulate_step(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                            const SimOptions& options, const SimFaults& faults = {});

// What simulate_step with one rank per stage and no trace will cost (the SimCost its hooks see
// before the first event), from the plan alone; zero for a pipelined plan whose schedule the
// simulator does not order (evaluators fall back to the closed form there). search's budget
// for --evaluator des and --refine sums it over the plans it will simulate.
SimCost step_sim_cost(const Plan& p);
inline StepSimResult simulate_step(const ModelSpec& m, const Cluster& c, const Workload& w,
                                   const Plan& p, bool link_sharing = true,
                                   bool record_trace = false, bool all_ranks = false,
                                   const SimFaults& faults = {}) {
  SimOptions o;
  o.link_sharing = link_sharing;
  o.record_trace = record_trace;
  o.all_ranks = all_ranks;
  return simulate_step(m, c, w, p, o, faults);
}

// One process of a trace: the events of simulated rank `rank`, under `name`.
struct TraceProcess {
  int rank;
  std::string name;
};
// What both trace writers (JSON here, protobuf in perfetto_proto.h) lay out the same way: per
// event, its process (-1: not shown) and thread; per process, the threads it uses; per event,
// whether its flow arrow is drawn (both ends shown). A thread is a stream and a lane:
// slices of one stream that overlap in time (a batched exchange's two messages) go on lanes of
// their own, since a viewer's thread track holds nested slices only; thread = stream + 7 x lane.
struct TraceLayout {
  std::vector<int> process, thread;
  std::vector<std::vector<bool>> threads_used;  // per process; thread 0 (compute) always shown
  std::vector<char> flow_shown;
};
TraceLayout trace_layout(const std::vector<TraceEvent>& trace,
                         const std::vector<TraceProcess>& processes);
std::string trace_thread_name(size_t thread);     // "pp send", "pp send (2)", ...
const char* trace_category(const TraceEvent& t);  // fwd, bwd, fwd+bwd, tp, cp, ep, pp, pp wait, dp
// Chrome/Perfetto trace JSON (CONVENTIONS.md §6): a process per entry, a thread per stream
// (compute, tp, cp, ep, pp send, pp recv, dp), an X slice per task or transfer, and flow
// arrows ("s"/"f") from each pipeline send to its receive where both ends are shown.
std::string trace_json(const std::vector<TraceEvent>& trace,
                       const std::vector<TraceProcess>& processes);
// The same, streamed to `sink` in pieces of about 1 MiB (simulate --trace writes a large trace
// to its file as it is laid out, without holding the whole text).
using TraceSink = std::function<void(std::string_view)>;
void write_trace_json(const std::vector<TraceEvent>& trace,
                      const std::vector<TraceProcess>& processes, const TraceSink& sink);
// Every simulated rank (0 .. ranks - 1), named by its stage (`pp`) and GPU.
std::string trace_json(const std::vector<TraceEvent>& trace, int ranks,
                       const std::vector<int>& gpus = {}, int pp = 0);
// The processes of a trace of `shown` (simulated ranks): ranks with the same timeline (alike
// replicas, StepSimResult::same_as) are one process, named by the GPUs it stands for.
std::vector<TraceProcess> trace_processes(const StepSimResult& r, int pp,
                                          const std::vector<int>& shown);
// simulate's default --trace-ranks: the first replica's rank of each stage and the slowest
// rank (the one whose last task or reduction ends last).
std::vector<int> default_trace_ranks(const StepSimResult& r, int pp);

}  // namespace dtplan::des
