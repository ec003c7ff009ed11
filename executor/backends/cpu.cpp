// The `cpu` executor backend: a plan's step on a host without GPUs, so that the executor's
// orchestration (groups from the rank order, the schedule's order, pipeline sends that cannot
// deadlock, memory accounting, the watchdog) runs in CI. Each MPI rank plays one GPU.
//   - GEMMs: fp32 OpenBLAS sgemm at the op's (M, N, K), `count` times (grouped / batched
//     copies), whatever the plan's precision;
//   - attention: its two GEMM families (Q K^T and P V, each s x s x d per head) as sgemm
//     calls whose FLOPs add up to the op's, without the softmax;
//   - element-wise ops: a memcpy that reads and writes the op's bytes;
//   - collectives: MPI_Allreduce / Allgather / Reduce_scatter_block / Alltoall / Bcast over
//     float buffers of the op's bytes, in communicators split from the rank grid's groups;
//   - pipeline sends: MPI_Isend (completed at the step's end), receives: blocking MPI_Recv.
// Times are host wall-clock per instruction (steady_clock). Shapes are the scaled model's
// (`--scale`, default 16 for this backend), which the output states.
#include <fmt/format.h>
#include <openblas-pthread/cblas.h>  // Debian libopenblas-dev

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <new>
#include <vector>

#include "calibrate/process_group.h"
#include "core/error.h"
#include "core/registry.h"
#include "executor/i_exec_backend.h"

#ifdef DTPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace dtplan::exec {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  return "host CPU";
}

size_t floats_of(double bytes) { return static_cast<size_t>(std::max(1.0, std::ceil(bytes / 4))); }

class CpuExecSession : public IExecSession {
 public:
  CpuExecSession(const ExecBackendOptions& o, const calibrate::ProcessGroup& world)
      : o_(o), world_(world) {
    if (world.size() > 1) openblas_set_num_threads(1);  // ranks share the host's cores
#ifdef DTPLAN_HAVE_MPI
    comms_.fill(MPI_COMM_NULL);
#endif
  }
  ~CpuExecSession() override {
#ifdef DTPLAN_HAVE_MPI
    for (auto& c : comms_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
#endif
  }

  ExecEnvironment environment() const override {
    ExecEnvironment e;
    e.device = cpu_model();
    e.software = fmt::format("OpenBLAS ({})", openblas_get_config());
#ifdef DTPLAN_HAVE_MPI
    if (world_.mpi()) {
      char ver[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int len = 0;
      MPI_Get_library_version(ver, &len);
      std::string v(ver, static_cast<size_t>(len));
      e.software += ", " + v.substr(0, v.find(','));
    }
#endif
    e.notes.push_back(fmt::format(
        "shapes of the model scaled down 1/{} (hidden, FFN, heads, vocabulary; head width and "
        "sequence kept)",
        o_.scale));
    e.notes.emplace_back("GEMMs in fp32 through OpenBLAS sgemm whatever the plan's precision");
    e.notes.emplace_back("attention as its Q K^T and P V GEMMs (no softmax kernel)");
    e.notes.emplace_back(
        "element-wise ops as a memcpy of the op's bytes; collectives and pipeline transfers as "
        "MPI calls on the host");
    e.notes.emplace_back(
        "times are host wall-clock per op; each MPI rank plays one GPU and ranks share the "
        "host's cores");
    e.notes.emplace_back(
        "measured peak memory: the memory model's blocks, allocated for real in the program's "
        "order (the host has no device use to sample), so it checks the blocks' lifetimes in "
        "schedule order against the model's peak, not the model's block sizes or a framework's "
        "allocator");
    return e;
  }

  void make_group(GroupKind kind, int color, int key, int size) override {
#ifdef DTPLAN_HAVE_MPI
    if (world_.mpi()) {
      MPI_Comm c = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &c);
      comms_[static_cast<size_t>(kind)] = c;
      return;
    }
#endif
    (void)key;
    if (size > 1 && color >= 0)
      throw InputError({}, "--gpus",
                       fmt::format("the {} group has {} ranks but this process runs alone; start "
                                   "it with mpirun -np N (one process per GPU)",
                                   to_string(kind), size));
  }

  void prepare(const RankProgram& prog) override {
    size_t a = 1, b = 1, c = 1, comm = 1;
    for (const Instr& i : prog.instrs) {
      if (i.modelled) continue;
      const Op& o = i.op;
      if (i.kind == InstrKind::kCompute && o.kind == OpKind::kGemm) {
        a = std::max(a, static_cast<size_t>(o.m * o.k));
        b = std::max(b, static_cast<size_t>(o.k * o.n));
        c = std::max(c, static_cast<size_t>(o.m * o.n));
      } else if (i.kind == InstrKind::kCompute && o.kind == OpKind::kAttention) {
        const size_t s = static_cast<size_t>(std::max<int64_t>(o.attn_seq, 1));
        const size_t d = static_cast<size_t>(std::max(o.attn_head_dim, 1));
        a = std::max(a, s * std::max(s, d));
        b = std::max(b, s * d);
        c = std::max(c, s * std::max(s, d));
      } else if (i.kind == InstrKind::kCompute) {
        a = std::max(a, floats_of(o.bytes / 2));
        c = std::max(c, floats_of(o.bytes / 2));
      } else {
        comm = std::max(comm, floats_of(i.kind == InstrKind::kCollective ? o.bytes : i.bytes));
      }
    }
    a_.assign(a, 1.0f / 1024);
    b_.assign(b, 1.0f / 1024);
    c_.assign(c, 0.0f);
    send_.assign(comm, 1.0f);
    recv_.assign(comm, 0.0f);
  }

  void* allocate(double bytes) override {
    const size_t n = static_cast<size_t>(std::max(1.0, bytes));
    void* p = ::operator new(n);  // throws std::bad_alloc
    std::memset(p, 0, n);         // touch every page: the memory is really held
    return p;
  }
  void release(void* p, double) override { ::operator delete(p); }

  double run(const Instr& i) override {
    const double t0 = now_s();
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
      case InstrKind::kAlloc:
      case InstrKind::kFree:
        break;
    }
    return now_s() - t0;
  }

  Precision gemm_precision(const Op&) const override { return Precision::kFp32; }

  void finish_sends() override {
#ifdef DTPLAN_HAVE_MPI
    if (!requests_.empty())
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
#endif
    send_buffers_.clear();
  }

 private:
  void sgemm(int64_t m, int64_t n, int64_t k) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a_.data(), static_cast<int>(k), b_.data(),
                static_cast<int>(n), 0.0f, c_.data(), static_cast<int>(n));
  }

  void compute(const Op& o) {
    switch (o.kind) {
      case OpKind::kGemm:
        for (int r = 0; r < std::max(o.count, 1); ++r) sgemm(o.m, o.n, o.k);
        break;
      case OpKind::kAttention: {
        const int64_t s = std::max<int64_t>(o.attn_seq, 1), d = std::max(o.attn_head_dim, 1);
        const double per_gemm = 2.0 * static_cast<double>(s) * s * d;
        const int64_t reps = std::max<int64_t>(1, std::llround(o.flops / per_gemm));
        for (int64_t r = 0; r < reps; ++r) (r % 2 == 0) ? sgemm(s, s, d) : sgemm(s, d, s);
        break;
      }
      case OpKind::kElementwise: {
        const size_t n = std::min(floats_of(o.bytes / 2), std::min(a_.size(), c_.size()));
        std::memcpy(c_.data(), a_.data(), n * sizeof(float));
        break;
      }
      case OpKind::kCollective:
        break;
    }
  }

  void collective([[maybe_unused]] const Instr& i) {
#ifdef DTPLAN_HAVE_MPI
    MPI_Comm comm = comms_[static_cast<size_t>(i.group)];
    if (comm == MPI_COMM_NULL) return;
    int n = 1;
    MPI_Comm_size(comm, &n);
    if (n <= 1) return;
    const size_t total = std::min(floats_of(i.op.bytes), send_.size());
    const int per_peer = static_cast<int>(std::max<size_t>(1, total / static_cast<size_t>(n)));
    switch (i.op.collective) {
      case CollectiveOp::kAllReduce:
        MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM,
                      comm);
        break;
      case CollectiveOp::kAllGather:
        MPI_Allgather(send_.data(), per_peer, MPI_FLOAT, recv_.data(), per_peer, MPI_FLOAT, comm);
        break;
      case CollectiveOp::kReduceScatter:
        MPI_Reduce_scatter_block(send_.data(), recv_.data(), per_peer, MPI_FLOAT, MPI_SUM, comm);
        break;
      case CollectiveOp::kAllToAll:
        MPI_Alltoall(send_.data(), per_peer, MPI_FLOAT, recv_.data(), per_peer, MPI_FLOAT, comm);
        break;
      case CollectiveOp::kBroadcast:
        MPI_Bcast(send_.data(), static_cast<int>(total), MPI_FLOAT, 0, comm);
        break;
      case CollectiveOp::kSendRecv: {  // a ring step: to the next member, from the previous
        int me = 0;
        MPI_Comm_rank(comm, &me);
        MPI_Sendrecv(send_.data(), static_cast<int>(total), MPI_FLOAT, (me + 1) % n, 11,
                     recv_.data(), static_cast<int>(total), MPI_FLOAT, (me + n - 1) % n, 11, comm,
                     MPI_STATUS_IGNORE);
        break;
      }
    }
#endif
  }

  void send([[maybe_unused]] const Instr& i) {
#ifdef DTPLAN_HAVE_MPI
    send_buffers_.emplace_back(floats_of(i.bytes), 1.0f);
    requests_.emplace_back();
    MPI_Isend(send_buffers_.back().data(), static_cast<int>(send_buffers_.back().size()), MPI_FLOAT,
              i.peer, i.tag, MPI_COMM_WORLD, &requests_.back());
#endif
  }
  void recv([[maybe_unused]] const Instr& i) {
#ifdef DTPLAN_HAVE_MPI
    const size_t n = floats_of(i.bytes);
    if (recv_.size() < n) recv_.resize(n);
    MPI_Recv(recv_.data(), static_cast<int>(n), MPI_FLOAT, i.peer, i.tag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
#endif
  }

  ExecBackendOptions o_;
  // Read only where MPI is built in (a build with -DDTPLAN_MPI=OFF has no use for it).
  [[maybe_unused]] const calibrate::ProcessGroup& world_;
  std::vector<float> a_, b_, c_, send_, recv_;
  std::vector<std::vector<float>> send_buffers_;
#ifdef DTPLAN_HAVE_MPI
  std::array<MPI_Comm, kNumGroupKinds> comms_;
  std::vector<MPI_Request> requests_;
#endif
};

class CpuExecBackend : public IExecBackend {
 public:
  std::unique_ptr<IExecSession> open(const ExecBackendOptions& o,
                                     const calibrate::ProcessGroup& world) const override {
    return std::make_unique<CpuExecSession>(o, world);
  }
  int default_scale() const override { return 16; }
};

}  // namespace
}  // namespace dtplan::exec

DTPLAN_REGISTER(dtplan::exec::IExecBackend, dtplan::exec::CpuExecBackend, "cpu",
                "host BLAS GEMMs and MPI collectives at scaled-down shapes (no GPU needed)");
