// The processes taking part in a calibration: MPI's world when dtplan is built with MPI and
// launched by `mpirun`/`srun --mpi=pmix` (one process per GPU), or this process alone (started
// without a launcher, it does not initialize MPI).
// It knows which ranks share a host, so the sweep can form intra-node and cross-node groups,
// and it carries the few collectives the driver needs (broadcast, max, barrier) on the host.
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"

namespace dtplan::calibrate {

class ProcessGroup {
 public:
  // Initializes MPI (MPI_THREAD_MULTIPLE, so the watchdog may abort) when built with it and
  // started by an MPI launcher. `timeout_s` bounds MPI's start-up and every host collective
  // below (the calibration's --timeout-s): a rank that does not arrive in time is named and the
  // job ends with exit code 3.
  ProcessGroup(int* argc, char*** argv, double timeout_s = 300);
  ~ProcessGroup();  // finalizes MPI if this object initialized it
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hosts_[static_cast<size_t>(rank_)]; }
  const std::string& hostname_of(int r) const { return hosts_[static_cast<size_t>(r)]; }
  int nodes() const { return static_cast<int>(node_ranks_.size()); }
  // Index of this rank among the ranks on its host (the GPU it drives).
  int local_rank() const { return local_rank_; }
  // The fewest ranks any node has (groups inside a node are formed on node 0 up to this size).
  int min_ranks_per_node() const;
  // World ranks of the group a collective task runs in (deterministic, same on every rank):
  // intra-node groups are the first `n` ranks of node 0; a cross-node group of size nodes()
  // takes local rank 0 of every node (one GPU per node, rail 0); larger cross-node groups take
  // every rank; a cross-node pair is local rank 0 of nodes 0 and 1. Empty when impossible.
  std::vector<int> group_members(CommScope scope, int n) const;
  bool mpi() const { return mpi_; }
  double timeout_s() const { return timeout_s_; }

  // Host collectives. Each first waits, at most timeout_s, for every rank to arrive at `what`
  // (arrive()), so a stopped or dead rank is named instead of hanging the job.
  void barrier(const char* what = "a barrier") const;
  // A barrier that sleeps while it waits, so idle ranks leave the cores to the one measuring.
  void quiet_barrier(const char* what = "a barrier") const;
  // Root's string on every rank.
  std::string broadcast(const std::string& from_root, const char* what = "a broadcast") const;
  // Every rank's string on rank 0, in rank order (the others get an empty list).
  std::vector<std::string> gather(const std::string& mine, const char* what = "a gather") const;
  double max(double v, const char* what = "a reduction") const;  // over all ranks
  bool any(bool v, const char* what = "a reduction") const;      // logical or over all ranks
  // Every rank checks in with rank 0 before `what`. Rank 0 waits timeout_s for them, then
  // names every rank that has not arrived (host and GPU where known) and ends the job (exit 3);
  // the others wait for rank 0's go-ahead longer (timeout_s + max(5 s, timeout_s)), so a
  // missing peer is named by rank 0, and rank 0 by them when rank 0 itself is the one stopped.
  void arrive(const char* what) const;
  // Ends every process (MPI_Abort), or this one when alone; used by the watchdog and on errors.
  [[noreturn]] void abort(int code) const;
  // "rank 3 (host node07, GPU 3)", for error messages.
  std::string where() const;

 private:
  double timeout_s_ = 300;
  bool mpi_ = false;
  bool initialized_here_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::vector<std::string> hosts_;
  std::vector<std::vector<int>> node_ranks_;  // per node (first-appearance order): its ranks
};

}  // namespace dtplan::calibrate
