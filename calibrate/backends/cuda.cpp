// The `cuda` backend: GEMMs with cuBLASLt (bf16, fp16, and fp8 e4m3 on compute capability 8.9
// and later; fp32 accumulation, "TN" layout as fp8 requires) on rank 0's GPU, and NCCL
// collectives on one GPU per rank, timed with CUDA events after warm-up, median of repeats.
// MPI (the process group) broadcasts the ncclUniqueId, as nccl-tests does; sub-groups come
// from ncclCommSplit. Built only when CMake finds the CUDA toolkit and NCCL (DTPLAN_CUDA), as a
// loadable module (libdtplan_cuda_backend.so): cuda_loader.cpp registers the name and loads
// it on first use, so other commands do not pay for loading cuBLAS and NCCL at start-up.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "calibrate/i_backend.h"
#include "calibrate/process_group.h"
#include "core/error.h"

namespace dtplan::calibrate {
namespace {

class CudaSession;

void check_cuda(cudaError_t e, const char* call, const ProcessGroup& w) {
  if (e != cudaSuccess)
    throw std::runtime_error(
        fmt::format("{}: {} failed: {}", w.where(), call, cudaGetErrorString(e)));
}
void check_lt(cublasStatus_t s, const char* call, const ProcessGroup& w) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(
        fmt::format("{}: {} failed: cuBLAS status {}", w.where(), call, static_cast<int>(s)));
}
void check_nccl(ncclResult_t r, const char* call, const ProcessGroup& w) {
  if (r != ncclSuccess)
    throw std::runtime_error(
        fmt::format("{}: {} failed: {}", w.where(), call, ncclGetErrorString(r)));
}
#define CUDA_OK(x) check_cuda((x), #x, world_)
#define LT_OK(x) check_lt((x), #x, world_)
#define NCCL_OK(x) check_nccl((x), #x, world_)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class CudaSession : public ICalibrationSession {
 public:
  CudaSession(const BackendOptions& o, const ProcessGroup& world) : o_(o), world_(world) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      throw InputError(SourceLocation{}, "--backend",
                       fmt::format("{}: no CUDA device is visible (use --backend cpu on hosts "
                                   "without GPUs)",
                                   world.where()));
    device_ = world.local_rank() % count;
    CUDA_OK(cudaSetDevice(device_));
    CUDA_OK(cudaGetDeviceProperties(&prop_, device_));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&start_));
    CUDA_OK(cudaEventCreate(&stop_));
    LT_OK(cublasLtCreate(&lt_));
    workspace_bytes_ = 64ull << 20;
    CUDA_OK(cudaMalloc(&workspace_, workspace_bytes_));
    // The world communicator: rank 0 makes the id, MPI broadcasts it (nccl-tests' bootstrap).
    ncclUniqueId id{};
    std::string raw;
    if (world.is_root()) {
      NCCL_OK(ncclGetUniqueId(&id));
      raw.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    raw = world.broadcast(raw, "the NCCL communicator set-up");
    std::copy(raw.begin(), raw.end(), reinterpret_cast<char*>(&id));
    NCCL_OK(ncclCommInitRank(&world_comm_, world.size(), id, world.rank()));
  }

  ~CudaSession() override {
    for (auto& [k, c] : comms_)
      if (c) ncclCommDestroy(c);
    if (world_comm_) ncclCommDestroy(world_comm_);
    if (workspace_) cudaFree(workspace_);
    if (lt_) cublasLtDestroy(lt_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  Environment environment() const override {
    Environment e;
    e.device = prop_.name;
    int drv = 0, rt = 0, nccl = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    ncclGetVersion(&nccl);
    e.software =
        fmt::format("CUDA driver {}.{}, runtime {}.{}, cuBLASLt {}, NCCL {}", drv / 1000,
                    (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10, cublasLtGetVersion(), nccl);
    e.tool = "dtplan calibrate --backend cuda";
    e.precisions = {Precision::kBf16, Precision::kFp16};
    if (prop_.major * 10 + prop_.minor >= 89) e.precisions.push_back(Precision::kFp8);
    // nccl-tests' rule: reserve 1 GiB per 16 GiB of memory (at most 4 GiB) plus 1 GiB, and
    // two buffers of the largest size (no data check).
    const double total = static_cast<double>(prop_.totalGlobalMem);
    const double reserve =
        std::min(4.0 * (1 << 30), std::ceil(total / (16.0 * (1 << 30))) * (1 << 30));
    const double cap = (total - reserve - (1 << 30)) / 2;
    int64_t p2 = 1;
    while (static_cast<double>(p2) * 2 <= cap) p2 *= 2;
    e.max_collective_bytes = p2;
    e.collectives = true;
    return e;
  }

  Measurement measure(const Task& t) override {
    Measurement m;
    m.task = t;
    if (t.kind == TaskKind::kGemm) {
      if (world_.is_root()) m.time_s = time_gemm(t, m.algorithm);
      world_.quiet_barrier();
      return m;
    }
    m.time_s = world_.max(time_collective(t));
    // NCCL does not report the algorithm it picked; record what the user forced, if anything.
    const char* algo = std::getenv("NCCL_ALGO");
    const char* proto = std::getenv("NCCL_PROTO");
    m.algorithm =
        fmt::format("nccl algo={} proto={}", algo ? algo : "auto", proto ? proto : "auto");
    return m;
  }

  void abort_hung() override {
    // Called from the watchdog thread while a collective hangs.
    for (auto& [k, c] : comms_)
      if (c) ncclCommAbort(c);
    if (world_comm_) ncclCommAbort(world_comm_);
  }

 private:
  // One operation's time on the stream: warm-up, then --repeats timed batches of enough
  // iterations that a batch lasts about a millisecond (CUDA events); the median is kept.
  template <typename Run>
  double time_on_stream(const Run& run) {
    for (int i = 0; i < std::max(1, o_.warmup); ++i) run();
    CUDA_OK(cudaStreamSynchronize(stream_));
    auto batch_ms = [&](int iters) {
      CUDA_OK(cudaEventRecord(start_, stream_));
      for (int i = 0; i < iters; ++i) run();
      CUDA_OK(cudaEventRecord(stop_, stream_));
      CUDA_OK(cudaEventSynchronize(stop_));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
      return static_cast<double>(ms);
    };
    const int iters = static_cast<int>(std::clamp(1.0 / std::max(batch_ms(1), 1e-4), 1.0, 100.0));
    std::vector<double> times;
    times.reserve(static_cast<size_t>(o_.repeats));
    for (int r = 0; r < o_.repeats; ++r) times.push_back(batch_ms(iters) * 1e-3 / iters);
    return median(times);
  }

  double time_gemm(const Task& t, std::string& algo_name) {
    cudaDataType_t ab = CUDA_R_16BF, cd = CUDA_R_16BF;
    size_t elem = 2;
    if (t.precision == Precision::kFp16) ab = cd = CUDA_R_16F;
    if (t.precision == Precision::kFp8) ab = CUDA_R_8F_E4M3, elem = 1;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    const size_t m = static_cast<size_t>(t.m), n = static_cast<size_t>(t.n),
                 k = static_cast<size_t>(t.k);
    CUDA_OK(cudaMalloc(&a, m * k * elem));
    CUDA_OK(cudaMalloc(&b, k * n * elem));
    CUDA_OK(cudaMalloc(&c, m * n * 2));
    CUDA_OK(cudaMemsetAsync(a, 0, m * k * elem, stream_));
    CUDA_OK(cudaMemsetAsync(b, 0, k * n * elem, stream_));
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    double result = 0;
    try {
      LT_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      // Column-major: A stored k x m (transposed), B k x n, C/D m x n.
      LT_OK(cublasLtMatrixLayoutCreate(&la, ab, t.k, t.m, t.k));
      LT_OK(cublasLtMatrixLayoutCreate(&lb, ab, t.k, t.n, t.k));
      LT_OK(cublasLtMatrixLayoutCreate(&lc, cd, t.m, t.n, t.m));
      LT_OK(cublasLtMatmulPreferenceCreate(&pref));
      LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &workspace_bytes_, sizeof(workspace_bytes_)));
      cublasLtMatmulHeuristicResult_t heur{};
      int found = 0;
      LT_OK(cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, lc, lc, pref, 1, &heur, &found));
      if (found == 0)
        throw std::runtime_error(
            fmt::format("{}: cuBLASLt has no algorithm for {}", world_.where(), t.key()));
      const float alpha = 1.0f, beta = 0.0f;
      auto run = [&] {
        LT_OK(cublasLtMatmul(lt_, op, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &heur.algo,
                             workspace_, workspace_bytes_, stream_));
      };
      result = time_on_stream(run);
      algo_name = "cublasLt";
    } catch (...) {
      cleanup_gemm(op, la, lb, lc, pref, a, b, c);
      throw;
    }
    cleanup_gemm(op, la, lb, lc, pref, a, b, c);
    return result;
  }

  static void cleanup_gemm(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                           cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                           cublasLtMatmulPreference_t pref, void* a, void* b, void* c) {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }

  ncclComm_t comm_for(const Task& t, bool& member) {
    const std::vector<int> members = world_.group_members(t.scope, t.group_size);
    if (members.empty())
      throw InputError(
          SourceLocation{}, "--ops",
          fmt::format("no {} group of {} ranks in this run", to_string(t.scope), t.group_size));
    member = std::find(members.begin(), members.end(), world_.rank()) != members.end();
    if (static_cast<int>(members.size()) == world_.size()) return world_comm_;
    const auto key = std::make_pair(static_cast<int>(t.scope), t.group_size);
    auto it = comms_.find(key);
    if (it != comms_.end()) return it->second;
    ncclComm_t c = nullptr;
    NCCL_OK(
        ncclCommSplit(world_comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, world_.rank(), &c, nullptr));
    comms_[key] = c;
    return c;
  }

  double time_collective(const Task& t) {
    bool member = false;
    ncclComm_t comm = comm_for(t, member);
    if (!member || !comm) return 0;
    int n = 0, me = 0;
    NCCL_OK(ncclCommCount(comm, &n));
    NCCL_OK(ncclCommUserRank(comm, &me));
    // bf16 elements, as training sends; sizes are nccl-tests' (see calibrate/task.h).
    const size_t elems = std::max<size_t>(1, static_cast<size_t>(t.bytes) / 2);
    const size_t per_peer = std::max<size_t>(1, elems / static_cast<size_t>(n));
    void *send = nullptr, *recv = nullptr;
    CUDA_OK(cudaMalloc(&send, elems * 2));
    CUDA_OK(cudaMalloc(&recv, elems * 2));
    auto run = [&] {
      switch (t.op) {
        case CollectiveOp::kAllReduce:
          NCCL_OK(ncclAllReduce(send, recv, elems, ncclBfloat16, ncclSum, comm, stream_));
          break;
        case CollectiveOp::kAllGather:
          NCCL_OK(ncclAllGather(send, recv, per_peer, ncclBfloat16, comm, stream_));
          break;
        case CollectiveOp::kReduceScatter:
          NCCL_OK(ncclReduceScatter(send, recv, per_peer, ncclBfloat16, ncclSum, comm, stream_));
          break;
        case CollectiveOp::kAllToAll: {
          NCCL_OK(ncclGroupStart());
          for (int p = 0; p < n; ++p) {
            NCCL_OK(ncclSend(static_cast<char*>(send) + p * per_peer * 2, per_peer, ncclBfloat16, p,
                             comm, stream_));
            NCCL_OK(ncclRecv(static_cast<char*>(recv) + p * per_peer * 2, per_peer, ncclBfloat16, p,
                             comm, stream_));
          }
          NCCL_OK(ncclGroupEnd());
          break;
        }
        case CollectiveOp::kSendRecv: {
          // nccl-tests sendrecv: to the next rank, from the previous (self when alone).
          NCCL_OK(ncclGroupStart());
          NCCL_OK(ncclSend(send, elems, ncclBfloat16, (me + 1) % n, comm, stream_));
          NCCL_OK(ncclRecv(recv, elems, ncclBfloat16, (me + n - 1) % n, comm, stream_));
          NCCL_OK(ncclGroupEnd());
          break;
        }
        case CollectiveOp::kBroadcast:
          NCCL_OK(ncclBroadcast(send, recv, elems, ncclBfloat16, 0, comm, stream_));
          break;
      }
    };
    double result = 0;
    try {
      result = time_on_stream(run);
    } catch (...) {
      cudaFree(send);
      cudaFree(recv);
      throw;
    }
    cudaFree(send);
    cudaFree(recv);
    return result;
  }

  BackendOptions o_;
  const ProcessGroup& world_;
  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  ncclComm_t world_comm_ = nullptr;
  std::map<std::pair<int, int>, ncclComm_t> comms_;
};

class CudaBackend : public ICalibrationBackend {
 public:
  std::unique_ptr<ICalibrationSession> open(const BackendOptions& o,
                                            const ProcessGroup& world) const override {
    return std::make_unique<CudaSession>(o, world);
  }
};

}  // namespace
}  // namespace dtplan::calibrate

// The module's entry point (cuda_loader.cpp): a backend object owned by the caller.
extern "C" dtplan::calibrate::ICalibrationBackend* dtplan_cuda_backend_create() {
  return new dtplan::calibrate::CudaBackend();
}
