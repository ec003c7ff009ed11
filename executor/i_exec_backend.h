// An executor backend: where a plan's step runs. One file per backend under executor/backends/,
// registered by name (`dtplan list executors`):
//
//   DTPLAN_REGISTER(IExecBackend, CpuExecBackend, "cpu", "host BLAS GEMMs and MPI collectives");
//
// The runner (executor/runner.h) owns the program, the order, the memory accounting, the
// timers' bookkeeping and the watchdog; a backend opens a session that builds its groups,
// holds real memory and runs one instruction at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "executor/rank_program.h"

namespace dtplan::calibrate {
class ProcessGroup;
}

namespace dtplan::exec {

struct ExecEnvironment {
  std::string device;    // "NVIDIA H200" or the host CPU model
  std::string software;  // BLAS / MPI / CUDA versions
  // How the backend runs what the program describes, said in every output (e.g. "GEMMs in
  // fp32 through OpenBLAS sgemm; attention as its two batched GEMMs, no softmax").
  std::vector<std::string> notes;
};

class IExecSession {
 public:
  virtual ~IExecSession() = default;
  virtual ExecEnvironment environment() const = 0;
  // Called by every rank, for every group kind, in the same order: this rank is member `key`
  // of group `color` (RankGrid::group_index / coord), of `size` ranks; color -1: the group has
  // a member outside the run, so no communicator (its collectives are modelled).
  virtual void make_group(GroupKind kind, int color, int key, int size) = 0;
  // Scratch for the program's largest operands (called once, before the first step).
  virtual void prepare(const RankProgram& program) = 0;
  // Real memory of `bytes`, every page touched (throws std::bad_alloc when it is not there).
  virtual void* allocate(double bytes) = 0;
  virtual void release(void* p, double bytes) = 0;
  // Runs one compute, collective, send or receive instruction (never a modelled one); returns
  // its measured seconds.
  // Sends do not block: finish_sends() completes them (at the step's end).
  virtual double run(const Instr& instr) = 0;
  virtual void finish_sends() = 0;
  // The precision the backend runs a GEMM op in (for measured tables: --update-profile).
  virtual Precision gemm_precision(const Op& op) const = 0;
  // Whether the device's runtime holds the CUDA context and NCCL buffers itself (the executor
  // then allocates only the rest of the memory model's buffers: runtime_buffer_bytes).
  virtual bool holds_runtime_buffers() const { return false; }
  // Peak memory the device itself reports as used (0 where it has no such figure).
  virtual double device_peak_bytes() const { return 0; }
  // From the watchdog thread when an instruction hangs: release what can be released.
  virtual void abort_hung() {}
};

struct ExecBackendOptions {
  int scale = 1;  // shapes already divided by it (the model is scaled before the program)
  Precision precision = Precision::kBf16;  // the workload's training precision
};

class IExecBackend {
 public:
  virtual ~IExecBackend() = default;
  virtual std::unique_ptr<IExecSession> open(const ExecBackendOptions& options,
                                             const calibrate::ProcessGroup& world) const = 0;
  // The --scale a run takes when none is given (the cpu backend shrinks shapes).
  virtual int default_scale() const { return 1; }
};

}  // namespace dtplan::exec
