// HardwareProfile: one GPU model in one node design with its scale-out network, plus the
// performance model's efficiency parameters and optional calibrated tables
// (docs/file-formats.md). Cluster: a profile and a GPU count.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtplan {

enum class Precision { kBf16, kFp16, kFp8, kTf32, kFp32 };
inline constexpr int kNumPrecisions = 5;
const char* to_string(Precision p);
std::optional<Precision> parse_precision(const std::string& s);
int bytes_per_element(Precision p);  // 2 for bf16/fp16, 1 for fp8, 4 for tf32/fp32

struct GpuSpec {
  std::string name;
  double memory_gib = 0;
  std::array<double, kNumPrecisions> peak_tflops{};  // dense; 0 = not supported
  double hbm_gbps = 0;
  int sm_count = 0;
  // Whether FP8 GEMMs take operands in any layout (Blackwell, SM100+), so per-tensor-scaled FP8
  // training makes no transposed copies; false: only the TN layout (Hopper), every FP8 tensor a
  // GEMM reads along its other axis is transposed (Transformer Engine
  // nvte_is_non_tn_fp8_gemm_supported, common/transformer_engine.cpp @d0067d0).
  bool fp8_non_tn_gemm = false;
  std::string source;
  double peak_flops(Precision p) const;  // FLOP/s
};

struct NodeSpec {
  int gpus_per_node = 0;
  int nvlink_domain_gpus = 0;  // GPUs reachable over NVLink (>= gpus_per_node)
  // GPUs of one NVLink domain a job's ranks fill before the next domain (a multiple of
  // gpus_per_node, <= nvlink_domain_gpus): all of it by default; 64 on an NVL72 rack, whose
  // schedulers allocate 16 of its 18 compute trays to one job's segment.
  int nvlink_domain_job_gpus = 0;
  int placement_domain_gpus() const {
    return nvlink_domain_job_gpus > 0 ? nvlink_domain_job_gpus : nvlink_domain_gpus;
  }
  std::string fabric;  // nvswitch | nvlink-mesh | pcie
  double nvlink_gbps_per_direction = 0;
  double latency_us = 0;
  std::string source;
};

struct ScaleOutSpec {
  int nics_per_node = 0;
  double nic_gbps = 0;  // per NIC, per direction
  double latency_us = 0;
  std::string topology;  // rail-optimized-fat-tree | fat-tree
  double oversubscription = 1.0;
  std::string source;
  double node_gbps() const { return nics_per_node * nic_gbps; }
};

struct HostSpec {
  double memory_gib = 0;
  double pcie_gbps_per_gpu = 0;
  // GPUs behind one PCIe uplink to the CPU (a PCIe switch that serves several GPUs): when every
  // GPU copies to or from host memory at once (activation offload, checkpoint staging) they
  // share it. 1: each GPU's own link reaches the CPU.
  int gpus_per_uplink = 1;
  std::string source;
  // GB/s per direction each GPU gets when `copying` adjacent GPUs of the node copy at once
  // (GPUs 2k and 2k+1 share an uplink when two do).
  double gbps_per_gpu_when(int copying) const { return pcie_gbps_per_gpu / sharing_when(copying); }
  // How many of those share each uplink (at least 1).
  int sharing_when(int copying) const {
    const int sharing = gpus_per_uplink < copying ? gpus_per_uplink : copying;
    return sharing > 1 ? sharing : 1;
  }
  // ... when every GPU of the node copies at once.
  double concurrent_gbps_per_gpu() const { return gbps_per_gpu_when(gpus_per_uplink); }
};

// The performance model's free parameters; each profile says how they were set.
struct EfficiencyParams {
  double gemm_max_fraction = 0.8;
  double gemm_half_saturation_gflop = 1.0;
  // FP8 GEMMs (of the FP8 peak): their own asymptote and half-saturation size; absent in a
  // profile, the BF16 ones.
  double gemm_max_fraction_fp8 = 0.8;
  double gemm_half_saturation_gflop_fp8 = 1.0;
  // MXFP8 (block-scaled) GEMMs, of the FP8 peak; absent in a profile, the FP8 ones.
  double gemm_max_fraction_mxfp8 = 0.8;
  double gemm_half_saturation_gflop_mxfp8 = 1.0;
  // The fused attention kernel (causal, head dim 128) as a fraction of the BF16 peak, forward
  // and backward: e_max x s / (s + s_half), s the kernel's sequence length (per CP chunk).
  // Absent in a profile: gemm_max_fraction at every length (s_half 0).
  double attention_fwd_max_fraction = 0.8, attention_fwd_half_seq = 0;
  double attention_bwd_max_fraction = 0.8, attention_bwd_half_seq = 0;
  // Other attention kernels' curves on this GPU (efficiency.attention_kernels: name -> curve),
  // which a framework profile may select (core/framework_profile.h).
  struct AttentionCurve {
    std::string kernel;
    double fwd_max_fraction = 0, fwd_half_seq = 0, bwd_max_fraction = 0, bwd_half_seq = 0;
  };
  std::vector<AttentionCurve> attention_kernels;
  int gemm_tile_m = 128;
  int gemm_tile_n = 128;
  double memory_bw_fraction = 0.8;
  double nvlink_bw_fraction = 0.75;
  double network_bw_fraction = 0.9;
  // The share of the tensor-core throughput the short-run kernel benchmarks behind the
  // asymptotes and attention curves measure that a training job sustains (power and thermal
  // governors lower the clock under hours of dense compute): multiplies every GEMM and attention
  // efficiency. 1 where the asymptotes were themselves fitted to training runs (A100).
  double sustained_compute_fraction = 1.0;
  double host_dispatch_us = 5;         // host time to launch one kernel (eager framework)
  double collective_overhead_us = 10;  // per collective: launch and rank synchronization
  double comm_compute_slowdown = 0.05;
  // How the values were set: "fitted" (to measured runs by scripts/fit_efficiency.py),
  // "copied" (from a fitted profile of the same GPU and stack), "partial" (some values fitted or
  // copied from a fitted profile, the others initial; the source says which: estimates warn,
  // `profile-partly-fitted`) or "initial" (datasheets and microbenchmarks, not yet fitted:
  // estimates warn, `profile-not-fitted`).
  std::string status = "initial";
  std::string source;
};

// What a profile says about inference (rollout) on its GPU: the hardware profile's optional
// `inference:` section (simulator/cost/inference_cost.h, docs/rl.md). The defaults hold where a
// profile has none; their sources are in docs/rl.md ("Inference parameters").
struct InferenceParams {
  // Fraction of the HBM bandwidth a decode step's weight and KV-cache reads reach.
  double decode_bw_fraction = 0.80;
  // Fraction of the dense peak a compute-bound decode step's GEMMs reach.
  double decode_compute_fraction = 0.50;
  // Fraction of the dense peak a prefill reaches (long GEMMs, chunked prefill).
  double prefill_compute_fraction = 0.55;
  // Fixed time per decode step (scheduling, sampling) and per layer of it (kernel launches and
  // their gaps that CUDA graphs leave).
  double step_overhead_us = 300;
  double layer_overhead_us = 40;
  // What running without CUDA graphs (vLLM enforce_eager) adds per layer of a decode step.
  double eager_layer_overhead_us = 50;
  // One tensor-parallel all-reduce of a decode step's small activations inside a node (the
  // engine's custom all-reduce; across nodes NCCL's cost applies).
  double tp_allreduce_us = 8;
  // Rate at which one replica takes in new weights (model bytes per second: receive buffers,
  // reload into the engine's layout), pipelined with their transport.
  double weight_load_gbps = 70;
  std::string source = "dtplan defaults (docs/rl.md, Inference parameters)";
};

struct CalibrationProvenance {
  std::string source, date, device, tool, software;
};

struct GemmMeasurement {
  Precision precision = Precision::kBf16;
  int64_t m = 0, n = 0, k = 0;
  double tflops = 0;
};

enum class CollectiveOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kBroadcast
};
enum class CommScope { kIntraNode, kInterNode };
const char* to_string(CollectiveOp op);
const char* to_string(CommScope s);

struct CollectiveTable {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CommScope scope = CommScope::kIntraNode;
  int group_size = 0;
  std::vector<std::pair<double, double>> points;  // (message bytes, bus bandwidth GB/s), sorted
};

// Fitted curves (dtplan calibrate), with their goodness of fit and the range they hold in.
// R^2 is computed on log time, so small and large sizes weigh alike.
struct GemmFit {
  Precision precision = Precision::kBf16;
  double max_fraction = 0, half_saturation_gflop = 0;  // the EfficiencyParams model's two knobs
  double min_gflop = 0, max_gflop = 0;                 // measured range
  double r2 = 0, max_rel_residual = 0;
  int points = 0;
};

// t = alpha + bytes / bandwidth on [min_bytes, max_bytes], where bytes is the nccl-tests size.
struct AlphaBetaSegment {
  double min_bytes = 0, max_bytes = 0;
  double alpha_us = 0;
  double bw_gbps = 0;  // algorithm bandwidth of the segment (1e9 bytes/s)
};

struct CollectiveFit {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CommScope scope = CommScope::kIntraNode;
  int group_size = 0;
  std::vector<AlphaBetaSegment> segments;  // by increasing size
  double r2 = 0, max_rel_residual = 0;
  int points = 0;
  double predict_s(double bytes) const;  // extrapolates with the first/last segment
};

struct Calibration {
  CalibrationProvenance provenance;
  std::vector<GemmMeasurement> gemm;
  std::vector<CollectiveTable> collectives;
  std::vector<GemmFit> gemm_fits;
  std::vector<CollectiveFit> collective_fits;
  bool empty() const { return gemm.empty() && collectives.empty(); }
};

struct HardwareProfile {
  std::string name;
  std::string description;
  std::string file;
  GpuSpec gpu;
  NodeSpec node;
  ScaleOutSpec scale_out;
  HostSpec host;
  std::optional<double> checkpoint_write_gbps_per_node;
  std::string storage_source;
  std::optional<double> mtbf_per_gpu_hours;
  std::string reliability_source;
  std::optional<double> usd_per_gpu_hour;
  std::string price_source;
  EfficiencyParams efficiency;
  InferenceParams inference;
  Calibration calibration;
  // The collective algorithm every collective uses where it supports the operation, as
  // NCCL_ALGO pins it ("ring", "tree", ... from `dtplan list collectives`); "" = the fastest
  // registered one per call, as NCCL's tuner picks. Set by a what-if scenario (reports/).
  std::string collective_algorithm;
  // Parameter servers each group priced with the `ps` algorithm pushes to and pulls from (its
  // own: groups do not share them; 0 = one per node of the group); set by `dtplan collective
  // --servers` and the what-if key `parameter_servers`.
  int parameter_servers = 0;
};

HardwareProfile load_profile_file(const std::string& path);

// What a job needs beyond its GPUs: checkpoint storage, the failure rate and the parts of a
// restart, and the data loader. Each value has a built-in default with its source
// (core/cluster_services.cpp, docs/resilience.md); a profile's `storage:`/`reliability:` and a
// cluster YAML's `storage:`, `reliability:`, `restart:` and `data:` sections override them.
struct StorageSpec {
  double write_gbps_per_node = 0;  // one node's path to the checkpoint store
  double read_gbps_per_node = 0;
  double aggregate_write_gbps = 0;  // the file system's total; 0 = bounded by the nodes only
  double aggregate_read_gbps = 0;
  std::string source;
};
struct ReliabilitySpec {
  double mtbf_per_gpu_hours = 0;  // job MTBF = this / GPUs
  std::string source;
};
struct RestartSpec {
  double detection_s = 0;  // until the job knows a rank is gone (collective timeout, health check)
  double requeue_s = 0;    // scheduler requeue and replacement node allocation
  double init_base_s = 0;  // process start, imports, CUDA context at any scale
  double init_per_1k_ranks_s = 0;  // communicator set-up growth with the rank count
  double fast_forward_s = 0;       // data loader back to the consumed sample
  std::string source;
};
struct DataLoaderSpec {
  // What one node's loader delivers; 0 = from the parts below.
  double tokens_per_s_per_node = 0;
  bool pretokenized = true;            // token ids on disk (Megatron .bin/.idx): no decode
  double bytes_per_token_on_disk = 4;  // int32 ids pre-tokenized, ~4 bytes of text otherwise
  double read_gbps_per_node = 0;       // storage read for data (0 = the checkpoint store's)
  int workers_per_node = 0;            // CPU decode/tokenize workers
  double tokens_per_s_per_worker = 0;
  std::string source;
};
// Stragglers: the share of GPUs that run slow at any moment and by how much (no default: a
// what-if input; Lin et al., OSDI 2025, found 42.5% of 3,079 large jobs slowed >= 10%).
struct StragglerSpec {
  double fraction = 0;  // of the GPUs, slow at any one step
  double factor = 1;    // their kernels take this many times longer
};
struct ClusterServices {
  StragglerSpec stragglers;
  StorageSpec storage;
  ReliabilitySpec reliability;
  RestartSpec restart;
  DataLoaderSpec data;
};
// The built-in defaults with their sources, then the profile's storage and reliability.
ClusterServices default_services(const HardwareProfile& hw);

// Nodes of one kind in a heterogeneous cluster (two GPU generations in one job): `nodes` nodes
// of `profile`. Ranks fill the groups in the cluster YAML's order, group by group.
struct DeviceGroup {
  HardwareProfile profile;
  int nodes = 0;
};
inline constexpr int kMaxDeviceGroups = 8;

struct Cluster {
  // A homogeneous cluster's hardware; with device groups, the first group's (the hardware of
  // anything not priced per pipeline stage: storage and restart defaults, the topology's
  // switches).
  HardwareProfile profile;
  int num_gpus = 0;
  // More than one group among the GPUs the job uses (--gpus inside the first group: not).
  bool heterogeneous() const { return groups.size() > 1 && groups_used() > 1; }
  // The groups the job's num_gpus ranks use (the first ones, in order).
  int groups_used() const;
  // The first rank of group g (g == groups_used(): num_gpus).
  int group_first_rank(int g) const;
  std::string file;  // the cluster YAML, when given as one
  // Storage, failures, restarts, data loading as the cluster YAML or flags set them; absent =
  // default_services(profile) (read them through services_of()).
  std::optional<ClusterServices> services;
  // Device groups (cluster YAML `groups:`), all with the same GPUs per node; empty or one for a
  // homogeneous cluster. Pipeline stages are assigned to groups by rank (stage_device_group in
  // core/plan.h); each stage's compute and communication are priced on its group's profile.
  std::vector<DeviceGroup> groups;
  int nodes() const {
    const int g = profile.node.gpus_per_node;
    return (num_gpus + g - 1) / g;
  }
  // Ranks a launch starts on each node: a whole node's GPUs, or all of them on one node.
  int ranks_per_node() const {
    const int g = profile.node.gpus_per_node;
    return num_gpus < g ? num_gpus : g;
  }
  // Every node holds as many ranks (what torchrun, the DeepSpeed launcher and Slurm's
  // --gpus-per-node express): fewer GPUs than a node, or a whole number of nodes.
  bool whole_nodes() const {
    const int g = profile.node.gpus_per_node;
    return g <= 0 || num_gpus <= g || num_gpus % g == 0;
  }
};

ClusterServices services_of(const Cluster& c);
// What one node's data loader delivers (tokens/s): given, or the storage read rate for
// pre-tokenized data, or the decode workers' rate (the lower of the two). Allocates nothing.
// `tp`: Megatron builds the loader on tensor-parallel rank 0 only, so a node runs
// gpus_per_node / tp loaders (their workers: DataLoaderSpec::workers_per_node, 0 = 2 each).
double loader_tokens_per_s_per_node(const Cluster& c, int tp);
// The nodes whose loaders read a step's tokens: those of the first pipeline stage (pp outermost
// in the rank order), nodes / pp, at least one.
double data_loading_nodes(const Cluster& c, int pp);
double loader_tokens_per_s_per_node(const DataLoaderSpec& d, const StorageSpec& st,
                                    int loading_ranks_per_node);
class YamlMap;
// Reads a cluster YAML's storage/reliability/restart/data sections over `s`.
void read_services(YamlMap& y, ClusterServices& s);

// Loads a cluster YAML ({profile, nodes}); `resolve_profile` maps a name or path to a file.
Cluster load_cluster_file(const std::string& path,
                          std::string (*resolve_profile)(const std::string&));

}  // namespace dtplan
