// Discrete-event simulation of one training step's pipeline: every (stage, chunk, micro-batch,
// pass) is a task on its stage's compute stream, in the order the schedule prescribes, waiting
// for its input from the neighbouring stage, which arrives over a point-to-point link
// (FlowNetwork: concurrent sends on one link share it). Costs come from the same per-stage
// F/B/W times the analytic estimator uses; the simulation replaces the closed-form bubble by the
// timeline the schedule actually produces.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "core/hardware.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan::des {

// ZB-H1 splits the backward into B (input gradients, sent upstream at once) and W (weight
// gradients, run where the pipeline would idle); the others run B and W as one task.
// The V schedules (zb-v, dualpipe-v) need v = 2: chunk 0 runs down ranks 0..p-1, chunk 1 back
// up p-1..0, so the last rank hands chunk 0's output to its own chunk 1 and the loss is on
// rank 0's chunk 1. ZB-V splits every backward; DualPipeV splits some and runs the others
// whole or overlapped with a forward (one task, F + B + W long).

// What a simulation will cost, estimated once the ranks to simulate are known and before the
// first event (simulate's budget, issue #21). Per task (a forward, backward or weight-gradient
// pass of one micro-batch chunk on one simulated rank): about 3.2 events (the task, its send
// and its receive; 3.12 measured on Llama 3.1 405B TP8 PP16 VPP2 on 2,048 H100 at 128 to 8,192
// micro-batches, 2026-12-02), rounded up to 3.5 for the reductions' flows; about 64 bytes of
// state (20 measured), and with a trace about 1 KiB more (the events and their layout: 0.56
// KiB measured writing JSON, 0.87 KiB writing protobuf).
struct SimCost {
  double ranks = 0;  // simulated ranks (after the symmetry reduction)
  double tasks = 0, events = 0, memory_bytes = 0;
};
SimCost sim_cost(double ranks, int v, int m, bool splits_weight_gradients, bool trace);

struct SimHooks {
  // Called once with the estimate, before the first event; may throw to refuse the run.
  std::function<void(const SimCost&)> before_run;
  // Called every 2^16 events with the events processed so far (all simulations of the step).
  std::function<void(uint64_t events, const SimCost&)> progress;
};

struct PipelineSimInput {
  int p = 1;  // pipeline ranks
  // Pipeline replicas simulated side by side (ranks r x p .. r x p + p - 1 form replica r);
  // they share the network and nothing else. Per-rank vectors below (gpu, dp_pred, dp_succ)
  // then have p x replicas entries; per-stage ones (f, b, w, dp_s, comm_s) keep p.
  int replicas = 1;
  int v = 1;  // chunks per rank (interleaved)
  int m = 1;  // micro-batches
  // Per rank, one micro-batch through ALL of the rank's chunks (as the analytic estimator):
  std::vector<double> f, b, w;
  double p2p_bytes = 0;        // activation (or gradient) per message
  double p2p_bytes_per_s = 0;  // link capacity between neighbouring ranks (0: free)
  bool link_sharing = true;

  // Optional: the cluster's links (Topology) instead of one dedicated link per neighbour pair.
  // With `hw` set and `gpu` filled, sends follow the route between the ranks' GPUs, and each
  // rank's data-parallel gradient reduction runs as a flow on its own links after its last
  // backward, sharing NICs with the sends still in flight. Transfers are sized so that alone
  // they take exactly the cost model's time (p2p_bytes / p2p_bytes_per_s, dp_s).
  const HardwareProfile* hw = nullptr;
  int num_gpus = 0;
  std::vector<int> gpu;               // per rank: the GPU (global rank) it runs on
  std::vector<double> dp_s;           // per rank: gradient collectives alone (0: none)
  std::vector<int> dp_pred, dp_succ;  // per rank: its ring neighbours' GPUs in the DP group
  bool dp_overlap = false;            // bucketed: starts with the last backward, its last bucket
                                      // trails it
  std::vector<double> dp_last_share;  // per rank: the last bucket's share of dp_s (empty: 1)
  double sm_slowdown = 0;             // compute slowdown while the rank's DP traffic runs
  // Optional, for the trace: per rank, the exposed TP, CP and EP communication inside one
  // micro-batch's tasks (seconds, all chunks and passes); shown on their own streams.
  std::vector<std::array<double, 3>> comm_s;
  // Optional, for the trace: per rank, ZeRO-3's parameter gathers of one micro-batch's forward
  // passes and gathers plus gradient reduce-scatters of its backward (seconds alone, all
  // chunks); drawn on the dp stream beside the compute they overlap (their exposed part is in
  // the step's remainder, from the closed form).
  std::vector<std::array<double, 2>> zero3_s;
  // Faults (simulate --slow-gpu, --slow-link, --jitter). Per simulated rank, the factor its
  // compute is slowed by (empty: none; the exposed communication of comm_s keeps its time). Nodes
  // whose NICs run `factor` times slower (their flows are still sized at the nominal rate, so they
  // take longer). Jitter: each task is slowed by the largest of `jitter_group` draws of a mean-one
  // lognormal exp(sigma Z - sigma^2/2), the same draws for the ranks of one TP/CP group (simulated
  // ranks s whose (s / p) / jitter_group and s % p agree), which run at their slowest member's
  // pace.
  std::vector<double> slowdown;
  std::vector<std::pair<int, double>> slow_nodes;
  double jitter_sigma = 0;
  int jitter_group = 1;
  uint64_t jitter_seed = 1;
  // Per simulated replica, its index among all replicas (the jitter draws are keyed on it);
  // empty: 0 .. replicas - 1. The symmetry reduction sets it for the replicas it simulates.
  std::vector<int> replica_index;
  // Symmetry (replicas > 1 on a topology): replicas whose flows share no link with other
  // replicas' form independent groups; groups alike in everything that drives the simulation
  // (their routes' link pattern and rates, slowdowns, jitter draws) run the same timeline, so
  // one of each kind is simulated and its result copied to the others. Exact: the result equals
  // the full simulation (tests/unit/simulator/symmetry_test.cpp). false: simulate every replica.
  bool reduce_symmetry = true;
  // Budget check and progress (optional).
  const SimHooks* hooks = nullptr;
};

// Streams of a simulated rank, for the trace (one thread each).
enum class StreamKind { kCompute, kTp, kCp, kEp, kPpSend, kPpRecv, kDp };
inline constexpr int kNumStreams = 7;
const char* stream_name(StreamKind s);

struct TraceEvent {
  int stage;
  // "F3.1" = forward of micro-batch 3, chunk 1; "B": input gradients (with the weight
  // gradients where the schedule does not split them); "W3.0": weight gradients; "BW": B and W
  // as one task in a schedule that splits others; "F3.0&BW1.1": DualPipeV's overlapped pair.
  std::string name;
  double start_s, end_s;
  StreamKind stream = StreamKind::kCompute;
  long flow = -1;  // a send and its receive share an id (an arrow in the trace)
};

struct PipelineSimResult {
  double makespan_s = 0;
  std::vector<double> busy_s;  // per rank
  // Per rank: time its compute stream was blocked on its own sends, measured from the
  // timeline: waiting for the receiver to post its receive (a busy peer: pipeline idle time)
  // and moving the bytes once it had.
  std::vector<double> send_blocked_s;
  // Per rank: the part of send_blocked_s during which at least one of its messages was moving
  // (exposed pipeline communication).
  std::vector<double> send_moving_s;
  // Per rank, the most micro-batches whose activations were alive at once (a forward's
  // activations live from its start to the end of its input-gradient pass), in whole
  // micro-batches of the rank: a chunk of an interleaved or V rank counts 1/v. An overlapped
  // forward-backward pair holds both micro-batches for its whole duration.
  std::vector<double> peak_inflight_microbatches;
  std::vector<TraceEvent> trace;
  long events = 0;
  double pipeline_end_s = 0;     // the last compute task's end
  std::vector<double> dp_end_s;  // per rank: when its gradient reduction finished
  // Ranks actually simulated (p x replicas without the symmetry reduction) and the independent
  // replica groups found (1 when the replicas share links, or without replicas).
  int simulated_ranks = 0;
  int replica_groups = 1;
  // Per rank: the rank whose timeline it has (itself when it was simulated; with the symmetry
  // reduction, the alike rank of the group that was). `trace` holds the simulated ranks' events
  // only, each under its own rank: a copy's are its same_as rank's.
  std::vector<int> same_as;
  std::vector<double> end_s;  // per rank: when its last compute task or its reduction ended
};

// Runs each rank's task order of `schedule` (its plug-in's task_order) on the timeline.
PipelineSimResult simulate_pipeline(const PipelineSimInput& in, const IPipelineSchedule& schedule,
                                    bool record_trace = false);

}  // namespace dtplan::des
