#include "calibrate/driver.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "calibrate/fit.h"
#include "calibrate/journal.h"
#include "calibrate/output.h"
#include "calibrate/process_group.h"
#include "core/atomic_file.h"
#include "core/catalog.h"
#include "core/error.h"
#include "core/registry.h"

namespace dtplan::calibrate {

namespace {

// Aborts the whole run when one task does not finish in time (a hung collective): names the
// task, releases the backend (ncclCommAbort) and ends every rank.
class Watchdog {
 public:
  Watchdog(double timeout_s, const ProcessGroup& world, ICalibrationSession& session)
      : timeout_(timeout_s), world_(world), session_(session), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(std::string what) {
    std::lock_guard<std::mutex> l(mu_);
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> l(mu_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(l);
        continue;
      }
      if (cv_.wait_until(l, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr,
                     "dtplan: error: %s: %s did not complete within %g s (watchdog, "
                     "--timeout-s); aborting the calibration. Measurements so far are in the "
                     "journal; rerun with --resume.\n",
                     world_.where().c_str(), what_.c_str(), timeout_);
        session_.abort_hung();
        world_.abort(kExitWatchdog);
      }
    }
  }
  double timeout_;
  const ProcessGroup& world_;
  ICalibrationSession& session_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

std::string describe(const Task& t) {
  if (t.kind == TaskKind::kGemm)
    return fmt::format("GEMM {} {} x {} x {}", to_string(t.precision), t.m, t.n, t.k);
  return fmt::format("{} of {} bytes in a group of {} rank(s) ({})", to_string(t.op), t.bytes,
                     t.group_size, to_string(t.scope));
}

std::string utc_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string replace_extension(const std::string& path, const std::string& ext) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    return path.substr(0, dot) + ext;
  return path + ext;
}

}  // namespace

int run_calibration(const CalibrateOptions& o, const ProcessGroup& world) {
  const ICalibrationBackend* backend = Registry<ICalibrationBackend>::global().find(o.backend);
  if (!backend)
    throw InputError(
        SourceLocation{}, "--backend",
        fmt::format("unknown backend '{}'{}", o.backend,
                    did_you_mean(o.backend, Registry<ICalibrationBackend>::global().names())));
  const std::string base_path = resolve_profile_path(o.profile);
  const HardwareProfile base = load_profile_file(base_path);
  auto session = backend->open(o.backend_options, world);
  Environment env = session->environment();
  // Every rank must build the same sweep: take the smallest buffer any rank may allocate.
  env.max_collective_bytes = static_cast<int64_t>(
      -world.max(-static_cast<double>(env.max_collective_bytes), "the sweep set-up"));

  // A replaying session defines its own tasks; a measuring one runs the standard sweep.
  std::vector<Task> tasks = session->recorded_tasks();
  const bool replaying = !tasks.empty();
  if (!replaying) tasks = standard_sweep(o.sweep, env, world);
  if (tasks.empty())
    throw InputError(SourceLocation{}, "--ops",
                     "nothing to measure: the selected operations need more ranks, sizes or "
                     "precisions than this run has");

  // Replaying recorded files measures nothing: its journal is scratch, started afresh and
  // removed at the end (unless the user names one).
  const bool scratch_journal = replaying && o.journal.empty();
  const std::string journal_path = o.journal.empty() ? o.out + ".journal" : o.journal;
  if (scratch_journal && world.is_root()) std::remove(journal_path.c_str());
  const std::string summary_path = o.summary.empty() ? replace_extension(o.out, ".md") : o.summary;
  const std::string signature =
      fmt::format("backend={} ranks={} {}", o.backend, world.size(), o.sweep.signature());
  std::unique_ptr<Journal> journal;
  // A scratch journal goes with the run on every way out, errors included (issue #21: a refused
  // replay used to leave it behind); a named or live one stays for --resume.
  struct ScratchJournal {
    bool active;
    const std::string& path;
    std::unique_ptr<Journal>& journal;
    ~ScratchJournal() {
      if (!active || std::uncaught_exceptions() == 0) return;
      journal.reset();
      std::remove(path.c_str());
    }
  } scratch_cleanup{scratch_journal && world.is_root(), journal_path, journal};
  std::string done(tasks.size(), '0');
  if (world.is_root()) {
    journal = std::make_unique<Journal>(journal_path, signature, o.resume);
    if (journal->torn_bytes() > 0)
      fmt::print(stderr,
                 "dtplan: note: cut {} bytes of a measurement torn by the interrupted run\n",
                 journal->torn_bytes());
    for (size_t i = 0; i < tasks.size(); ++i)
      if (journal->has(tasks[i].key())) done[i] = '1';
  }
  done = world.broadcast(done, "the journal check");
  const size_t reused = static_cast<size_t>(std::count(done.begin(), done.end(), '1'));
  // A replay's scratch journal is removed when the run ends: naming it would point at a file
  // that will not be there (found by a new-user trial).
  if (world.is_root() && scratch_journal)
    fmt::print(stderr, "dtplan calibrate: {} recorded measurement(s) to replay\n", tasks.size());
  else if (world.is_root())
    fmt::print(stderr, "dtplan calibrate: {} task(s) on {} rank(s), {} host(s); {} already in {}\n",
               tasks.size(), world.size(), world.nodes(), reused, journal_path);

  const bool tty = isatty(STDERR_FILENO) != 0;
  // The journal's measurements in sweep order (earlier runs and this one), on rank 0.
  // Index i of `out` is task i when `index` is given (-1 where the journal has none).
  auto journal_measurements = [&](std::vector<int>* index = nullptr) {
    std::vector<Measurement> out;
    Journal view(journal_path, signature, true);
    std::unordered_map<std::string, const Measurement*> by_key;
    for (const auto& m : view.existing()) by_key.emplace(m.task.key(), &m);
    if (index) index->assign(tasks.size(), -1);
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto it = by_key.find(tasks[i].key());
      if (it == by_key.end()) continue;
      if (index) (*index)[i] = static_cast<int>(out.size());
      out.push_back(*it->second);
    }
    return out;
  };
  {
    Watchdog dog(o.timeout_s, world, *session);
    size_t measured = 0, to_measure = tasks.size() - reused;
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (done[i] == '1') continue;
      dog.arm(describe(tasks[i]));
      Measurement m = session->measure(tasks[i]);
      dog.disarm();
      ++measured;
      if (world.is_root()) {
        journal->append(m);
        if (o.progress && (tty || measured == to_measure || measured % 25 == 0)) {
          const double el =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print(stderr, "{}[{}/{}] {} ({:.0f} s elapsed){}", tty ? "\r\033[K" : "", measured,
                     to_measure, describe(tasks[i]), el, tty && measured < to_measure ? "" : "\n");
        }
      }
    }
    // One second look at the collective sizes the fit misses by more than 10% (a measurement
    // disturbed by other work on the host or fabric); the faster of the two is kept.
    if (!replaying) {
      std::string again;
      if (world.is_root()) {
        std::vector<int> index;
        const auto ms = journal_measurements(&index);
        const auto fits = fit_collectives(ms);
        for (size_t i = 0; i < tasks.size(); ++i) {
          if (tasks[i].kind != TaskKind::kCollective || index[i] < 0) continue;
          const Measurement& m = ms[static_cast<size_t>(index[i])];
          for (const auto& f : fits)
            if (f.op == m.task.op && f.scope == m.task.scope && f.group_size == m.task.group_size &&
                std::abs(f.predict_s(static_cast<double>(m.task.bytes)) - m.time_s) >
                    0.10 * m.time_s)
              again += fmt::format("{} ", i);
        }
      }
      again = world.broadcast(again, "the re-measurement list");
      std::istringstream in(again);
      size_t i = 0, n = 0;
      while (in >> i) {
        dog.arm(describe(tasks[i]));
        Measurement m = session->measure(tasks[i]);
        dog.disarm();
        ++n;
        if (world.is_root()) journal->append(m, true);
      }
      if (world.is_root() && n > 0)
        fmt::print(
            stderr,
            "dtplan calibrate: measured {} size(s) again that the fit missed by more than 10%\n",
            n);
    }
  }
  world.quiet_barrier("the end of the measurements");
  if (!world.is_root()) return 0;

  CalibrationResult r;
  r.backend = o.backend;
  r.date = utc_date();
  r.env = env;
  r.ranks = world.size();
  r.hosts = world.nodes();
  r.measurements = journal_measurements();
  // GEMM: the profile's parameters come from its own precision if measured, else the first.
  std::vector<Precision> precs;
  for (const auto& m : r.measurements)
    if (m.task.kind == TaskKind::kGemm &&
        std::find(precs.begin(), precs.end(), m.task.precision) == precs.end())
      precs.push_back(m.task.precision);
  auto it = std::find(precs.begin(), precs.end(), Precision::kBf16);
  if (it != precs.end()) std::rotate(precs.begin(), it, it + 1);
  // What the fits may be given (a hostile-input trial replayed scaled and foreign journals and
  // got profiles with 1.16 PB/s collectives or a GEMM curve 70x too slow, exit 0):
  // - a two-parameter GEMM curve needs three shapes at least;
  // - no collective moves its bytes faster than sixteen times the fastest links of a node (busbw
  //   counts every link a rank drives: NVLink per direction, or all the node's NICs; a CPU
  //   host's shared-memory collectives run from its caches, above its nominal link);
  // - a curve that explains the GEMM times worse than their mean (R^2 < 0) is not written.
  const char* const what_in = replaying ? "--input" : "--out";
  for (Precision p : precs) {
    std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;
    for (const auto& m : r.measurements)
      if (m.task.kind == TaskKind::kGemm && m.task.precision == p)
        shapes.emplace_back(m.task.m, m.task.n, m.task.k);
    std::sort(shapes.begin(), shapes.end());
    shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
    if (shapes.size() < 3)
      throw InputError({}, what_in,
                       fmt::format("{} GEMM shape(s) measured in {}: the efficiency curve has two "
                                   "parameters and needs three shapes at least, so nothing was "
                                   "written",
                                   shapes.size(), to_string(p)));
  }
  const double link_bound_gbps =
      16 * std::max(base.node.nvlink_gbps_per_direction,
                    base.scale_out.nic_gbps * std::max(base.scale_out.nics_per_node, 1));
  for (const auto& m : r.measurements)
    if (m.task.kind == TaskKind::kCollective && m.busbw_gbps() > link_bound_gbps)
      throw InputError({}, what_in,
                       fmt::format("{} of {} bytes over {} ranks at {:.4g} GB/s bus bandwidth: "
                                   "more than sixteen times the fastest links of a {} node ({:.0f} "
                                   "GB/s), so the measurement cannot be of this device; nothing "
                                   "was written",
                                   to_string(m.task.op), m.task.bytes, m.task.group_size,
                                   m.busbw_gbps(), base.name, link_bound_gbps / 16));
  if (!precs.empty()) {
    GemmFit primary = fit_gemm(r.measurements, base, precs.front());
    r.gemm_fits.push_back(primary);
    for (size_t i = 1; i < precs.size(); ++i)
      r.gemm_fits.push_back(fit_gemm(r.measurements, base, precs[i]));
    for (const GemmFit& g : r.gemm_fits)
      if (g.r2 < 0)
        throw InputError(
            {}, what_in,
            fmt::format("the {} GEMM curve explains the measured times worse than their mean (R^2 "
                        "{:.2f}, largest residual {:.0f}%): is --profile {} this device's? "
                        "Nothing was written",
                        to_string(g.precision), g.r2, 100 * g.max_rel_residual, base.name));
  }
  r.collective_fits = fit_collectives(r.measurements);

  // The profile must load as any other before anything is written (issue #21: measurements that
  // fit to out-of-range numbers used to leave a profile that failed its own check, and the
  // journal, behind). The check reads a private copy.
  const std::string profile_text = calibrated_profile_yaml(base_path, base, r);
  {
    const std::string probe =
        (std::filesystem::temp_directory_path() /
         fmt::format("dtplan-calibrated-check-{}-{}.yaml", ::getpid(), world.rank()))
            .string();
    write_file_atomic(probe, profile_text);
    try {
      load_profile_file(probe);
    } catch (const InputError& e) {
      std::remove(probe.c_str());
      throw InputError({}, replaying ? "--input" : "--out",
                       fmt::format("the measurements fit to a profile that does not load, so "
                                   "nothing was written: {}",
                                   e.reason()));
    }
    std::remove(probe.c_str());
  }
  write_file_atomic(summary_path, calibration_summary_markdown(base, r, o.out));
  write_file_atomic(o.out, profile_text);
  if (scratch_journal) {
    journal.reset();
    std::remove(journal_path.c_str());
    fmt::print("calibrated profile: {}\nsummary: {}\n({} recorded measurements replayed)\n", o.out,
               summary_path, r.measurements.size());
  } else {
    fmt::print(
        "calibrated profile: {}\nsummary: {}\njournal: {} ({} measurements, {} from "
        "earlier runs)\n",
        o.out, summary_path, journal_path, r.measurements.size(), reused);
  }
  for (const auto& g : r.gemm_fits)
    fmt::print(
        "gemm {}: max_fraction {:.3f}, half_saturation {:.3g} GFLOP, R^2 {:.4f}, max "
        "residual {:.1f}% over {} shapes{}\n",
        to_string(g.precision), g.max_fraction, g.half_saturation_gflop, g.r2,
        100 * g.max_rel_residual, g.points,
        weak_fit(g) ? " (weak fit: trust the measured table, not the model, here)" : "");
  for (const auto& c : r.collective_fits)
    fmt::print("{} {} n{}: {} regime(s), R^2 {:.4f}, max residual {:.1f}% over {} sizes\n",
               to_string(c.op), to_string(c.scope), c.group_size, c.segments.size(), c.r2,
               100 * c.max_rel_residual, c.points);
  return 0;
}

}  // namespace dtplan::calibrate
