// The data stall: the part of a step spent waiting for the next batch. Megatron's data
// loader runs on tensor-parallel rank 0 of the first and last pipeline stages
// (megatron/core/utils.py get_batch_on_this_tp_rank, NVIDIA/Megatron-LM d98e8a6), so the
// nodes holding the first stage read the step's tokens (the last stage's read the labels, the
// same count); its workers prefetch while the step runs (PyTorch DataLoader prefetch_factor 2),
// so only what they cannot deliver within a step shows:
//   stall = max(0, tokens per loading node / loader tokens/s per node - step),
// with the step's straggler delay included (the loader keeps reading while the step waits for
// a slow GPU: runs_beside_step).
// With the default pre-tokenized loader (1 GB/s of int32 ids: 250 M tokens/s per node) this
// is zero for every plan dtplan searches; a slow tokenizer or a `--loader-tokens-per-s-per-node`
// below the consumption rate makes it show.
#include <algorithm>

#include "core/registry.h"
#include "simulator/step/step_terms.h"

namespace dtplan {
namespace {

class DataStall final : public IStepTerm {
 public:
  const char* key() const override { return "data_stall_s"; }
  const char* label() const override { return "data stall"; }
  double seconds(const ModelSpec&, const Cluster& c, const Workload& w, const Plan& p,
                 const Estimate& e) const override {
    const double rate = loader_tokens_per_s_per_node(c, p.tp);
    if (!(rate > 0)) return 0;
    const double gbs = static_cast<double>(p.gbs > 0 ? p.gbs : w.global_batch);
    const double tokens = gbs * static_cast<double>(w.seq_len);
    const double loading_nodes = data_loading_nodes(c, p.pp);
    return std::max(0.0, tokens / loading_nodes / rate - e.step_time_s);
  }
  bool runs_beside_step() const override { return true; }
};

}  // namespace
DTPLAN_REGISTER(IStepTerm, DataStall, "data-stall",
                "waiting for the data loader (tokens per loading node / loader rate - step)")
}  // namespace dtplan
