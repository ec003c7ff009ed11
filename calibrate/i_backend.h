// A calibration backend: where measurements come from. One file per backend under
// calibrate/backends/, registered by name (`dtplan list backends`):
//
//   DTPLAN_REGISTER(ICalibrationBackend, CpuBackend, "cpu", "host BLAS GEMM and MPI collectives");
//
// The driver (calibrate/driver.h) owns the sweep, the journal, the watchdog and the fit; a
// backend only opens a session that says what it can measure and measures one task at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "calibrate/task.h"

namespace dtplan::calibrate {

class ProcessGroup;

struct BackendOptions {
  std::vector<std::string> inputs;  // replay: files of recorded measurements
  int repeats = 5;                  // timed repeats per task; the median is kept
  int warmup = 2;
};

// What a session measures on and with (recorded in the profile's provenance).
struct Environment {
  std::string device;                 // "NVIDIA H200" or the host CPU model
  std::string software;               // driver, CUDA, cuBLAS, NCCL, BLAS or MPI versions
  std::string tool;                   // "dtplan calibrate --backend cpu"
  std::vector<Precision> precisions;  // GEMM precisions it can time
  // Largest collective buffer (bytes) it may allocate; 0 = no collectives.
  int64_t max_collective_bytes = 0;
  bool collectives = true;
};

class ICalibrationSession {
 public:
  virtual ~ICalibrationSession() = default;
  virtual Environment environment() const = 0;
  // Recorded sessions (replay) define their own tasks; live ones return empty and measure the
  // driver's sweep.
  virtual std::vector<Task> recorded_tasks() const { return {}; }
  // Measures one task. Every rank calls it for every task, in the same order (collectives);
  // ranks outside the task's group take part only in the synchronization. The result is
  // meaningful on rank 0. Throws InputError (bad request) or std::runtime_error (failure).
  virtual Measurement measure(const Task& task) = 0;
  // Called from the watchdog thread when a task hangs: release what can be released
  // (ncclCommAbort) before the process group aborts.
  virtual void abort_hung() {}
};

class ICalibrationBackend {
 public:
  virtual ~ICalibrationBackend() = default;
  virtual std::unique_ptr<ICalibrationSession> open(const BackendOptions& options,
                                                    const ProcessGroup& world) const = 0;
};

}  // namespace dtplan::calibrate
