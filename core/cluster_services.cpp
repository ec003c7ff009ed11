// Built-in defaults of what a job needs beyond its GPUs, each with its source, and their
// override from a profile and a cluster YAML (docs/resilience.md, docs/file-formats.md).
#include <algorithm>

#include "core/hardware.h"
#include "core/yaml_reader.h"

namespace dtplan {

namespace {

// Llama 3 (Dubey et al. 2024, arXiv:2407.21783 §3.3.1): Tectonic sustains 2 TB/s (7 TB/s
// peak) for the 16,384-GPU job's 2,048 nodes: about 1 GB/s per node (dtplan's arithmetic).
constexpr double kStorageGbpsPerNode = 1.0;
constexpr const char* kStorageSource =
    "default: Llama 3 (arXiv:2407.21783 §3.3.1) Tectonic sustains 2 TB/s for 2,048 nodes, "
    "~1 GB/s per node (dtplan's arithmetic); no aggregate limit";
// Llama 3 §3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs: job MTBF 3.09 h.
constexpr double kMtbfPerGpuHours = 54.0 * 24.0 / 419.0 * 16384.0;
constexpr const char* kMtbfSource =
    "default: Llama 3 (arXiv:2407.21783 §3.3.4) 419 unexpected interruptions in 54 days on "
    "16,384 H100 (job MTBF 3.09 h x 16,384 GPUs)";
// Detection: Megatron-LM's in-process restart hard progress timeout, 90 s
// (megatron/training/arguments.py --inprocess-hard-timeout, NVIDIA/Megatron-LM d98e8a6); the
// bare PyTorch NCCL watchdog is 600 s (ProcessGroupNCCL.hpp kProcessGroupNCCLDefaultTimeout).
// Requeue: 5 min, the queue time Kokolis et al. (arXiv:2410.21680, HPCA 2025) model for Meta's
// research clusters. Init: NCCLX (arXiv:2510.20171) reports stock NCCL initialising 96K GPUs in
// ~265 s, 2.76 s per 1,000 ranks, plus 30 s of process start (MegaScale, NSDI 2024: < 30 s at
// > 10K GPUs after its fixes). Fast-forward: Megatron resumes its sampler at
// consumed_samples, no replay (megatron/training/datasets/data_samplers.py
// MegatronPretrainingSampler, d98e8a6).
constexpr double kDetectionS = 90, kRequeueS = 300, kInitBaseS = 30, kInitPer1kS = 265.0 / 96.0,
                 kFastForwardS = 0;
constexpr const char* kRestartSource =
    "default: detection 90 s (Megatron-LM --inprocess-hard-timeout, d98e8a6; bare PyTorch "
    "NCCL watchdog 600 s), requeue 300 s (Kokolis et al. arXiv:2410.21680), init 30 s + 2.76 s "
    "per 1,000 ranks (NCCLX arXiv:2510.20171: stock NCCL ~265 s at 96K GPUs; MegaScale NSDI'24 "
    "< 30 s start), fast-forward 0 s (Megatron MegatronPretrainingSampler starts at "
    "consumed_samples)";
// Data: Megatron reads pre-tokenized .bin files of int32 ids for vocabularies of 65,500 and
// more (megatron/core/datasets/indexed_dataset.py DType.optimal_dtype, d98e8a6); --num-workers
// defaults to 2 per rank (megatron/training/arguments.py); HF tokenizers on one thread ~1.7 MB/s
// of text (openai/tiktoken README perf.svg, read off the chart), ~0.43 M tokens/s at 4 B per
// token.
constexpr double kBytesPerToken = 4, kTokensPerSPerWorker = 1.7e6 / 4.0;
constexpr int kWorkersPerRank = 2;
constexpr const char* kDataSource =
    "default: pre-tokenized int32 ids (Megatron indexed_dataset.py optimal_dtype, d98e8a6) read "
    "at the storage read rate; on-the-fly: 2 workers (Megatron --num-workers) per loading rank "
    "(TP rank 0) x 0.425 M tokens/s (HF tokenizers ~1.7 MB/s per thread, tiktoken README perf "
    "chart; 4 B per token)";

}  // namespace

ClusterServices default_services(const HardwareProfile& hw) {
  ClusterServices s;
  s.storage.write_gbps_per_node = hw.checkpoint_write_gbps_per_node.value_or(kStorageGbpsPerNode);
  s.storage.read_gbps_per_node = s.storage.write_gbps_per_node;
  s.storage.source = hw.checkpoint_write_gbps_per_node ? hw.storage_source : kStorageSource;
  s.reliability.mtbf_per_gpu_hours = hw.mtbf_per_gpu_hours.value_or(kMtbfPerGpuHours);
  s.reliability.source = hw.mtbf_per_gpu_hours ? hw.reliability_source : kMtbfSource;
  s.restart = {kDetectionS, kRequeueS, kInitBaseS, kInitPer1kS, kFastForwardS, kRestartSource};
  s.data.pretokenized = true;
  s.data.bytes_per_token_on_disk = kBytesPerToken;
  s.data.workers_per_node = 0;  // kWorkersPerRank per loading rank (the plan's TP rank 0s)
  s.data.tokens_per_s_per_worker = kTokensPerSPerWorker;
  s.data.source = kDataSource;
  return s;
}

ClusterServices services_of(const Cluster& c) {
  return c.services ? *c.services : default_services(c.profile);
}

double loader_tokens_per_s_per_node(const Cluster& c, int tp) {
  const int loading =
      std::max(1, std::min(c.num_gpus, c.profile.node.gpus_per_node) / std::max(1, tp));
  if (c.services)
    return loader_tokens_per_s_per_node(c.services->data, c.services->storage, loading);
  // Defaults without building the sourced struct (the estimator's hot path allocates nothing).
  const double read = c.profile.checkpoint_write_gbps_per_node.value_or(kStorageGbpsPerNode);
  return read * 1e9 / kBytesPerToken;
}

double data_loading_nodes(const Cluster& c, int pp) {
  return std::max(1.0, static_cast<double>(c.nodes()) / std::max(1, pp));
}

double loader_tokens_per_s_per_node(const DataLoaderSpec& d, const StorageSpec& st,
                                    int loading_ranks_per_node) {
  if (d.tokens_per_s_per_node > 0) return d.tokens_per_s_per_node;
  const double read_gbps = d.read_gbps_per_node > 0 ? d.read_gbps_per_node : st.read_gbps_per_node;
  const double read = read_gbps * 1e9 / std::max(1e-9, d.bytes_per_token_on_disk);
  if (d.pretokenized) return read;
  const double workers = d.workers_per_node > 0
                             ? d.workers_per_node
                             : kWorkersPerRank * std::max(1, loading_ranks_per_node);
  return std::min(read, workers * d.tokens_per_s_per_worker);
}

void read_services(YamlMap& y, ClusterServices& s) {
  if (auto m = y.opt_map("storage")) {
    auto& st = s.storage;
    if (auto v = m->opt_double_in("write_gbps_per_node", 0.001, 1e6)) {
      st.write_gbps_per_node = *v;
      st.read_gbps_per_node = *v;  // reads at the write rate unless given
    }
    if (auto v = m->opt_double_in("read_gbps_per_node", 0.001, 1e6)) st.read_gbps_per_node = *v;
    if (auto v = m->opt_double_in("aggregate_write_gbps", 0.001, 1e9)) st.aggregate_write_gbps = *v;
    if (auto v = m->opt_double_in("aggregate_read_gbps", 0.001, 1e9)) st.aggregate_read_gbps = *v;
    st.source = m->get_string("source");
    m->finish();
  }
  if (auto m = y.opt_map("reliability")) {
    s.reliability.mtbf_per_gpu_hours = m->get_double_in("mtbf_per_gpu_hours", 1, 1e12);
    s.reliability.source = m->get_string("source");
    m->finish();
  }
  if (auto m = y.opt_map("restart")) {
    auto& r = s.restart;
    if (auto v = m->opt_double("detection_s", 0, true)) r.detection_s = *v;
    if (auto v = m->opt_double("requeue_s", 0, true)) r.requeue_s = *v;
    if (auto v = m->opt_double("init_base_s", 0, true)) r.init_base_s = *v;
    if (auto v = m->opt_double("init_per_1k_ranks_s", 0, true)) r.init_per_1k_ranks_s = *v;
    if (auto v = m->opt_double("fast_forward_s", 0, true)) r.fast_forward_s = *v;
    r.source = m->get_string("source");
    m->finish();
  }
  if (auto m = y.opt_map("data")) {
    auto& d = s.data;
    if (auto v = m->opt_double("loader_tokens_per_s_per_node", 0)) d.tokens_per_s_per_node = *v;
    if (auto v = m->opt_bool("pretokenized")) d.pretokenized = *v;
    if (auto v = m->opt_double("bytes_per_token_on_disk", 0)) d.bytes_per_token_on_disk = *v;
    if (auto v = m->opt_double("read_gbps_per_node", 0)) d.read_gbps_per_node = *v;
    if (auto v = m->opt_int("workers_per_node", 1)) {
      if (*v > 100000) m->fail("workers_per_node", "more than 100,000 workers per node");
      d.workers_per_node = static_cast<int>(*v);
    }
    if (auto v = m->opt_double("tokens_per_s_per_worker", 0)) d.tokens_per_s_per_worker = *v;
    d.source = m->get_string("source");
    m->finish();
  }
}

}  // namespace dtplan
