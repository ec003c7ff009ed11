#include "calibrate/process_group.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#ifdef DTPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace dtplan::calibrate {

static std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// Whether a launcher started this process as one rank of several (Open MPI's mpirun, a PMI or
// PMIx launcher such as srun --mpi=pmix or MPICH's hydra). A process started alone does not
// initialize MPI at all.
[[maybe_unused]] static bool launched_by_mpi() {  // used with MPI only
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

ProcessGroup::ProcessGroup([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
  std::string me = local_hostname();
#ifdef DTPLAN_HAVE_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && !launched_by_mpi()) {
    hosts_.push_back(me);
    node_ranks_.push_back({0});
    return;
  }
  if (!inited) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    initialized_here_ = true;
  }
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Gather every rank's host name (fixed-width records).
  constexpr int kLen = 256;
  std::vector<char> mine(kLen, 0), all(static_cast<size_t>(kLen) * size_, 0);
  std::copy_n(me.begin(), std::min<size_t>(me.size(), kLen - 1), mine.begin());
  MPI_Allgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(all.data() + static_cast<size_t>(r) * kLen);
#else
  hosts_.push_back(me);
#endif
  for (int r = 0; r < size_; ++r) {
    size_t node = 0;
    while (node < node_ranks_.size() &&
           hosts_[static_cast<size_t>(node_ranks_[node].front())] != hosts_[static_cast<size_t>(r)])
      ++node;
    if (node == node_ranks_.size()) node_ranks_.emplace_back();
    node_ranks_[node].push_back(r);
    if (r == rank_) local_rank_ = static_cast<int>(node_ranks_[node].size()) - 1;
  }
}

ProcessGroup::~ProcessGroup() {
#ifdef DTPLAN_HAVE_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_here_ && !finalized) MPI_Finalize();
#endif
}

int ProcessGroup::min_ranks_per_node() const {
  size_t m = node_ranks_.front().size();
  for (const auto& n : node_ranks_) m = std::min(m, n.size());
  return static_cast<int>(m);
}

std::vector<int> ProcessGroup::group_members(CommScope scope, int n) const {
  std::vector<int> out;
  if (n < 1) return out;
  if (scope == CommScope::kIntraNode) {
    const auto& node0 = node_ranks_.front();
    if (n > static_cast<int>(node0.size())) return out;
    out.assign(node0.begin(), node0.begin() + n);
    return out;
  }
  if (nodes() < 2) return out;
  if (n <= nodes()) {
    for (int i = 0; i < n; ++i) out.push_back(node_ranks_[static_cast<size_t>(i)].front());
    return out;
  }
  if (n == size_) {
    for (int r = 0; r < size_; ++r) out.push_back(r);
  }
  return out;
}

void ProcessGroup::barrier() const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return;
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void ProcessGroup::quiet_barrier() const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return;
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    usleep(200);
  }
#endif
}

std::string ProcessGroup::broadcast(const std::string& from_root) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return from_root;
  unsigned long long len = from_root.size();
  MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  std::string out = rank_ == 0 ? from_root : std::string(len, '\0');
  if (len > 0) MPI_Bcast(out.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
#else
  return from_root;
#endif
}

double ProcessGroup::max(double v) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return v;
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
#else
  return v;
#endif
}

bool ProcessGroup::any(bool v) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return v;
  int in = v ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out != 0;
#else
  return v;
#endif
}

void ProcessGroup::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef DTPLAN_HAVE_MPI
  if (mpi_ && size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

std::string ProcessGroup::where() const {
  return fmt::format("rank {} (host {}, GPU {})", rank_, hostname(), local_rank_);
}

}  // namespace dtplan::calibrate
