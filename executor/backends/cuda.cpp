// The `cuda` executor backend: a plan's step on the GPUs, one per rank.
//   - GEMMs: cuBLASLt in the plan's precision (bf16, fp16; fp8 e4m3 inputs with bf16 output on
//     compute capability 8.9 and later, "TN" layout as FP8 requires; fp32 accumulation), the
//     op's (M, N, K) `count` times; ops FP8 training keeps in 16 bits run in bf16;
//   - attention: its Q K^T and P V GEMM families in bf16 through cuBLASLt, FLOPs adding up to
//     the op's (no fused kernel, no softmax);
//   - element-wise ops: a device-to-device copy of the op's bytes;
//   - collectives: NCCL in bf16, in communicators split (ncclCommSplit) from the rank grid's
//     groups; the world communicator's id travels over MPI, as nccl-tests does;
//   - memory: from the stream-ordered allocator (cudaMallocAsync / cudaFreeAsync, which do not
//     synchronize the device) and set, so an out-of-memory is real; the device's own use
//     (cudaMemGetInfo) is sampled after every allocation and at every step's end.
//   - pipeline transfers: ncclSend / ncclRecv; the activations one rank sends another, and the
//     gradients, each on their own two-rank communicator (ids gathered and broadcast over MPI
//     once, communicators created together in one NCCL group). A send is queued on its link's
//     own stream behind the compute that produced it and does not block the rank; a receive runs
//     on the compute stream and waits for its sender. That is the cpu backend's (and the
//     deadlock test's) semantics: sends complete on their own, receives wait. NCCL matches a
//     communicator's point-to-point operations in issue order; every schedule receives each
//     link's messages in the order they were sent (tests/unit/executor:
//     EveryPairReceivesInTheOrderItsSenderSends; per rank pair alone the V schedules would not).
// Each instruction is timed with CUDA events on the compute stream and synchronized (the step
// then includes one host synchronization per op). Built as a module (libdtplan_cuda_executor.so)
// loaded on first use by cuda_loader.cpp, as the calibrator's CUDA backend is.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "calibrate/process_group.h"
#include "core/error.h"
#include "executor/i_exec_backend.h"

namespace dtplan::exec {
namespace {

void check_cuda(cudaError_t e, const char* call, const calibrate::ProcessGroup& w) {
  if (e != cudaSuccess)
    throw std::runtime_error(
        fmt::format("{}: {} failed: {}", w.where(), call, cudaGetErrorString(e)));
}
void check_lt(cublasStatus_t s, const char* call, const calibrate::ProcessGroup& w) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(
        fmt::format("{}: {} failed: cuBLAS status {}", w.where(), call, static_cast<int>(s)));
}
void check_nccl(ncclResult_t r, const char* call, const calibrate::ProcessGroup& w) {
  if (r != ncclSuccess)
    throw std::runtime_error(
        fmt::format("{}: {} failed: {}", w.where(), call, ncclGetErrorString(r)));
}
#define CUDA_OK(x) check_cuda((x), #x, world_)
#define LT_OK(x) check_lt((x), #x, world_)
#define NCCL_OK(x) check_nccl((x), #x, world_)

// The first failure of the calls between ncclGroupStart and ncclGroupEnd: the group is always
// ended (a thread left inside an open group defers every later NCCL call), then it is thrown.
struct GroupStatus {
  ncclResult_t r = ncclSuccess;
  const char* call = nullptr;
  void keep(ncclResult_t x, const char* c) {
    if (r == ncclSuccess && x != ncclSuccess) r = x, call = c;
  }
  void end(const calibrate::ProcessGroup& w) {
    keep(ncclGroupEnd(), "ncclGroupEnd");
    if (r != ncclSuccess) check_nccl(r, call, w);
  }
};

struct Matmul {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class CudaExecSession : public IExecSession {
 public:
  CudaExecSession(const ExecBackendOptions& o, const calibrate::ProcessGroup& world)
      : o_(o), world_(world) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      throw InputError(SourceLocation{}, "--backend",
                       fmt::format("{}: no CUDA device is visible (use --backend cpu on hosts "
                                   "without GPUs)",
                                   world.where()));
    CUDA_OK(cudaSetDevice(world.local_rank() % count));
    // The memory model's blocks come from the stream-ordered allocator: cudaMalloc and cudaFree
    // can synchronize the device, which would wait for pipeline sends still in flight and turn
    // them into blocking sends (NCCL user guide, "Using multiple NCCL communicators
    // concurrently"). The pool keeps what it has reserved (release threshold: all), so the
    // device's use sampled by cudaMemGetInfo is the high-water mark of what was held at once.
    cudaMemPool_t pool = nullptr;
    CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, world.local_rank() % count));
    uint64_t keep = UINT64_MAX;
    CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CUDA_OK(cudaGetDeviceProperties(&prop_, world.local_rank() % count));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&start_));
    CUDA_OK(cudaEventCreate(&stop_));
    LT_OK(cublasLtCreate(&lt_));
    workspace_bytes_ = 64ull << 20;
    CUDA_OK(cudaMalloc(&workspace_, workspace_bytes_));
    fp8_ = o.precision == Precision::kFp8 && prop_.major * 10 + prop_.minor >= 89;
    if (o.precision == Precision::kFp8 && !fp8_)
      throw InputError(SourceLocation{}, "--precision",
                       fmt::format("{}: {} has no FP8 tensor cores (compute capability {}.{})",
                                   world.where(), prop_.name, prop_.major, prop_.minor));
    if (world.size() > 1) {
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
    comms_.fill(nullptr);
    sample_memory();
  }

  ~CudaExecSession() override {
    for (auto& [key, mm] : matmuls_) {
      if (mm.a) cublasLtMatrixLayoutDestroy(mm.a);
      if (mm.b) cublasLtMatrixLayoutDestroy(mm.b);
      if (mm.c) cublasLtMatrixLayoutDestroy(mm.c);
      if (mm.op) cublasLtMatmulDescDestroy(mm.op);
    }
    // ncclCommDestroy waits for the communicator's work: where a transfer is still pending (an
    // error path, a peer gone), the communicators are aborted instead; after the watchdog's
    // abort_hung they are left alone.
    bool idle = cudaStreamQuery(stream_) != cudaErrorNotReady;
    for (auto& [key, l] : send_links_)
      idle = idle && (!l.stream || cudaStreamQuery(l.stream) != cudaErrorNotReady);
    const auto end_comm = [&](ncclComm_t c) {
      if (c && !aborted_) (idle ? ncclCommDestroy(c) : ncclCommAbort(c));
    };
    for (auto& c : comms_) end_comm(c);
    for (auto* links : {&send_links_, &recv_links_})
      for (auto& [key, l] : *links) {
        end_comm(l.comm);
        if (l.stream) cudaStreamDestroy(l.stream);
      }
    end_comm(world_comm_);
    if (ready_) cudaEventDestroy(ready_);
    for (void* p : {a_, b_, c_, send_, recv_, p2p_send_, p2p_recv_, workspace_})
      if (p) cudaFree(p);
    if (lt_) cublasLtDestroy(lt_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  ExecEnvironment environment() const override {
    ExecEnvironment e;
    e.device = prop_.name;
    int drv = 0, rt = 0, nccl = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    ncclGetVersion(&nccl);
    e.software =
        fmt::format("CUDA driver {}.{}, runtime {}.{}, cuBLASLt {}, NCCL {}", drv / 1000,
                    (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10, cublasLtGetVersion(), nccl);
    e.notes.push_back(fmt::format("GEMMs through cuBLASLt in {} (fp32 accumulation, TN layout)",
                                  fp8_ ? "fp8 e4m3 with bf16 output" : to_string(o_.precision)));
    e.notes.emplace_back(
        "attention as its Q K^T and P V GEMMs in bf16 (no fused kernel, no softmax)");
    e.notes.emplace_back("element-wise ops as device-to-device copies of the op's bytes");
    e.notes.emplace_back(
        "collectives through NCCL in bf16; each op timed with CUDA events and synchronized");
    e.notes.emplace_back(
        "pipeline sends queued on their own stream (not timed: they do not block the rank); "
        "receives timed from the wait for the sender to the data's arrival");
    e.notes.emplace_back(
        "peak memory: the executor's allocations (stream-ordered, cudaMallocAsync) and the "
        "device's own use (cudaMemGetInfo), which includes NCCL's buffers: one communicator per "
        "group kind and per pipeline link (activations and gradients to and from each peer), "
        "where a framework holds one pipeline communicator");
    if (o_.scale > 1)
      e.notes.insert(e.notes.begin(),
                     fmt::format("shapes of the model scaled down 1/{}", o_.scale));
    return e;
  }

  void make_group(GroupKind kind, int color, int key, int) override {
    if (!world_comm_) return;
    ncclComm_t c = nullptr;
    NCCL_OK(ncclCommSplit(world_comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c, nullptr));
    comms_[static_cast<size_t>(kind)] = c;
  }

  void prepare(const RankProgram& prog) override {
    size_t a = 1, b = 1, c = 1, comm = 1, p2p = 1;
    std::set<LinkKey> send_to, recv_from;
    for (const Instr& i : prog.instrs) {
      if (i.modelled) continue;
      const Op& op = i.op;
      if (i.kind == InstrKind::kSend || i.kind == InstrKind::kRecv) {
        (i.kind == InstrKind::kSend ? send_to : recv_from).insert(link_key(i));
        p2p = std::max(p2p, static_cast<size_t>(std::max(i.bytes, 1.0)));
      } else if (i.kind == InstrKind::kCompute && op.kind == OpKind::kGemm) {
        a = std::max(a, static_cast<size_t>(op.m * op.k));
        b = std::max(b, static_cast<size_t>(op.k * op.n));
        c = std::max(c, static_cast<size_t>(op.m * op.n));
      } else if (i.kind == InstrKind::kCompute && op.kind == OpKind::kAttention) {
        const size_t s = static_cast<size_t>(std::max<int64_t>(op.attn_seq, 1));
        const size_t d = static_cast<size_t>(std::max(op.attn_head_dim, 1));
        a = std::max(a, s * std::max(s, d));
        b = std::max(b, s * std::max(s, d));
        c = std::max(c, s * std::max(s, d));
      } else if (i.kind == InstrKind::kCompute) {
        a = std::max(a, static_cast<size_t>(op.bytes / 4) + 1);
        c = std::max(c, static_cast<size_t>(op.bytes / 4) + 1);
      } else if (i.kind == InstrKind::kCollective) {
        comm = std::max(comm, static_cast<size_t>(op.bytes) + 2);
      }
    }
    // 2 bytes per element (bf16); operands are reused by every op.
    CUDA_OK(cudaMalloc(&a_, a * 2));
    CUDA_OK(cudaMalloc(&b_, b * 2));
    CUDA_OK(cudaMalloc(&c_, c * 2));
    CUDA_OK(cudaMalloc(&send_, comm));
    CUDA_OK(cudaMalloc(&recv_, comm));
    a_bytes_ = a * 2, c_bytes_ = c * 2, comm_bytes_ = comm;
    if (world_comm_) {  // every rank takes part: the id exchange is collective
      // One buffer each way: the sends in flight read the same (timing-only) bytes.
      CUDA_OK(cudaMalloc(&p2p_send_, p2p));
      CUDA_OK(cudaMalloc(&p2p_recv_, p2p));
      CUDA_OK(cudaMemsetAsync(p2p_send_, 0, p2p, stream_));
      open_pipeline_links(send_to, recv_from);
    }
    CUDA_OK(cudaMemsetAsync(a_, 0, a * 2, stream_));
    CUDA_OK(cudaMemsetAsync(b_, 0, b * 2, stream_));
    CUDA_OK(cudaMemsetAsync(send_, 0, comm, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    sample_memory();
  }

  void* allocate(double bytes) override {
    void* p = nullptr;
    const size_t n = static_cast<size_t>(std::max(1.0, bytes));
    const cudaError_t e = cudaMallocAsync(&p, n, stream_);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: the run reports the out-of-memory and ends
      throw std::bad_alloc();
    }
    CUDA_OK(e);
    CUDA_OK(cudaMemsetAsync(p, 0, n, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    sample_memory();
    return p;
  }
  void release(void* p, double) override { CUDA_OK(cudaFreeAsync(p, stream_)); }

  double run(const Instr& i) override {
    CUDA_OK(cudaEventRecord(start_, stream_));
    switch (i.kind) {
      case InstrKind::kCompute:
        compute(i.op);
        break;
      case InstrKind::kCollective:
        collective(i);
        break;
      case InstrKind::kSend:
        send(i);
        break;
      case InstrKind::kRecv:
        recv(i);
        break;
      default:
        break;
    }
    CUDA_OK(cudaEventRecord(stop_, stream_));
    CUDA_OK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e-3 * static_cast<double>(ms);
  }

  void finish_sends() override {
    for (auto& [peer, l] : send_links_) CUDA_OK(cudaStreamSynchronize(l.stream));
    CUDA_OK(cudaStreamSynchronize(stream_));
    sample_memory();
  }
  double device_peak_bytes() const override { return device_peak_; }
  bool holds_runtime_buffers() const override { return true; }
  Precision gemm_precision(const Op& op) const override {
    if (fp8_ && !op.high_precision) return Precision::kFp8;
    return o_.precision == Precision::kFp16 ? Precision::kFp16 : Precision::kBf16;
  }
  void abort_hung() override {
    for (auto& c : comms_)
      if (c) ncclCommAbort(c);
    for (auto* links : {&send_links_, &recv_links_})
      for (auto& [peer, l] : *links)
        if (l.comm) ncclCommAbort(l.comm);
    if (world_comm_) ncclCommAbort(world_comm_);
    aborted_ = true;  // the destructor then leaves the communicators alone
  }

 private:
  void sample_memory() {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess)
      device_peak_ = std::max(device_peak_, static_cast<double>(total - free));
  }

  Matmul& matmul(int64_t m, int64_t n, int64_t k, bool fp8) {
    auto [it, fresh] = matmuls_.try_emplace({m, n, k, fp8});
    Matmul& mm = it->second;
    if (!fresh) return mm;
    const cudaDataType_t ab = fp8                                ? CUDA_R_8F_E4M3
                              : o_.precision == Precision::kFp16 ? CUDA_R_16F
                                                                 : CUDA_R_16BF;
    const cudaDataType_t cd = o_.precision == Precision::kFp16 && !fp8 ? CUDA_R_16F : CUDA_R_16BF;
    LT_OK(cublasLtMatmulDescCreate(&mm.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_OK(cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT_OK(cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    // Column-major: A stored k x m (transposed), B k x n, C/D m x n.
    LT_OK(cublasLtMatrixLayoutCreate(&mm.a, ab, static_cast<uint64_t>(k), static_cast<uint64_t>(m),
                                     k));
    LT_OK(cublasLtMatrixLayoutCreate(&mm.b, ab, static_cast<uint64_t>(k), static_cast<uint64_t>(n),
                                     k));
    LT_OK(cublasLtMatrixLayoutCreate(&mm.c, cd, static_cast<uint64_t>(m), static_cast<uint64_t>(n),
                                     m));
    cublasLtMatmulPreference_t pref = nullptr;
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes_, sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, mm.op, mm.a, mm.b, mm.c, mm.c, pref, 1, &heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    LT_OK(st);
    if (found == 0)
      throw std::runtime_error(
          fmt::format("{}: cuBLASLt has no algorithm for {} x {} x {}", world_.where(), m, n, k));
    mm.algo = heur.algo;
    return mm;
  }

  void gemm(int64_t m, int64_t n, int64_t k, bool fp8) {
    Matmul& mm = matmul(m, n, k, fp8);
    const float alpha = 1.0f, beta = 0.0f;
    LT_OK(cublasLtMatmul(lt_, mm.op, &alpha, a_, mm.a, b_, mm.b, &beta, c_, mm.c, c_, mm.c,
                         &mm.algo, workspace_, workspace_bytes_, stream_));
  }

  void compute(const Op& o) {
    switch (o.kind) {
      case OpKind::kGemm:
        for (int r = 0; r < std::max(o.count, 1); ++r)
          gemm(o.m, o.n, o.k, fp8_ && !o.high_precision);
        break;
      case OpKind::kAttention: {
        const int64_t s = std::max<int64_t>(o.attn_seq, 1), d = std::max(o.attn_head_dim, 1);
        const double per_gemm = 2.0 * static_cast<double>(s) * s * d;
        const int64_t reps = std::max<int64_t>(1, std::llround(o.flops / per_gemm));
        for (int64_t r = 0; r < reps; ++r)
          (r % 2 == 0) ? gemm(s, s, d, false) : gemm(s, d, s, false);
        break;
      }
      case OpKind::kElementwise: {
        const size_t n = std::min({static_cast<size_t>(o.bytes / 2), a_bytes_, c_bytes_});
        if (n > 0) CUDA_OK(cudaMemcpyAsync(c_, a_, n, cudaMemcpyDeviceToDevice, stream_));
        break;
      }
      case OpKind::kCollective:
        break;
    }
  }

  void collective(const Instr& i) {
    ncclComm_t comm = comms_[static_cast<size_t>(i.group)];
    if (!comm) return;
    int n = 0, me = 0;
    NCCL_OK(ncclCommCount(comm, &n));
    NCCL_OK(ncclCommUserRank(comm, &me));
    if (n <= 1) return;
    const size_t elems =
        std::max<size_t>(1, std::min(static_cast<size_t>(i.op.bytes), comm_bytes_) / 2);
    const size_t per_peer = std::max<size_t>(1, elems / static_cast<size_t>(n));
    switch (i.op.collective) {
      case CollectiveOp::kAllReduce:
        NCCL_OK(ncclAllReduce(send_, recv_, elems, ncclBfloat16, ncclSum, comm, stream_));
        break;
      case CollectiveOp::kAllGather:
        NCCL_OK(ncclAllGather(send_, recv_, per_peer, ncclBfloat16, comm, stream_));
        break;
      case CollectiveOp::kReduceScatter:
        NCCL_OK(ncclReduceScatter(send_, recv_, per_peer, ncclBfloat16, ncclSum, comm, stream_));
        break;
      case CollectiveOp::kAllToAll: {
        GroupStatus g;
        NCCL_OK(ncclGroupStart());
        for (int p = 0; p < n; ++p) {
          g.keep(ncclSend(static_cast<char*>(send_) + p * per_peer * 2, per_peer, ncclBfloat16, p,
                          comm, stream_),
                 "ncclSend");
          g.keep(ncclRecv(static_cast<char*>(recv_) + p * per_peer * 2, per_peer, ncclBfloat16, p,
                          comm, stream_),
                 "ncclRecv");
        }
        g.end(world_);
        break;
      }
      case CollectiveOp::kSendRecv: {  // a ring step: to the next member, from the previous
        GroupStatus g;
        NCCL_OK(ncclGroupStart());
        g.keep(ncclSend(send_, elems, ncclBfloat16, (me + 1) % n, comm, stream_), "ncclSend");
        g.keep(ncclRecv(recv_, elems, ncclBfloat16, (me + n - 1) % n, comm, stream_), "ncclRecv");
        g.end(world_);
        break;
      }
      case CollectiveOp::kBroadcast:
        NCCL_OK(ncclBroadcast(send_, recv_, elems, ncclBfloat16, 0, comm, stream_));
        break;
    }
  }

  // A link: the peer's process rank, and whether it carries gradients (else activations).
  using LinkKey = std::pair<int, bool>;
  static LinkKey link_key(const Instr& i) { return {i.peer, i.pass != ScheduleTask::kF}; }

  // One two-rank communicator per link this run transfers over: the sender makes its id, rank
  // 0 gathers and broadcasts them all, and each rank creates its own communicators together
  // (ncclGroupStart / ncclGroupEnd), so no order of creation can deadlock. Sender is rank 0 of
  // the pair, receiver rank 1.
  void open_pipeline_links(const std::set<LinkKey>& send_to, const std::set<LinkKey>& recv_from) {
    struct Record {
      int from, to, grad;
      ncclUniqueId id;
    };
    // With NCCL_COMM_ID set every ncclGetUniqueId names the same root (NCCL src/bootstrap.cc),
    // and the links' communicators would meet there.
    if (std::getenv("NCCL_COMM_ID") && !send_to.empty())
      throw InputError(SourceLocation{}, "NCCL_COMM_ID",
                       fmt::format("{}: the pipeline links need their own NCCL ids; unset "
                                   "NCCL_COMM_ID to run pipeline transfers",
                                   world_.where()));
    std::string mine;
    for (const auto& [to, grad] : send_to) {
      Record r{world_.rank(), to, grad ? 1 : 0, {}};
      NCCL_OK(ncclGetUniqueId(&r.id));
      mine.append(reinterpret_cast<const char*>(&r), sizeof(r));
    }
    std::string all;
    for (const std::string& part : world_.gather(mine, "the pipeline communicators' ids"))
      all += part;
    all = world_.broadcast(all, "the pipeline communicators' ids");
    if (all.size() % sizeof(Record) != 0)
      throw std::runtime_error(fmt::format("{}: malformed pipeline id exchange", world_.where()));
    CUDA_OK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    GroupStatus g;
    NCCL_OK(ncclGroupStart());
    for (size_t off = 0; off < all.size(); off += sizeof(Record)) {
      Record r{};
      std::copy_n(all.data() + off, sizeof(Record), reinterpret_cast<char*>(&r));
      const bool sender = r.from == world_.rank(), receiver = r.to == world_.rank();
      if (!sender && !receiver) continue;
      Link& l = sender ? send_links_[{r.to, r.grad != 0}] : recv_links_[{r.from, r.grad != 0}];
      g.keep(ncclCommInitRank(&l.comm, 2, r.id, sender ? 0 : 1), "ncclCommInitRank");
    }
    g.end(world_);
    for (const LinkKey& from : recv_from)
      if (!recv_links_.count(from))
        throw std::runtime_error(
            fmt::format("{}: receives {} from rank {}, which sends none to it (the rank "
                        "programs disagree)",
                        world_.where(), from.second ? "gradients" : "activations", from.first));
    for (auto& [peer, l] : send_links_)
      CUDA_OK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    // Connect every link now, all in one group: NCCL connects a pair on its first operation,
    // and there the sender's host waits for the receiver (NCCL src/group.cc, transport.cc), so
    // a first send would block the rank, and the set-up would fall into the first step's times.
    GroupStatus w;
    NCCL_OK(ncclGroupStart());
    for (auto& [key, l] : send_links_)
      w.keep(ncclSend(p2p_send_, 1, ncclUint8, 1, l.comm, stream_), "ncclSend");
    for (auto& [key, l] : recv_links_)
      w.keep(ncclRecv(p2p_recv_, 1, ncclUint8, 0, l.comm, stream_), "ncclRecv");
    w.end(world_);
    CUDA_OK(cudaStreamSynchronize(stream_));
  }

  void send(const Instr& i) {
    Link& l = send_links_.at(link_key(i));
    // The transfer follows the compute that produced it, on the pair's own stream.
    CUDA_OK(cudaEventRecord(ready_, stream_));
    CUDA_OK(cudaStreamWaitEvent(l.stream, ready_, 0));
    NCCL_OK(ncclSend(p2p_send_, static_cast<size_t>(std::max(i.bytes, 1.0)), ncclUint8, 1, l.comm,
                     l.stream));
  }
  void recv(const Instr& i) {
    NCCL_OK(ncclRecv(p2p_recv_, static_cast<size_t>(std::max(i.bytes, 1.0)), ncclUint8, 0,
                     recv_links_.at(link_key(i)).comm, stream_));
  }

  struct Link {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;  // sends only
  };

  ExecBackendOptions o_;
  const calibrate::ProcessGroup& world_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool fp8_ = false;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *send_ = nullptr, *recv_ = nullptr;
  size_t a_bytes_ = 0, c_bytes_ = 0, comm_bytes_ = 0;
  ncclComm_t world_comm_ = nullptr;
  std::array<ncclComm_t, kNumGroupKinds> comms_{};
  std::atomic<bool> aborted_{false};  // set by the watchdog's thread
  std::map<LinkKey, Link> send_links_, recv_links_;
  void *p2p_send_ = nullptr, *p2p_recv_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Matmul> matmuls_;
  double device_peak_ = 0;
};

class CudaExecBackend : public IExecBackend {
 public:
  std::unique_ptr<IExecSession> open(const ExecBackendOptions& o,
                                     const calibrate::ProcessGroup& world) const override {
    return std::make_unique<CudaExecSession>(o, world);
  }
};

}  // namespace
}  // namespace dtplan::exec

// The module's entry point (cuda_loader.cpp): a backend object owned by the caller.
extern "C" dtplan::exec::IExecBackend* dtplan_cuda_executor_create() {
  return new dtplan::exec::CudaExecBackend();
}
