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
  // started by an MPI launcher.
  ProcessGroup(int* argc, char*** argv);
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

  void barrier() const;
  // A barrier that sleeps while it waits, so idle ranks leave the cores to the one measuring.
  void quiet_barrier() const;
  std::string broadcast(const std::string& from_root) const;  // root's string on every rank
  double max(double v) const;                                 // over all ranks
  bool any(bool v) const;                                     // logical or over all ranks
  // Ends every process (MPI_Abort), or this one when alone; used by the watchdog and on errors.
  [[noreturn]] void abort(int code) const;
  // "rank 3 (host node07, GPU 3)", for error messages.
  std::string where() const;

 private:
  bool mpi_ = false;
  bool initialized_here_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::vector<std::string> hosts_;
  std::vector<std::vector<int>> node_ranks_;  // per node (first-appearance order): its ranks
};

}  // namespace dtplan::calibrate
