// The `cpu` backend: the whole calibration pipeline on a host without GPUs. GEMMs are fp32
// OpenBLAS sgemm calls on rank 0; collectives are MPI collectives (MPI_Allreduce,
// MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv) on float buffers, in
// the groups the sweep names. Times are wall-clock (steady_clock / MPI_Wtime), the slowest
// rank of the group, and the fastest of --repeats: on a shared host, preemption only ever adds
// time, so the minimum is the least disturbed measurement (GPU backends keep the median).
//
// Fault injection for tests: DTPLAN_CPU_BACKEND_STALL=<task key> makes the highest rank of the
// task's group stop before entering that task (so the others hang in the collective, as with a
// dead peer), which exercises the watchdog and the journal.
#include <fmt/format.h>
#include <openblas-pthread/cblas.h>  // Debian libopenblas-dev
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "calibrate/i_backend.h"
#include "calibrate/process_group.h"
#include "core/error.h"
#include "core/registry.h"

#ifdef DTPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace dtplan::calibrate {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  return "host CPU";
}

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t{1} << 30;
}

class CpuSession : public ICalibrationSession {
 public:
  CpuSession(const BackendOptions& o, const ProcessGroup& world) : o_(o), world_(world) {
    if (const char* s = std::getenv("DTPLAN_CPU_BACKEND_STALL")) stall_key_ = s;
    // Several ranks share the host's cores: one BLAS thread each.
    if (world.size() > 1) openblas_set_num_threads(1);
  }
  ~CpuSession() override {
#ifdef DTPLAN_HAVE_MPI
    for (auto& [k, c] : comms_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
#endif
  }

  Environment environment() const override {
    Environment e;
    e.device = cpu_model();
    e.tool = "dtplan calibrate --backend cpu";
    e.software = fmt::format("OpenBLAS ({})", openblas_get_config());
#ifdef DTPLAN_HAVE_MPI
    char ver[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(ver, &len);  // callable before MPI_Init
    std::string v(ver, static_cast<size_t>(len));
    v = v.substr(0, v.find_first_of(",\n"));
    e.software += "; " + v;
    // Collectives need MPI's world: a process started without mpirun measures GEMMs only.
    e.collectives = world_.mpi();
#else
    e.collectives = false;
#endif
    e.precisions = {Precision::kFp32};
    // Three buffers per rank of the largest size, on the ranks sharing this host, with room
    // to spare; powers of two.
    int64_t cap = mem_available_bytes() / (int64_t{4} * std::max(1, world_.min_ranks_per_node()));
    int64_t p2 = 1;
    while (p2 * 2 <= cap) p2 *= 2;
    e.max_collective_bytes = std::min<int64_t>(p2, int64_t{1} << 30);
    return e;
  }

  Measurement measure(const Task& t) override {
    Measurement m;
    m.task = t;
    if (t.kind == TaskKind::kGemm) {
      if (world_.is_root()) m.time_s = time_gemm(t);
      world_.quiet_barrier();
      m.algorithm = "openblas-sgemm";
      return m;
    }
#ifdef DTPLAN_HAVE_MPI
    m.time_s = time_collective(t);
    m.algorithm = "mpi";
    return m;
#else
    throw InputError(SourceLocation{}, "--backend",
                     "this dtplan was built without MPI: the cpu backend measures GEMMs only "
                     "(install libopenmpi-dev and rebuild, or pass --ops gemm)");
#endif
  }

 private:
  double time_gemm(const Task& t) {
    const size_t m = static_cast<size_t>(t.m), n = static_cast<size_t>(t.n),
                 k = static_cast<size_t>(t.k);
    std::vector<float> a(m * k, 1.0f), b(k * n, 0.5f), c(m * n, 0.0f);
    auto run = [&] {
      // The sweep keeps GEMM dimensions far below 2^31 (max_gemm_gflop), BLAS's int.
      const auto bm = static_cast<blasint>(t.m), bn = static_cast<blasint>(t.n),
                 bk = static_cast<blasint>(t.k);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bm, bn, bk, 1.0f, a.data(), bk,
                  b.data(), bn, 0.0f, c.data(), bn);
    };
    for (int i = 0; i < o_.warmup; ++i) run();
    std::vector<double> times;
    for (int r = 0; r < o_.repeats; ++r) {
      const double t0 = now_s();
      run();
      times.push_back(now_s() - t0);
    }
    return fastest(times);
  }

#ifdef DTPLAN_HAVE_MPI
  MPI_Comm comm_for(const Task& t, const std::vector<int>& members) {
    const auto key = std::make_pair(static_cast<int>(t.scope), t.group_size);
    auto it = comms_.find(key);
    if (it != comms_.end()) return it->second;
    const bool in = std::find(members.begin(), members.end(), world_.rank()) != members.end();
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, world_.rank(), &c);
    comms_[key] = c;
    return c;
  }

  double time_collective(const Task& t) {
    const std::vector<int> members = world_.group_members(t.scope, t.group_size);
    if (members.empty())
      throw InputError(
          SourceLocation{}, "--ops",
          fmt::format("no {} group of {} ranks in this run", to_string(t.scope), t.group_size));
    MPI_Comm comm = comm_for(t, members);
    double result = 0;
    if (comm != MPI_COMM_NULL) {
      if (!stall_key_.empty() && t.key() == stall_key_ && world_.rank() == members.back()) {
        std::fprintf(stderr, "dtplan: test: %s stalls before %s (DTPLAN_CPU_BACKEND_STALL)\n",
                     world_.where().c_str(), t.key().c_str());
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      int n = 0, me = 0;
      MPI_Comm_size(comm, &n);
      MPI_Comm_rank(comm, &me);
      const int64_t floats = std::max<int64_t>(1, t.bytes / 4);
      const int64_t per_peer = std::max<int64_t>(1, floats / n);
      std::vector<float> send(static_cast<size_t>(floats), 1.0f),
          recv(static_cast<size_t>(floats), 0.0f);
      auto run = [&] {
        switch (t.op) {
          case CollectiveOp::kAllReduce:
            MPI_Allreduce(send.data(), recv.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                          comm);
            break;
          case CollectiveOp::kAllGather:
            MPI_Allgather(send.data(), static_cast<int>(per_peer), MPI_FLOAT, recv.data(),
                          static_cast<int>(per_peer), MPI_FLOAT, comm);
            break;
          case CollectiveOp::kReduceScatter:
            MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(per_peer),
                                     MPI_FLOAT, MPI_SUM, comm);
            break;
          case CollectiveOp::kAllToAll:
            MPI_Alltoall(send.data(), static_cast<int>(per_peer), MPI_FLOAT, recv.data(),
                         static_cast<int>(per_peer), MPI_FLOAT, comm);
            break;
          case CollectiveOp::kSendRecv: {
            // nccl-tests sendrecv: each rank sends to the next and receives from the previous.
            const int to = (me + 1) % n, from = (me + n - 1) % n;
            MPI_Sendrecv(send.data(), static_cast<int>(floats), MPI_FLOAT, to, 7, recv.data(),
                         static_cast<int>(floats), MPI_FLOAT, from, 7, comm, MPI_STATUS_IGNORE);
            break;
          }
          case CollectiveOp::kBroadcast:
            MPI_Bcast(send.data(), static_cast<int>(floats), MPI_FLOAT, 0, comm);
            break;
        }
      };
      for (int i = 0; i < o_.warmup; ++i) run();
      // Short repeats (about half a millisecond), many of them, keeping the fastest: a repeat
      // that fits between two preemptions of a shared host measures the transport alone.
      MPI_Barrier(comm);
      double t0 = MPI_Wtime();
      run();
      double one = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm);
      const int iters = static_cast<int>(std::clamp(5e-4 / std::max(one, 1e-7), 1.0, 100.0));
      std::vector<double> times;
      for (int r = 0; r < 3 * o_.repeats; ++r) {
        MPI_Barrier(comm);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) run();
        double dt = (MPI_Wtime() - t0) / iters;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm);
        times.push_back(dt);
      }
      result = fastest(times);
    }
    // Rank 0 is in every group (the sweep forms groups from node 0's first rank).
    MPI_Barrier(MPI_COMM_WORLD);
    return result;
  }

  std::map<std::pair<int, int>, MPI_Comm> comms_;
#endif

  BackendOptions o_;
  const ProcessGroup& world_;
  std::string stall_key_;
};

class CpuBackend : public ICalibrationBackend {
 public:
  std::unique_ptr<ICalibrationSession> open(const BackendOptions& o,
                                            const ProcessGroup& world) const override {
    return std::make_unique<CpuSession>(o, world);
  }
};

}  // namespace

DTPLAN_REGISTER(ICalibrationBackend, CpuBackend, "cpu",
                "host BLAS GEMMs (fp32 OpenBLAS) and MPI collectives: the pipeline without GPUs")

}  // namespace dtplan::calibrate
