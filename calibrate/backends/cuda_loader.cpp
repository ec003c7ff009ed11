// Registers the `cuda` backend and loads its module (cuda.cpp, built as
// libdtplan_cuda_backend.so next to the dtplan binary's build folder) when a calibration first
// asks for it. The module links cuBLASLt and NCCL; loading them only on demand keeps every other
// dtplan command's start-up fast. DTPLAN_CUDA_BACKEND overrides the module's path.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "calibrate/i_backend.h"
#include "core/error.h"
#include "core/registry.h"

namespace dtplan::calibrate {
namespace {

class CudaBackendLoader : public ICalibrationBackend {
 public:
  std::unique_ptr<ICalibrationSession> open(const BackendOptions& o,
                                            const ProcessGroup& world) const override {
    std::call_once(once_, [this] { load(); });
    if (!impl_)
      throw InputError(SourceLocation{}, "--backend",
                       fmt::format("the cuda backend could not be loaded: {}", error_));
    return impl_->open(o, world);
  }

 private:
  void load() const {
    const char* env = std::getenv("DTPLAN_CUDA_BACKEND");
    const std::string path = env ? env : DTPLAN_CUDA_BACKEND_PATH;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      error_ = fmt::format("{} (set DTPLAN_CUDA_BACKEND to the module's path)", dlerror());
      return;
    }
    using Create = ICalibrationBackend* (*)();
    auto create = reinterpret_cast<Create>(dlsym(h, "dtplan_cuda_backend_create"));
    if (!create) {
      error_ = fmt::format("{} has no dtplan_cuda_backend_create", path);
      return;
    }
    impl_.reset(create());
  }
  mutable std::once_flag once_;
  mutable std::unique_ptr<ICalibrationBackend> impl_;
  mutable std::string error_;
};

}  // namespace

DTPLAN_REGISTER(ICalibrationBackend, CudaBackendLoader, "cuda",
                "cuBLASLt GEMMs (bf16, fp16, fp8) and NCCL collectives, one GPU per rank")

}  // namespace dtplan::calibrate
