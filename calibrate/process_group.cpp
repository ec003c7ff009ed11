#include "calibrate/process_group.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/error.h"

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

// This process's rank as the launcher states it, before MPI knows it (-1 when unknown).
[[maybe_unused]] static int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::atoi(r);
  return -1;
}

// Ends this process when a start-up step (MPI_Init) does not return within the timeout: MPI
// cannot say which peer is missing yet, so the message names this rank and the step.
class StartupGuard {
 public:
  StartupGuard(double timeout_s, std::string what)
      : timeout_s_(timeout_s), what_(std::move(what)), thread_([this] { loop(); }) {}
  ~StartupGuard() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    if (cv_.wait_for(l, std::chrono::duration<double>(timeout_s_), [this] { return done_; }))
      return;
    std::fprintf(stderr,
                 "dtplan: error: %s did not complete within %g s (watchdog, --timeout-s): a "
                 "peer did not start or cannot be reached; ending this rank\n",
                 what_.c_str(), timeout_s_);
    std::fflush(stderr);
    std::_Exit(3);
  }
  double timeout_s_;
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

ProcessGroup::ProcessGroup([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv,
                           double timeout_s)
    : timeout_s_(timeout_s) {
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
    // MPI's start-up is given at least 30 s: a --timeout-s sized for quick collectives must not
    // end a slow but healthy launch.
    StartupGuard guard(
        std::max(timeout_s_, 30.0),
        fmt::format("MPI start-up (MPI_Init_thread) on rank {} (host {})", launcher_rank(), me));
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    initialized_here_ = true;
    // The watchdog thread aborts while the main thread may be inside MPI.
    if (provided < MPI_THREAD_MULTIPLE)
      std::fprintf(stderr,
                   "dtplan: warning: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE: "
                   "a watchdog abort during a collective may not end the job cleanly\n",
                   provided);
  }
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  arrive("start-up");
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

void ProcessGroup::barrier([[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return;
  arrive(what);
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void ProcessGroup::quiet_barrier([[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return;
  arrive(what);
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

std::string ProcessGroup::broadcast(const std::string& from_root,
                                    [[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return from_root;
  arrive(what);
  unsigned long long len = from_root.size();
  MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  std::string out = rank_ == 0 ? from_root : std::string(len, '\0');
  if (len > 0) MPI_Bcast(out.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
#else
  return from_root;
#endif
}

std::vector<std::string> ProcessGroup::gather(const std::string& mine,
                                              [[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return {mine};
  arrive(what);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank_ == 0 ? static_cast<size_t>(size_) : 0), offsets(lens.size());
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank_ == 0) {
    size_t total = 0;
    for (size_t r = 0; r < lens.size(); ++r) offsets[r] = static_cast<int>(total), total += lens[r];
    all.resize(total);
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lens[r])));
  return out;
#else
  return {mine};
#endif
}

double ProcessGroup::max(double v, [[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return v;
  arrive(what);
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
#else
  return v;
#endif
}

bool ProcessGroup::any(bool v, [[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_) return v;
  arrive(what);
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
  if (static_cast<size_t>(rank_) >= hosts_.size())  // before the host names are gathered
    return fmt::format("rank {} (host {})", rank_, local_hostname());
  return fmt::format("rank {} (host {}, GPU {})", rank_, hostname(), local_rank_);
}

void ProcessGroup::arrive([[maybe_unused]] const char* what) const {
#ifdef DTPLAN_HAVE_MPI
  if (!mpi_ || size_ < 2) return;
  // A test hook, as DTPLAN_CPU_BACKEND_STALL is for the measurements: DTPLAN_TEST_STALL_AT =
  // "RANK:WHAT" stops that rank before it checks in at WHAT ("start-up", "the end of the
  // measurements", ...), as a rank stopped by the scheduler or a debugger would
  // (e2e.calibrate_mpi checks that it is named).
  if (const char* stall = std::getenv("DTPLAN_TEST_STALL_AT")) {
    const std::string_view v(stall);
    const size_t colon = v.find(':');
    if (colon != std::string_view::npos && std::atoi(stall) == rank_ &&
        v.substr(colon + 1) == what) {
      std::fprintf(stderr, "dtplan: test: rank %d stalls before %s\n", rank_, what);
      for (;;) pause();
    }
  }
  // Point-to-point messages on tags of their own: MPI keeps messages between two ranks on one
  // tag in order, so successive check-ins match up.
  constexpr int kCheckIn = 0x7d01, kGo = 0x7d02;
  using clock = std::chrono::steady_clock;
  auto after = [](double s) {
    return clock::now() +
           std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
  };
  auto wait_all = [](std::vector<MPI_Request>& reqs, clock::time_point deadline) {
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return true;
      if (clock::now() >= deadline) return false;
      usleep(200);
    }
  };
  int token = 0;
  if (rank_ == 0) {
    std::vector<int> got(static_cast<size_t>(size_), 0);
    std::vector<MPI_Request> reqs(static_cast<size_t>(size_ - 1));
    for (int r = 1; r < size_; ++r)
      MPI_Irecv(&got[static_cast<size_t>(r)], 1, MPI_INT, r, kCheckIn, MPI_COMM_WORLD,
                &reqs[static_cast<size_t>(r - 1)]);
    if (!wait_all(reqs, after(timeout_s_))) {
      std::string missing;
      for (int r = 1; r < size_; ++r) {
        int done = 0;
        MPI_Test(&reqs[static_cast<size_t>(r - 1)], &done, MPI_STATUS_IGNORE);
        if (done) continue;
        if (!missing.empty()) missing += ", ";
        missing += static_cast<size_t>(r) < hosts_.size()
                       ? fmt::format("rank {} (host {})", r, hostname_of(r))
                       : fmt::format("rank {}", r);
      }
      std::fprintf(stderr,
                   "dtplan: error: %s: %s did not reach %s within %g s (watchdog, --timeout-s); "
                   "aborting the calibration.%s\n",
                   where().c_str(), missing.c_str(), what, timeout_s_,
                   std::string_view(what) == "start-up"
                       ? ""
                       : " Measurements so far are in the journal; rerun with --resume.");
      abort(kExitWatchdog);
    }
    std::vector<MPI_Request> go(static_cast<size_t>(size_ - 1));
    for (int r = 1; r < size_; ++r)
      MPI_Isend(&token, 1, MPI_INT, r, kGo, MPI_COMM_WORLD, &go[static_cast<size_t>(r - 1)]);
    MPI_Waitall(static_cast<int>(go.size()), go.data(), MPI_STATUSES_IGNORE);
    return;
  }
  std::vector<MPI_Request> reqs(2);
  int go = 0;
  MPI_Isend(&token, 1, MPI_INT, 0, kCheckIn, MPI_COMM_WORLD, &reqs[0]);
  MPI_Irecv(&go, 1, MPI_INT, 0, kGo, MPI_COMM_WORLD, &reqs[1]);
  if (!wait_all(reqs, after(timeout_s_ + std::max(5.0, timeout_s_)))) {
    std::fprintf(stderr,
                 "dtplan: error: %s: rank 0 (host %s) did not let %s go ahead within %g s "
                 "(watchdog, --timeout-s); aborting the calibration.\n",
                 where().c_str(), hosts_.empty() ? "unknown" : hostname_of(0).c_str(), what,
                 timeout_s_ + std::max(5.0, timeout_s_));
    abort(kExitWatchdog);
  }
#endif
}

}  // namespace dtplan::calibrate
