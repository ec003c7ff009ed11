// Registers the `cuda` executor backend and loads its module (cuda.cpp, built as
// libdtplan_cuda_executor.so) when a run first asks for it, as the calibrator's CUDA backend is
// loaded (calibrate/backends/cuda_loader.cpp): cuBLASLt and NCCL stay out of every other
// command's start-up. DTPLAN_CUDA_EXECUTOR overrides the module's path.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/registry.h"
#include "executor/i_exec_backend.h"

namespace dtplan::exec {
namespace {

class CudaExecLoader : public IExecBackend {
 public:
  std::unique_ptr<IExecSession> open(const ExecBackendOptions& o,
                                     const calibrate::ProcessGroup& world) const override {
    std::call_once(once_, [this] { load(); });
    if (!impl_)
      throw InputError(SourceLocation{}, "--backend",
                       fmt::format("the cuda executor backend could not be loaded: {}", error_));
    return impl_->open(o, world);
  }

 private:
  void load() const {
    const char* env = std::getenv("DTPLAN_CUDA_EXECUTOR");
    const std::string path = env ? env : DTPLAN_CUDA_EXECUTOR_PATH;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      error_ = fmt::format("{} (set DTPLAN_CUDA_EXECUTOR to the module's path)", dlerror());
      return;
    }
    using Create = IExecBackend* (*)();
    auto create = reinterpret_cast<Create>(dlsym(h, "dtplan_cuda_executor_create"));
    if (!create) {
      error_ = fmt::format("{} has no dtplan_cuda_executor_create", path);
      return;
    }
    impl_.reset(create());
  }
  mutable std::once_flag once_;
  mutable std::unique_ptr<IExecBackend> impl_;
  mutable std::string error_;
};

}  // namespace

DTPLAN_REGISTER(IExecBackend, CudaExecLoader, "cuda",
                "cuBLASLt GEMMs and NCCL collectives on the GPUs, one per rank (one-stage plans)")

}  // namespace dtplan::exec
