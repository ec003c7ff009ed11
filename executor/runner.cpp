#include "executor/runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "calibrate/process_group.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/registry.h"
#include "executor/i_exec_backend.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/memory_model.h"
#include "simulator/des/step_sim.h"

namespace dtplan::exec {

std::vector<std::string> executor_backends() { return Registry<IExecBackend>::global().names(); }

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Ends the job when one instruction does not finish within the timeout (a peer that died or
// stopped leaves the others waiting in a collective or a receive): names this rank, the
// instruction, its group and the group's ranks. The runner only stores an index and a start
// time per instruction (two atomics), so watching costs the step nothing measurable.
class Watchdog {
 public:
  Watchdog(double timeout_s, const calibrate::ProcessGroup& world, IExecSession& session,
           const RankProgram& prog, const RankGrid& grid)
      : timeout_(timeout_s),
        world_(world),
        session_(session),
        prog_(prog),
        grid_(grid),
        thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // index >= 0: an instruction; -1: the step's sends being completed; -2: idle.
  void enter(int64_t index) {
    started_.store(now_s(), std::memory_order_relaxed);
    current_.store(index, std::memory_order_release);
  }
  void leave() { current_.store(-2, std::memory_order_release); }

 private:
  std::string describe(int64_t index) const {
    if (index < 0) return "completing the step's pipeline sends";
    const Instr& i = prog_.instrs[static_cast<size_t>(index)];
    std::string s = fmt::format("instruction {} ({})", index, i.label());
    if (i.kind == InstrKind::kCollective) {
      std::string ranks;
      for (int r : grid_.group(i.group, prog_.rank)) {
        if (!ranks.empty()) ranks += ',';
        ranks += std::to_string(r);
      }
      s += fmt::format(", {} of {:.0f} bytes in the {} group of ranks {}",
                       to_string(i.op.collective), i.op.bytes, to_string(i.group), ranks);
    } else if (i.kind == InstrKind::kRecv || i.kind == InstrKind::kSend) {
      s += fmt::format(", {:.0f} bytes, pipeline peer rank {}", i.bytes, i.peer);
    }
    return s;
  }
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      cv_.wait_for(l, std::chrono::milliseconds(100));
      const int64_t cur = current_.load(std::memory_order_acquire);
      if (stop_ || cur == -2) continue;
      if (now_s() - started_.load(std::memory_order_relaxed) < timeout_) continue;
      std::fprintf(stderr,
                   "dtplan: error: %s: %s did not complete within %g s (watchdog, --timeout-s): "
                   "a peer is stopped or dead, or waits on one that is; ending the run\n",
                   world_.where().c_str(), describe(cur).c_str(), timeout_);
      session_.abort_hung();
      world_.abort(kExitWatchdog);
    }
  }
  double timeout_;
  const calibrate::ProcessGroup& world_;
  IExecSession& session_;
  const RankProgram& prog_;
  const RankGrid& grid_;
  std::atomic<int64_t> current_{-2};
  std::atomic<double> started_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// DTPLAN_EXEC_STALL=RANK:INDEX[:exit] (tests): that rank stops before instruction INDEX of
// the first step, as a hung peer would (or, with ":exit", dies with exit code 9), so the
// watchdog's and the launcher's messages can be checked.
struct Stall {
  int rank = -1;
  long long index = -1;
  bool exit = false;
};
Stall stall_from_env() {
  Stall s;
  if (const char* v = std::getenv("DTPLAN_EXEC_STALL")) {
    char mode[8] = {};
    const int n = std::sscanf(v, "%d:%lld:%7s", &s.rank, &s.index, mode);
    if (n < 2) return {};
    s.exit = n == 3 && std::string(mode) == "exit";
  }
  return s;
}

nlohmann::json rank_json(const RankResult& r) {
  nlohmann::json j;
  j["rank"] = r.rank;
  j["stage"] = r.stage;
  j["host"] = r.host;
  j["step_s"] = r.step_s;
  j["peak_bytes"] = r.peak_bytes;
  j["predicted_peak_bytes"] = r.predicted_peak_bytes;
  j["device_peak_bytes"] = r.device_peak_bytes;
  j["instructions"] = r.instructions;
  j["modelled_ops"] = r.modelled_ops;
  j["modelled_s"] = r.modelled_s;
  j["gemm_shapes"] = nlohmann::json::array();
  for (const auto& g : r.gemm_shapes)
    j["gemm_shapes"].push_back({g.m, g.n, g.k, g.count, g.calls, g.measured_s, g.predicted_s,
                                static_cast<int>(g.precision)});
  j["collective_shapes"] = nlohmann::json::array();
  for (const auto& c : r.collective_shapes)
    j["collective_shapes"].push_back({static_cast<int>(c.op), c.group_size, c.crosses_nodes,
                                      c.bytes, c.calls, c.measured_s, c.predicted_s});
  for (int k = 0; k < kNumOpClasses; ++k) {
    j["measured_s"].push_back(r.classes.measured_s[k]);
    j["predicted_s"].push_back(r.classes.predicted_s[k]);
    j["count"].push_back(r.classes.count[k]);
  }
  return j;
}

RankResult rank_from_json(const nlohmann::json& j) {
  RankResult r;
  r.rank = j.at("rank");
  r.stage = j.at("stage");
  r.host = j.at("host");
  r.step_s = j.at("step_s").get<std::vector<double>>();
  r.peak_bytes = j.at("peak_bytes");
  r.predicted_peak_bytes = j.at("predicted_peak_bytes");
  r.device_peak_bytes = j.at("device_peak_bytes");
  r.instructions = j.at("instructions");
  r.modelled_ops = j.at("modelled_ops");
  r.modelled_s = j.at("modelled_s");
  for (const auto& g : j.at("gemm_shapes"))
    r.gemm_shapes.push_back({g.at(0).get<int64_t>(), g.at(1).get<int64_t>(), g.at(2).get<int64_t>(),
                             g.at(3).get<int>(), static_cast<Precision>(g.at(7).get<int>()),
                             g.at(4).get<int>(), g.at(5).get<double>(), g.at(6).get<double>()});
  for (const auto& c : j.at("collective_shapes"))
    r.collective_shapes.push_back(
        {static_cast<CollectiveOp>(c.at(0).get<int>()), c.at(1).get<int>(), c.at(2).get<bool>(),
         c.at(3).get<double>(), c.at(4).get<int>(), c.at(5).get<double>(), c.at(6).get<double>()});
  for (int k = 0; k < kNumOpClasses; ++k) {
    r.classes.measured_s[k] = j.at("measured_s").at(static_cast<size_t>(k));
    r.classes.predicted_s[k] = j.at("predicted_s").at(static_cast<size_t>(k));
    r.classes.count[k] = j.at("count").at(static_cast<size_t>(k));
  }
  return r;
}

}  // namespace

ExecResult execute(const ModelSpec& model, const Cluster& c, const Workload& w, const Plan& p,
                   const ExecOptions& o, const calibrate::ProcessGroup& world) {
  const IExecBackend* backend = Registry<IExecBackend>::global().find(o.backend);
  if (!backend) {
    std::string names;
    for (const auto& n : executor_backends()) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    throw InputError(
        {}, "--backend",
        fmt::format("unknown executor backend '{}' (built here: {})", o.backend, names));
  }
  ExecResult out;
  out.backend = o.backend;
  out.scale = o.scale > 0 ? o.scale : backend->default_scale();
  out.model = scale_model(model, p, out.scale);
  const ModelSpec& m = out.model;
  // The plan's ranks this run holds: process i runs plan rank subset[i].
  std::vector<int> subset = o.ranks;
  if (subset.empty())
    for (int r = 0; r < p.world(); ++r) subset.push_back(r);
  std::vector<int> process_of(static_cast<size_t>(p.world()), -1);
  for (size_t i = 0; i < subset.size(); ++i) {
    const int r = subset[i];
    if (r < 0 || r >= p.world())
      throw InputError({}, "--ranks",
                       fmt::format("rank {} is not one of the plan's {} GPUs (0..{})", r, p.world(),
                                   p.world() - 1));
    if (process_of[static_cast<size_t>(r)] >= 0)
      throw InputError({}, "--ranks", fmt::format("rank {} is listed twice", r));
    process_of[static_cast<size_t>(r)] = static_cast<int>(i);
  }
  if (world.size() != static_cast<int>(subset.size()))
    throw InputError(
        {}, o.ranks.empty() ? "--gpus" : "--ranks",
        fmt::format("the run holds {} of the plan's GPUs but {} process(es) were started: start "
                    "one per GPU (mpirun -np {} dtplan execute ...)",
                    subset.size(), world.size(), subset.size()));
  const int plan_rank = subset[static_cast<size_t>(world.rank())];
  out.plan_ranks = p.world();
  {
    const std::vector<Violation> v = validate_plan(m, c.num_gpus, w, p);
    if (!v.empty())
      throw InputError(
          {}, v.front().flag,
          fmt::format("{} (for the model as the executor runs it: {})", v.front().reason, m.name));
  }
  const RankGrid grid(p);
  auto inside = [&](GroupKind kind) {
    for (int r : grid.group(kind, plan_rank))
      if (process_of[static_cast<size_t>(r)] < 0) return false;
    return true;
  };
  RankProgram prog = build_rank_program(m, w, p, c, grid, plan_rank);
  // Peers as processes; what leaves the run becomes a wait of the model's time.
  bool kind_inside[kNumGroupKinds];
  for (int k = 0; k < kNumGroupKinds; ++k) kind_inside[k] = inside(static_cast<GroupKind>(k));
  for (Instr& i : prog.instrs) {
    if (i.kind == InstrKind::kCollective) i.modelled = !kind_inside[static_cast<int>(i.group)];
    if (i.kind == InstrKind::kSend || i.kind == InstrKind::kRecv) {
      const int proc = process_of[static_cast<size_t>(i.peer)];
      if (proc < 0) {
        i.modelled = true;
        // A receive from outside waits the transfer's time; the sender's schedule is not run.
        if (i.kind == InstrKind::kRecv) i.predicted_s = 0;
      } else {
        i.peer = proc;
      }
    }
  }
  ExecBackendOptions bo;
  bo.scale = out.scale;
  bo.precision = w.precision;
  std::unique_ptr<IExecSession> session = backend->open(bo, world);
  const ExecEnvironment env = session->environment();
  out.device = env.device;
  out.software = env.software;
  out.notes = env.notes;
  if (o.empty_ops) out.notes.push_back("--empty-ops: every op skipped (the executor's own cost)");
  if (static_cast<int>(subset.size()) < p.world())
    out.notes.push_back(fmt::format(
        "--ranks: {} of the plan's {} GPUs run; collectives and pipeline transfers with a peer "
        "outside them are waits of the model's time (per rank: modelled_ops, modelled_s), and a "
        "receive from outside does not wait for the sending stage's work, so the measured step "
        "holds no pipeline bubble from the stages not run",
        subset.size(), p.world()));
  for (int k = 0; k < kNumGroupKinds; ++k) {
    const auto kind = static_cast<GroupKind>(k);
    // A group with a member outside the run has no communicator (color -1): its collectives
    // are modelled.
    session->make_group(kind, kind_inside[k] ? grid.group_index(kind, plan_rank) : -1,
                        grid.coord(kind, plan_rank), grid.group_size(kind));
  }
  session->prepare(prog);

  RankResult mine;
  mine.rank = plan_rank;
  mine.stage = prog.stage;
  mine.host = world.hostname();
  mine.predicted_peak_bytes = prog.predicted_memory.total_bytes();
  mine.instructions = static_cast<int>(prog.instrs.size());

  // What the memory model says the rank holds all step: weights, gradients, optimizer state
  // and buffers, allocated for real.
  double held = 0;
  std::vector<std::pair<void*, double>> static_blocks;
  struct Release {  // every block goes back on any way out, errors included
    IExecSession& session;
    std::vector<std::pair<void*, double>>& blocks;
    ~Release() {
      for (auto& [ptr, bytes] : blocks) session.release(ptr, bytes);
    }
  } release_static{*session, static_blocks};
  auto hold = [&](double bytes) {
    if (bytes <= 0) return;
    static_blocks.emplace_back(session->allocate(bytes), bytes);
    held += bytes;
  };
  const StageMemory& mem = prog.predicted_memory;
  try {
    hold(mem.weights_bytes);
    hold(mem.grads_bytes);
    hold(mem.optimizer_bytes);
    hold(mem.buffers_bytes - (session->holds_runtime_buffers() ? runtime_buffer_bytes(p) : 0.0));
  } catch (const std::bad_alloc&) {
    throw InputError({}, "--gpus",
                     fmt::format("{}: out of memory allocating the {:.3g} GB the memory model "
                                 "gives this rank's weights, gradients, optimizer and buffers",
                                 world.where(), mem.total_bytes() - mem.activations_bytes));
  }
  double peak = held;

  std::ofstream log;
  if (!o.op_log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.op_log_dir, ec);
    log.open(fmt::format("{}/rank-{}.log", o.op_log_dir, plan_rank));
    if (ec || !log)
      throw InputError({}, "--op-log",
                       fmt::format("cannot write in {}{}", o.op_log_dir,
                                   ec ? ": " + ec.message() : std::string()));
  }
  const Stall stall = stall_from_env();
  Watchdog dog(o.timeout_s, world, *session, prog, grid);
  using BlockKey = std::tuple<int, int, int>;  // (micro-batch, chunk, layer or block kind)
  std::map<BlockKey, std::pair<void*, double>> live;
  struct ReleaseLive {
    IExecSession& session;
    std::map<BlockKey, std::pair<void*, double>>& blocks;
    ~ReleaseLive() {
      for (auto& [key, block] : blocks) session.release(block.first, block.second);
    }
  } release_live{*session, live};
  for (int step = 0; step < o.steps; ++step) {
    world.barrier("the start of a step");
    ClassTimes ct;
    int modelled_ops = 0;
    double modelled_s = 0;
    std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, GemmShapeTimes> shapes;
    std::map<std::tuple<int, int, bool, double>, CollectiveShapeTimes> colls;
    const double t0 = now_s();
    for (size_t k = 0; k < prog.instrs.size(); ++k) {
      const Instr& i = prog.instrs[k];
      if (step == 0 && world.rank() == stall.rank && static_cast<long long>(k) == stall.index) {
        if (stall.exit) std::_Exit(9);  // a dead rank (tests)
        for (;;) pause();               // a stopped rank (tests)
      }
      dog.enter(static_cast<int64_t>(k));
      if (i.kind == InstrKind::kAlloc) {
        try {
          live[{i.mb, i.chunk, i.layer}] = {session->allocate(i.bytes), i.bytes};
        } catch (const std::bad_alloc&) {
          throw InputError({}, "--mbs",
                           fmt::format("{}: out of memory at {} ({:.3g} GB held, {:.3g} GB more)",
                                       world.where(), i.label(), held, i.bytes));
        }
        held += i.bytes;
        peak = std::max(peak, held);
      } else if (i.kind == InstrKind::kFree) {
        auto it = live.find({i.mb, i.chunk, i.layer});
        if (it != live.end()) {
          session->release(it->second.first, it->second.second);
          held -= it->second.second;
          live.erase(it);
        }
      } else {
        const size_t cl = static_cast<size_t>(i.op_class);
        double t = 0;
        if (i.modelled) {
          const double t1 = now_s();
          if (!o.empty_ops && i.predicted_s > 0)
            std::this_thread::sleep_for(std::chrono::duration<double>(i.predicted_s));
          t = now_s() - t1;
          modelled_ops += 1, modelled_s += t;
        } else if (!o.empty_ops) {
          t = session->run(i);
        }
        ct.measured_s[cl] += t;
        ct.predicted_s[cl] += i.predicted_s;
        ct.count[cl] += 1;
        if (i.kind == InstrKind::kCompute && i.op.kind == OpKind::kGemm) {
          const Precision prec = session->gemm_precision(i.op);
          GemmShapeTimes& g = shapes[{i.op.m, i.op.n, i.op.k, i.op.count, static_cast<int>(prec)}];
          g.m = i.op.m, g.n = i.op.n, g.k = i.op.k, g.count = i.op.count, g.precision = prec;
          g.calls += 1;
          g.measured_s += t;
          g.predicted_s += i.predicted_s;
        }
        if (i.kind == InstrKind::kCollective && !i.modelled) {
          const GroupPlacement& gp = i.op.group;
          CollectiveShapeTimes& cs =
              colls[{static_cast<int>(i.op.collective), grid.group_size(i.group),
                     gp.crosses_nodes(), i.op.bytes}];
          cs.op = i.op.collective, cs.group_size = grid.group_size(i.group);
          cs.crosses_nodes = gp.crosses_nodes(), cs.bytes = i.op.bytes;
          cs.calls += 1;
          cs.measured_s += t;
          cs.predicted_s += i.predicted_s;
        }
      }
      dog.leave();
      if (step == 0 && log) log << i.label() << '\n';
    }
    dog.enter(-1);
    if (!o.empty_ops) session->finish_sends();
    dog.leave();
    world.barrier("the end of a step");
    mine.step_s.push_back(now_s() - t0);
    mine.classes = ct;
    mine.modelled_ops = modelled_ops;
    mine.modelled_s = modelled_s;
    mine.gemm_shapes.clear();
    for (const auto& [key, g] : shapes) mine.gemm_shapes.push_back(g);
    mine.collective_shapes.clear();
    for (const auto& [key, cs] : colls) mine.collective_shapes.push_back(cs);
    for (auto& [key, block] : live)
      session->release(block.first, block.second), held -= block.second;
    live.clear();
  }
  mine.peak_bytes = peak;
  mine.device_peak_bytes = session->device_peak_bytes();

  const std::vector<std::string> all = world.gather(rank_json(mine).dump(), "gathering results");
  out.ranks = world.size();
  if (!world.is_root()) return out;
  for (const auto& s : all) out.per_rank.push_back(rank_from_json(nlohmann::json::parse(s)));
  for (const auto& r : out.per_rank) {
    out.measured_step_s = std::max(out.measured_step_s, r.step_s.empty() ? 0.0 : r.step_s.back());
    out.measured_peak_bytes =
        std::max(out.measured_peak_bytes, std::max(r.peak_bytes, r.device_peak_bytes));
    out.predicted_peak_bytes = std::max(out.predicted_peak_bytes, r.predicted_peak_bytes);
  }
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, GemmShapeTimes> shapes;
  std::map<std::tuple<int, int, bool, double>, CollectiveShapeTimes> colls;
  for (const auto& r : out.per_rank) {
    for (const auto& cs : r.collective_shapes) {
      auto [it, fresh] = colls.try_emplace(
          {static_cast<int>(cs.op), cs.group_size, cs.crosses_nodes, cs.bytes}, cs);
      if (fresh) continue;
      it->second.calls += cs.calls;
      it->second.measured_s += cs.measured_s;
      it->second.predicted_s += cs.predicted_s;
    }
    for (const auto& g : r.gemm_shapes) {
      auto [it, fresh] =
          shapes.try_emplace({g.m, g.n, g.k, g.count, static_cast<int>(g.precision)}, g);
      if (fresh) continue;
      it->second.calls += g.calls;
      it->second.measured_s += g.measured_s;
      it->second.predicted_s += g.predicted_s;
    }
  }
  for (const auto& [key, cs] : colls) out.collective_shapes.push_back(cs);
  for (const auto& [key, g] : shapes) out.gemm_shapes.push_back(g);
  std::sort(
      out.gemm_shapes.begin(), out.gemm_shapes.end(),
      [](const GemmShapeTimes& x, const GemmShapeTimes& y) { return x.measured_s > y.measured_s; });
  const Estimate e = estimate(m, c, w, p);
  out.predicted_step_s = e.step_time_s;
  des::SimOptions so;
  out.predicted_step_sim_s = des::simulate_step(m, c, w, p, so, {}).estimate.step_time_s;
  return out;
}

}  // namespace dtplan::exec
