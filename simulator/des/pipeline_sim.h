// Discrete-event simulation of one training step's pipeline: every (stage, chunk, micro-batch,
// pass) is a task on its stage's compute stream, in the order the schedule prescribes, waiting
// for its input from the neighbouring stage, which arrives over a point-to-point link
// (FlowNetwork: concurrent sends on one link share it). Costs come from the same per-stage
// F/B/W times the analytic estimator uses; the simulation replaces the closed-form bubble by the
// timeline the schedule actually produces.
#pragma once

#include <string>
#include <vector>

namespace dtplan::des {

// ZB-H1 splits the backward into B (input gradients, sent upstream at once) and W (weight
// gradients, run where the pipeline would idle); the others run B and W as one task.
enum class PipelineOrder { kGPipe, kOneFOneB, kInterleaved, kZbH1 };

struct PipelineSimInput {
  int p = 1;  // pipeline ranks
  int v = 1;  // chunks per rank (interleaved)
  int m = 1;  // micro-batches
  // Per rank, one micro-batch through ALL of the rank's chunks (as the analytic estimator):
  std::vector<double> f, b, w;
  double p2p_bytes = 0;        // activation (or gradient) per message
  double p2p_bytes_per_s = 0;  // link capacity between neighbouring ranks (0: free)
  bool link_sharing = true;
};

struct TraceEvent {
  int stage;
  std::string name;  // "F3.1" = forward of micro-batch 3, chunk 1 ("W3.0": weight gradients)
  double start_s, end_s;
};

struct PipelineSimResult {
  double makespan_s = 0;
  std::vector<double> busy_s;  // per rank
  // Per rank, the most micro-batches whose activations were alive at once (a forward's
  // activations live from its start to the end of its input-gradient pass), in whole
  // micro-batches of the rank: a chunk of an interleaved rank counts 1/v.
  std::vector<double> peak_inflight_microbatches;
  std::vector<TraceEvent> trace;
  long events = 0;
};

PipelineSimResult simulate_pipeline(const PipelineSimInput& in, PipelineOrder order,
                                    bool record_trace = false);

}  // namespace dtplan::des
