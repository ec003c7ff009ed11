// The `replay` backend: measurements recorded earlier (a dtplan journal, a CSV, or nccl-tests
// `-J` JSON reports; calibrate/recorded.h), fitted as if measured now. For tests, and for users
// who already ran nccl-tests on their cluster.
#include <fmt/format.h>

#include <set>
#include <unordered_map>

#include "calibrate/i_backend.h"
#include "calibrate/process_group.h"
#include "calibrate/recorded.h"
#include "core/error.h"
#include "core/registry.h"

namespace dtplan::calibrate {
namespace {

class ReplaySession : public ICalibrationSession {
 public:
  ReplaySession(const BackendOptions& o, const ProcessGroup& world) {
    if (world.size() > 1)
      throw InputError(SourceLocation{}, "--backend",
                       "replay reads files: run it as one process, not under mpirun");
    if (o.inputs.empty())
      throw InputError(SourceLocation{}, "--input",
                       "the replay backend needs --input FILE (a journal, CSV or nccl-tests JSON)");
    std::set<std::string> seen;
    for (const auto& path : o.inputs) {
      for (auto& r : read_recorded(path)) {
        // The first recording of a task wins; later duplicates are ignored (and counted).
        if (!seen.insert(r.measurement.task.key()).second) {
          ++duplicates_;
          continue;
        }
        by_key_.emplace(r.measurement.task.key(), records_.size());
        if (env_.device.empty()) env_.device = r.device;
        if (env_.software.empty()) env_.software = r.software;
        records_.push_back(std::move(r));
      }
    }
    if (env_.device.empty()) env_.device = "recorded measurements";
    env_.tool = "dtplan calibrate --backend replay";
    for (const auto& r : records_) {
      const Task& t = r.measurement.task;
      if (t.kind == TaskKind::kGemm && std::find(env_.precisions.begin(), env_.precisions.end(),
                                                 t.precision) == env_.precisions.end())
        env_.precisions.push_back(t.precision);
    }
    env_.max_collective_bytes = int64_t{1} << 40;
    if (duplicates_ > 0)
      fmt::print(stderr, "dtplan: note: {} duplicate measurement(s) in --input ignored\n",
                 duplicates_);
  }
  Environment environment() const override { return env_; }
  std::vector<Task> recorded_tasks() const override {
    std::vector<Task> out;
    for (const auto& r : records_) out.push_back(r.measurement.task);
    return out;
  }
  Measurement measure(const Task& task) override {
    auto it = by_key_.find(task.key());
    if (it != by_key_.end()) return records_[it->second].measurement;
    throw InputError(SourceLocation{}, "--input",
                     fmt::format("no recorded measurement for {}", task.key()));
  }

 private:
  Environment env_;
  std::vector<Recorded> records_;
  std::unordered_map<std::string, size_t> by_key_;  // task key -> index in records_
  int duplicates_ = 0;
};

class ReplayBackend : public ICalibrationBackend {
 public:
  std::unique_ptr<ICalibrationSession> open(const BackendOptions& o,
                                            const ProcessGroup& world) const override {
    return std::make_unique<ReplaySession>(o, world);
  }
};

}  // namespace

DTPLAN_REGISTER(ICalibrationBackend, ReplayBackend, "replay",
                "recorded measurements: a dtplan journal, a CSV, or nccl-tests -J JSON reports")

}  // namespace dtplan::calibrate
