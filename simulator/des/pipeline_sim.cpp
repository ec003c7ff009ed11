#include "simulator/des/pipeline_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "core/error.h"
#include "simulator/des/engine.h"
#include "simulator/des/resources.h"
#include "simulator/des/topology.h"
#include "simulator/schedule/task_flow.h"

namespace dtplan::des {

const char* stream_name(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kTp:
      return "tp";
    case StreamKind::kCp:
      return "cp";
    case StreamKind::kEp:
      return "ep";
    case StreamKind::kPpSend:
      return "pp send";
    case StreamKind::kPpRecv:
      return "pp recv";
    case StreamKind::kDp:
      return "dp";
  }
  return "?";
}

namespace {

using Task = ScheduleTask;
using Pass = ScheduleTask::Pass;
constexpr Pass kF = ScheduleTask::kF, kB = ScheduleTask::kB, kW = ScheduleTask::kW,
               kBW = ScheduleTask::kBW, kFB = ScheduleTask::kFB;

// Engine event kinds of the simulation.
enum EventKind : uint32_t { kTaskDone = 0, kArrived = 1, kDpDone = 2 };

// Bits of a message payload's receiver, sender and slot fields.
constexpr int kFieldBits = 21;
constexpr uint64_t kFieldMask = (uint64_t{1} << kFieldBits) - 1;

class Sim final : public Handler {
 public:
  Sim(const PipelineSimInput& in, const IPipelineSchedule& schedule, bool trace)
      : in_(in),
        engine_(),
        net_(engine_, in.link_sharing),
        trace_(trace),
        split_w_(schedule.splits_weight_gradients()),
        v_shape_(schedule.v_shape()) {
    id_ = engine_.add_handler(this);
    const int v = in.v, m = in.m;
    const int p = ranks_ = in.p * std::max(1, in.replicas);  // every simulated rank
    if (static_cast<uint64_t>(p) > kFieldMask || static_cast<uint64_t>(v) * m > kFieldMask)
      throw InputError({}, "--ranks",
                       fmt::format("a simulation of {} ranks x {} chunk micro-batches is beyond "
                                   "the simulator's {} of each",
                                   p, static_cast<int64_t>(v) * m, kFieldMask));
    for (int s = 0; s < p; ++s) {
      if (s >= in.p)  // replicas run their stage's order
        orders_.push_back(orders_[static_cast<size_t>(s % in.p)]);
      else
        orders_.push_back(schedule.task_order(s, in.p, in.v, in.m));
      next_.push_back(0);
      busy_.push_back(false);
      sending_.push_back(0);
      busy_s_.push_back(0);
      send_blocked_s_.push_back(0);
      send_since_.push_back(0);
      moving_.push_back(0);
      moving_since_.push_back(0);
      send_moving_s_.push_back(0);
      live_.push_back(0);
      peak_live_.push_back(0);
      // The last task that produces weight gradients (W where B and W are split): bucketed
      // reduction overlaps it.
      size_t last_b = 0;
      for (size_t k = 0; k < orders_.back().size(); ++k)
        if (produces_weight_gradients(orders_.back()[k], split_w_)) last_b = k;
      last_b_.push_back(last_b);
    }
    dp_active_.assign(static_cast<size_t>(p), 0);
    dp_phase_.assign(static_cast<size_t>(p), 0);
    dp_end_.assign(static_cast<size_t>(p), 0.0);
    dp_start_.assign(static_cast<size_t>(p), {});
    compute_done_.assign(static_cast<size_t>(p), 0);
    current_start_.assign(static_cast<size_t>(p), 0.0);
    compute_end_.assign(static_cast<size_t>(p), 0.0);
    if (in.hw && static_cast<int>(in.gpu.size()) == p)  // a GPU for every simulated rank
      topo_ = std::make_unique<Topology>(*in.hw, in.num_gpus, net_, in.slow_nodes);
    // Links between neighbouring ranks, one per direction (the last rank wraps to the first
    // for interleaved chunks; V schedules send both passes both ways, each on the link of its
    // direction).
    for (int s = 0; s < p; ++s) {
      fwd_link_.push_back(net_.add_link(in.p2p_bytes_per_s > 0 ? in.p2p_bytes_per_s : 1e300));
      bwd_link_.push_back(net_.add_link(in.p2p_bytes_per_s > 0 ? in.p2p_bytes_per_s : 1e300));
    }
    // ready_[pass][s][chunk][mb]: the input has arrived on rank s.
    ready_.assign(2, std::vector<std::vector<char>>(
                         static_cast<size_t>(p), std::vector<char>(static_cast<size_t>(v * m), 0)));
    for (int base = 0; base < p; base += in.p)  // chunk 0 on each replica's first rank
      for (int i = 0; i < m; ++i) ready_[kF][static_cast<size_t>(base)][static_cast<size_t>(i)] = 1;
    done_f_.assign(static_cast<size_t>(p), std::vector<char>(static_cast<size_t>(v * m), 0));
    // Megatron's schedules (GPipe-like, 1F1B, interleaved) call blocking batched send/recv: a
    // transfer starts once the receiver posts its receive. The zero-bubble and DualPipe
    // implementations post their receives ahead (asynchronous p2p): every receive is posted
    // from the start.
    posted_ = ready_;
    if (!schedule.rendezvous_sends())
      for (auto& per_pass : posted_)
        for (auto& per_rank : per_pass) std::fill(per_rank.begin(), per_rank.end(), 1);
    held_.resize(static_cast<size_t>(p));
    post_after_send_.assign(static_cast<size_t>(p), 0);
  }

  // `events_before`: events of earlier simulations of the same step (progress counts them all).
  PipelineSimResult run(const SimCost* cost = nullptr, uint64_t events_before = 0) {
    if (cost && in_.hooks && in_.hooks->progress)
      engine_.set_progress([this, cost, events_before](uint64_t n) {
        in_.hooks->progress(events_before + n, *cost);
      });
    for (int s = 0; s < ranks_; ++s) post_receives(s);
    for (int s = 0; s < ranks_; ++s) try_start(s);
    engine_.run();
    for (int s = 0; s < ranks_; ++s)
      if (next_[static_cast<size_t>(s)] < orders_[static_cast<size_t>(s)].size())
        throw std::logic_error(fmt::format(
            "pipeline simulation stalled: rank {} ran {} of its {} tasks (p={}, v={}, m={})", s,
            next_[static_cast<size_t>(s)], orders_[static_cast<size_t>(s)].size(), in_.p, in_.v,
            in_.m));
    PipelineSimResult r;
    // Not engine_.now(): stale flow completions (superseded by a reallocation) still fire.
    r.makespan_s = pipeline_end_;
    for (double t : dp_end_) r.makespan_s = std::max(r.makespan_s, t);
    r.pipeline_end_s = pipeline_end_;
    r.dp_end_s = dp_end_;
    r.busy_s = busy_s_;
    r.send_blocked_s = send_blocked_s_;
    r.send_moving_s = send_moving_s_;
    for (int peak : peak_live_)
      r.peak_inflight_microbatches.push_back(static_cast<double>(peak) / in_.v);
    r.trace = std::move(trace_events_);
    r.events = static_cast<long>(engine_.events_processed());
    for (int s = 0; s < ranks_; ++s) {
      r.same_as.push_back(s);
      r.end_s.push_back(
          std::max(compute_end_[static_cast<size_t>(s)], dp_end_[static_cast<size_t>(s)]));
    }
    return r;
  }

  // kind 0: a task finished on rank (payload); kind 1: a message arrived (payload encodes
  // pass, receiver, sender and slot). Sends are blocking, as Megatron's p2p calls in the
  // 1F1B schedules: the sender's stream waits for the transfer.
  void on_event(Engine& e, uint32_t kind, uint64_t payload) override {
    if (kind == kTaskDone) {
      const int s = static_cast<int>(payload);
      finish(s, e.now());
    } else if (kind == kDpDone) {
      dp_done(static_cast<int>(payload & 0xffffffffu), static_cast<int>(payload >> 32));
    } else {
      const int pass = pass_of(payload);
      const int to = receiver(payload);
      const int from = sender(payload);
      const size_t idx = slot_of(payload);
      ready_[static_cast<size_t>(pass)][static_cast<size_t>(to)][static_cast<size_t>(idx)] = 1;
      if (--moving_[static_cast<size_t>(from)] == 0)
        send_moving_s_[static_cast<size_t>(from)] +=
            e.now() - moving_since_[static_cast<size_t>(from)];
      // A task may send two messages (an overlapped pair): the sender waits for both.
      if (--sending_[static_cast<size_t>(from)] == 0) {
        busy_[static_cast<size_t>(from)] = false;
        if (post_after_send_[static_cast<size_t>(from)]) {
          post_after_send_[static_cast<size_t>(from)] = 0;
          post_receives(from);
        }
        send_blocked_s_[static_cast<size_t>(from)] +=
            e.now() - send_since_[static_cast<size_t>(from)];
      }
      const auto it = trace_ ? send_start_.find(payload) : send_start_.end();
      if (it != send_start_.end()) {
        const double start = it->second;
        send_start_.erase(it);
        const long id = next_flow_id_++;
        const std::string what = message_name(payload);
        trace_events_.push_back({from, what, start, e.now(), StreamKind::kPpSend, id});
        trace_events_.push_back({to, what, start, e.now(), StreamKind::kPpRecv, id});
      }
      try_start(from);
      try_start(to);
    }
  }

 private:
  size_t slot(int chunk, int mb) const {
    return static_cast<size_t>(chunk) * static_cast<size_t>(in_.m) + static_cast<size_t>(mb);
  }

  // Where the output of `pass` of `chunk` on rank `rank` goes (task_flow.h), on its replica.
  PipelineHop route(Pass pass, int rank, int chunk) const {
    const int s = rank % in_.p, base = rank - s;  // stage within the rank's pipeline replica
    PipelineHop h = pipeline_hop(v_shape_, in_.p, in_.v, pass, s, chunk);
    if (h.to >= 0) h.to += base;
    return h;
  }

  void deliver(Pass pass, int s, int chunk, int mb) {
    const PipelineHop h = route(pass, s, chunk);
    if (h.to < 0) return;
    if (h.local) {
      ready_[pass][static_cast<size_t>(s)][slot(h.chunk, mb)] = 1;
      return;
    }
    const auto su = static_cast<size_t>(s);
    const bool down = v_shape_ ? h.to > s : pass == kF;
    send(pass, s, h.to, slot(h.chunk, mb), down ? fwd_link_[su] : bwd_link_[su]);
  }

  // A backward pass can start once its forward ran here and its output gradient arrived; the
  // chunk that holds the loss (the last chunk on the last rank; rank 0's chunk 1 in a V)
  // starts it from its own forward.
  bool backward_ready(int s, int chunk, int mb) const {
    const auto su = static_cast<size_t>(s);
    const size_t k = slot(chunk, mb);
    if (!done_f_[su][k]) return false;
    return holds_loss(v_shape_, in_.p, in_.v, s % in_.p, chunk) || ready_[kB][su][k];
  }

  void try_start(int s) {
    const auto su = static_cast<size_t>(s);
    if (busy_[su] || next_[su] >= orders_[su].size()) return;
    const Task t = orders_[su][next_[su]];
    const bool needs_input = t.pass == kF || t.pass == kFB;
    if (needs_input && !ready_[kF][su][slot(t.chunk, t.mb)]) return;
    if ((t.pass == kB || t.pass == kBW) && !backward_ready(s, t.chunk, t.mb)) return;
    if (t.pass == kFB && !backward_ready(s, t.chunk2, t.mb2)) return;
    // W follows its B on the same rank (the order guarantees it): nothing to wait for.
    const auto st = static_cast<size_t>(s % in_.p);  // costs are per stage
    double dur = task_seconds(t, split_w_, in_.v, in_.f[st], in_.b[st], in_.w[st]);
    if (in_.sm_slowdown > 0 && dp_active_[su] > 0) dur *= 1 + in_.sm_slowdown;  // SM contention
    if (su < in_.slowdown.size() && in_.slowdown[su] != 1.0) {
      // A slow GPU computes slowly; the exposed TP/CP/EP communication inside its task (the
      // task's share of the stage's per-micro-batch comm_s) keeps its time.
      double comm = 0;
      if (st < in_.comm_s.size()) {
        const double per_mb = in_.f[st] + in_.b[st] + in_.w[st];
        const double share = per_mb > 0 ? dur / per_mb : 0;
        for (double x : in_.comm_s[st]) comm += x * share;
      }
      comm = std::min(comm, dur);
      dur = comm + (dur - comm) * in_.slowdown[su];
    }
    if (in_.jitter_sigma > 0) dur *= jitter(s, next_[su]);
    if (in_.dp_overlap && next_[su] == last_b_[su] && dp_phase_[su] == 0 && dp_seconds(s) > 0) {
      dp_phase_[su] = 1;  // buckets reduce while the last backward produces gradients
      start_dp(s, (1 - dp_last_share(s)) * dp_seconds(s), 1);
    }
    busy_[su] = true;
    if (t.pass == kF || t.pass == kFB) peak_live_[su] = std::max(peak_live_[su], ++live_[su]);
    current_start_[static_cast<size_t>(s)] = engine_.now();
    busy_s_[su] += dur;
    engine_.schedule_in(dur, id_, kTaskDone, static_cast<uint64_t>(s));
  }

  void send(int pass, int from, int to, size_t idx, int link) {
    const uint64_t payload = pack(pass, to, from, idx);
    busy_[static_cast<size_t>(from)] = true;  // blocked until the transfer completes
    if (sending_[static_cast<size_t>(from)]++ == 0)
      send_since_[static_cast<size_t>(from)] = engine_.now();
    if (!posted_[static_cast<size_t>(pass)][static_cast<size_t>(to)][idx]) {
      // NCCL send/recv: the bytes move once the receive is posted.
      pending_[input_key(payload)] = {payload, link, engine_.now()};
      return;
    }
    transfer(payload, from, to, link);
  }

  // At a communication point (after each task that does not hold) rank s posts the receives
  // of the inputs its tasks need up to the next point, skipping points with nothing to
  // receive (a W), as Megatron's batched send/recv calls do; waiting sends then start.
  void post_receives(int s) {
    const auto su = static_cast<size_t>(s);
    post_receives_from(orders_[su], next_[su],
                       [&](int pass, int chunk, int mb) { post(pass, s, slot(chunk, mb)); });
  }
  void post(int pass, int s, size_t idx) {
    char& flag = posted_[static_cast<size_t>(pass)][static_cast<size_t>(s)][idx];
    if (flag) return;
    flag = 1;
    const auto it = pending_.find(input_key(pack(pass, s, 0, idx)));
    if (it == pending_.end()) return;
    const Pending w = it->second;
    pending_.erase(it);
    const int from = sender(w.payload);
    if (trace_ && engine_.now() > w.since)  // the sender's wait, on its send stream
      trace_events_.push_back({from, "wait for recv: " + message_name(w.payload), w.since,
                               engine_.now(), StreamKind::kPpSend, -1});
    transfer(w.payload, from, s, w.link);
  }

  // "act 3.1": the activations of micro-batch 3, chunk 1 ("grad": input gradients).
  std::string message_name(uint64_t payload) const {
    const size_t idx = slot_of(payload);
    return fmt::format("{}{}.{}", pass_of(payload) == kF ? "act " : "grad ",
                       idx % static_cast<size_t>(in_.m), idx / static_cast<size_t>(in_.m));
  }

  // A message's payload: pass (1 bit), receiver, sender (kFieldBits each) and the receiver's
  // input slot (kFieldBits); the constructor refuses larger simulations.
  static uint64_t pack(int pass, int to, int from, size_t idx) {
    return (static_cast<uint64_t>(pass) << 63) | (static_cast<uint64_t>(to) << (2 * kFieldBits)) |
           (static_cast<uint64_t>(from) << kFieldBits) | idx;
  }
  static int pass_of(uint64_t payload) { return static_cast<int>(payload >> 63); }
  static int receiver(uint64_t payload) {
    return static_cast<int>((payload >> (2 * kFieldBits)) & kFieldMask);
  }
  static int sender(uint64_t payload) {
    return static_cast<int>((payload >> kFieldBits) & kFieldMask);
  }
  static size_t slot_of(uint64_t payload) { return payload & kFieldMask; }
  // The input a message fills, whoever sends it (the payload without its sender).
  static uint64_t input_key(uint64_t payload) { return payload & ~(kFieldMask << kFieldBits); }

  void transfer(uint64_t payload, int from, int to, int link) {
    if (moving_[static_cast<size_t>(from)]++ == 0)
      moving_since_[static_cast<size_t>(from)] = engine_.now();
    if (in_.p2p_bytes <= 0 || in_.p2p_bytes_per_s <= 0) {  // free: no transfer to show
      engine_.schedule_in(0, id_, kArrived, payload);
      return;
    }
    if (trace_) send_start_[payload] = engine_.now();
    if (topo_) {
      const std::vector<int>& path =
          topo_->route(in_.gpu[static_cast<size_t>(from)], in_.gpu[static_cast<size_t>(to)]);
      const double alone_s = in_.p2p_bytes / in_.p2p_bytes_per_s;
      if (path.empty()) {
        engine_.schedule_in(alone_s, id_, kArrived, payload);
      } else {
        net_.start_flow(path, alone_s * topo_->bottleneck_bytes_per_s(path),
                        {id_, kArrived, payload});
      }
      return;
    }
    net_.start_flow({link}, in_.p2p_bytes, {id_, kArrived, payload});
  }

  void finish(int s, double now) {
    const auto su = static_cast<size_t>(s);
    const Task t = orders_[su][next_[su]++];
    busy_[su] = false;
    if (!t.hold && !t.serial) post_receives(s);
    if (next_[su] == orders_[su].size()) {
      compute_done_[su] = 1;
      compute_end_[su] = now;
      pipeline_end_ = std::max(pipeline_end_, now);
      if (dp_seconds(s) > 0) {
        if (!in_.dp_overlap) {
          dp_phase_[su] = 3;
          start_dp(s, dp_seconds(s), 2);
        } else if (dp_phase_[su] == 2) {
          dp_phase_[su] = 3;
          start_dp(s, dp_last_share(s) * dp_seconds(s), 2);
        }
      }
    }
    if (trace_) record_task(s, t, current_start_[static_cast<size_t>(s)], now);
    if (t.pass != kF && t.pass != kW) --live_[su];  // a backward frees its activations
    if (t.pass == kF || t.pass == kFB) done_f_[su][slot(t.chunk, t.mb)] = 1;
    if (t.hold) {
      held_[su].push_back(t);  // sent at the next communication point
    } else {
      for (const Task& h : held_[su]) send_outputs(s, h);
      held_[su].clear();
      send_outputs(s, t);
      if (t.serial) {
        if (sending_[su] == 0)
          post_receives(s);
        else
          post_after_send_[su] = 1;
      }
    }
    try_start(s);
  }

  void send_outputs(int s, const Task& t) {
    if (t.pass == kF || t.pass == kFB) deliver(kF, s, t.chunk, t.mb);
    if (t.pass == kB || t.pass == kBW) deliver(kB, s, t.chunk, t.mb);
    if (t.pass == kFB) deliver(kB, s, t.chunk2, t.mb2);
  }

  // A task on the trace: its compute, then the exposed TP, CP and EP communication the cost
  // model puts inside it (each on its stream, in that order; the rank's exposed time of the
  // dimension shared among its tasks in proportion to their length).
  void record_task(int s, const Task& t, double start, double end) {
    static constexpr const char* kName[] = {"F", "B", "W", "BW", "F"};
    std::string name = fmt::format("{}{}.{}", kName[t.pass], t.mb, t.chunk);
    if (t.pass == kFB) name += fmt::format("&BW{}.{}", t.mb2, t.chunk2);
    std::array<double, 3> comm{};
    double comm_total = 0;
    const auto st = static_cast<size_t>(s % in_.p);
    if (st < in_.comm_s.size()) {
      const double per_mb = in_.f[st] + in_.b[st] + in_.w[st];
      const double share = per_mb > 0 ? (end - start) / per_mb : 0;
      for (size_t k = 0; k < 3; ++k) comm_total += comm[k] = in_.comm_s[st][k] * share;
    }
    double at = end - std::min(comm_total, end - start);
    trace_events_.push_back({s, name, start, at, StreamKind::kCompute, -1});
    if (st < in_.zero3_s.size()) {
      // ZeRO-3 gathers (forward) or gathers and reduce-scatters (backward) of this task's
      // layers, in proportion to its share of the rank's pass time.
      const bool fwd = t.pass == kF || t.pass == kFB;
      const double pass = fwd ? in_.f[st] : in_.b[st] + in_.w[st];
      const double alone = in_.zero3_s[st][fwd ? 0 : 1];
      if (pass > 0 && alone > 0) {
        const double dur = alone * (end - start) / pass;
        trace_events_.push_back(
            {s, fwd ? "ZeRO-3 all-gather " + name : "ZeRO-3 all-gather + reduce-scatter " + name,
             start, start + dur, StreamKind::kDp, -1});
      }
    }
    constexpr StreamKind streams[3] = {StreamKind::kTp, StreamKind::kCp, StreamKind::kEp};
    for (size_t k = 0; k < 3; ++k) {
      if (comm[k] <= 0) continue;
      const double to = std::min(end, at + comm[k]);
      trace_events_.push_back({s, name, at, to, streams[k], -1});
      at = to;
    }
  }

  // A bucketed reduction's last bucket, as a share of dp_seconds (1 where the caller gave no
  // shares: one bucket, all of it trails).
  double dp_last_share(int s) const {
    return in_.dp_last_share.size() == in_.dp_s.size() && !in_.dp_s.empty()
               ? in_.dp_last_share[static_cast<size_t>(s % in_.p)]
               : 1.0;
  }
  double dp_seconds(int s) const {
    return static_cast<int>(in_.dp_s.size()) == in_.p ? in_.dp_s[static_cast<size_t>(s % in_.p)]
                                                      : 0.0;
  }

  // Data-parallel traffic of rank s: a flow on the rank's ring route (what it sends to its
  // successor and receives from its predecessor), sized to take `seconds` alone. part 1: the
  // buckets overlapped with the last backward; part 2: what remains after it.
  void start_dp(int s, double seconds, int part) {
    const auto su = static_cast<size_t>(s);
    ++dp_active_[su];
    dp_start_[su][static_cast<size_t>(part)] = engine_.now();
    const uint64_t payload = static_cast<uint64_t>(s) | (static_cast<uint64_t>(part) << 32);
    std::vector<int> path;
    if (topo_ && dp_pred_ok(s))
      path = topo_->ring_route(in_.dp_pred[su], in_.gpu[su], in_.dp_succ[su]);
    if (path.empty()) {
      engine_.schedule_in(seconds, id_, kDpDone, payload);
      return;
    }
    net_.start_flow(path, seconds * topo_->bottleneck_bytes_per_s(path), {id_, kDpDone, payload});
  }
  bool dp_pred_ok(int s) const {
    const auto su = static_cast<size_t>(s);
    return su < in_.dp_pred.size() && su < in_.dp_succ.size() && in_.dp_pred[su] >= 0 &&
           in_.dp_succ[su] >= 0;
  }

  void dp_done(int s, int part) {
    const auto su = static_cast<size_t>(s);
    --dp_active_[su];
    if (trace_)
      trace_events_.push_back({s, part == 1 ? "grad reduce (overlapped)" : "grad reduce",
                               dp_start_[su][static_cast<size_t>(part)], engine_.now(),
                               StreamKind::kDp, -1});
    if (part == 1) {
      dp_phase_[su] = 2;
      if (compute_done_[su]) {
        dp_phase_[su] = 3;
        start_dp(s, dp_last_share(s) * dp_seconds(s), 2);
      }
      return;
    }
    dp_phase_[su] = 4;
    dp_end_[su] = engine_.now();
  }

  // The jitter factor of task k of rank s: the slowest of its TP/CP group's draws, each from a
  // counter-based generator (splitmix64) keyed on the group, the stage and the task, so the
  // group's simulated ranks draw alike and every run is reproducible.
  double jitter(int s, size_t k) const {
    const int replica = s / in_.p;
    const int full = static_cast<size_t>(replica) < in_.replica_index.size()
                         ? in_.replica_index[static_cast<size_t>(replica)]
                         : replica;
    const uint64_t group = static_cast<uint64_t>(full / std::max(1, in_.jitter_group));
    const uint64_t stage = static_cast<uint64_t>(s % in_.p);
    double worst = 0;
    auto mix = [](uint64_t z) {  // splitmix64's finalizer: every input bit reaches every output bit
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (int i = 0; i < std::max(1, in_.jitter_group); ++i) {
      uint64_t key = mix(mix(mix(mix(in_.jitter_seed + 0x9E3779B97F4A7C15ull) + group) + stage) +
                         static_cast<uint64_t>(k)) +
                     static_cast<uint64_t>(i);
      auto next = [&key, &mix] {
        key += 0x9E3779B97F4A7C15ull;
        return static_cast<double>(mix(key) >> 11) * 0x1.0p-53;
      };
      // Box-Muller from two uniforms in (0, 1].
      const double u1 = 1.0 - next(), u2 = next();
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      worst = std::max(worst,
                       std::exp(in_.jitter_sigma * z - 0.5 * in_.jitter_sigma * in_.jitter_sigma));
    }
    return worst;
  }

  const PipelineSimInput& in_;
  int ranks_ = 0;  // p x replicas
  Engine engine_;
  FlowNetwork net_;
  std::unique_ptr<Topology> topo_;
  std::vector<size_t> last_b_;  // per rank: its last weight-gradient task
  std::vector<int> dp_active_;  // per rank: DP flows running
  std::vector<int> dp_phase_;   // 0 idle, 1 overlapped part running, 2 it ended, 3 final, 4 done
  std::vector<double> dp_end_;
  std::vector<char> compute_done_;
  std::vector<std::array<double, 3>> dp_start_;  // per rank, by part (1, 2)
  std::unordered_map<uint64_t, double> send_start_;
  long next_flow_id_ = 0;
  double pipeline_end_ = 0;
  Engine::HandlerId id_ = 0;
  bool trace_;
  bool split_w_;  // B and W are separate tasks (zero-bubble schedules)
  bool v_shape_;  // two chunks in a V (zb-v, dualpipe-v)
  std::vector<std::vector<Task>> orders_;
  std::vector<size_t> next_;
  std::vector<bool> busy_;
  std::vector<int> sending_;  // messages a rank's last task still sends
  std::vector<double> busy_s_;
  std::vector<double> send_blocked_s_, send_since_;  // time a rank waited on its own sends
  // Of that, the time at least one of its messages was moving (after its receive was posted).
  std::vector<int> moving_;
  std::vector<double> moving_since_, send_moving_s_;
  std::vector<int> live_, peak_live_;  // (chunk, micro-batch) activations alive on each rank
  std::vector<int> fwd_link_, bwd_link_;
  std::vector<std::vector<std::vector<char>>> ready_;
  // posted_[pass][s][slot]: rank s has posted the receive for that input (rendezvous); a send
  // that finds no receive posted waits in pending_, keyed by the input it fills.
  std::vector<std::vector<std::vector<char>>> posted_;
  struct Pending {
    uint64_t payload;
    int link;
    double since;  // when the sender asked to send
  };
  std::unordered_map<uint64_t, Pending> pending_;  // by the input the message fills
  std::vector<std::vector<Task>> held_;  // per rank: outputs waiting for a communication point
  std::vector<char> post_after_send_;    // per rank: a serial task's receives wait for its sends
  std::vector<std::vector<char>> done_f_;
  std::vector<double> current_start_;  // per rank: its running task's start
  std::vector<double> compute_end_;    // per rank: when its last compute task ended
  std::vector<TraceEvent> trace_events_;
};

// ---- Symmetry reduction (PipelineSimInput::reduce_symmetry) ----

constexpr uint64_t kRouteEnd = ~uint64_t{0};  // separates routes in a replica's key list

// The fabric links every flow of replica r may cross, as one list of routes: per rank, its
// sends to each neighbour its schedule sends to, then its data-parallel ring route (the keys
// Topology::ring_route turns into links), each route ended by kRouteEnd.
void replica_routes(const PipelineSimInput& in, const RailFabric& fabric,
                    const std::vector<std::vector<int>>& dests, int r, std::vector<uint64_t>& out) {
  const bool dp_flows = static_cast<int>(in.dp_s.size()) == in.p;
  for (int s = 0; s < in.p; ++s) {
    const size_t k = static_cast<size_t>(r) * static_cast<size_t>(in.p) + static_cast<size_t>(s);
    for (int to : dests[static_cast<size_t>(s)]) {
      fabric.route(
          in.gpu[k],
          in.gpu[static_cast<size_t>(r) * static_cast<size_t>(in.p) + static_cast<size_t>(to)],
          out);
      out.push_back(kRouteEnd);
    }
    if (dp_flows && in.dp_s[static_cast<size_t>(s)] > 0 && k < in.dp_pred.size() &&
        k < in.dp_succ.size() && in.dp_pred[k] >= 0 && in.dp_succ[k] >= 0) {
      fabric.ring_route(in.dp_pred[k], in.gpu[k], in.dp_succ[k], out);
      out.push_back(kRouteEnd);
    }
  }
}

struct Reduction {
  std::vector<std::vector<int>> groups;  // replicas of each independent group, ascending
  std::vector<int> kind;                 // per group: its kind (index of its first group)
};

// Groups replicas that share a link (union-find over the links of their routes) and sorts
// the groups into kinds by a signature of everything that drives their simulation.
Reduction find_symmetry(const PipelineSimInput& in, bool v_shape) {
  const int R = in.replicas, p = in.p;
  const RailFabric fabric(*in.hw, in.num_gpus);
  std::vector<std::vector<int>> dests(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s)
    for (const Pass pass : {kF, kB})
      for (int c = 0; c < in.v; ++c) {
        const PipelineHop h = pipeline_hop(v_shape, p, in.v, pass, s, c);
        auto& d = dests[static_cast<size_t>(s)];
        if (h.to >= 0 && !h.local && std::find(d.begin(), d.end(), h.to) == d.end())
          d.push_back(h.to);
      }
  std::vector<uint64_t> keys;
  std::vector<size_t> begin(static_cast<size_t>(R) + 1, 0);
  for (int r = 0; r < R; ++r) {
    replica_routes(in, fabric, dests, r, keys);
    begin[static_cast<size_t>(r) + 1] = keys.size();
  }
  // Union-find: replicas that cross a common link belong to one group.
  std::vector<int> parent(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) parent[static_cast<size_t>(r)] = r;
  auto find = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] =
          parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  std::vector<std::pair<uint64_t, int>> users;
  users.reserve(keys.size());
  for (int r = 0; r < R; ++r)
    for (size_t i = begin[static_cast<size_t>(r)]; i < begin[static_cast<size_t>(r) + 1]; ++i)
      if (keys[i] != kRouteEnd) users.emplace_back(keys[i], r);
  std::sort(users.begin(), users.end());
  for (size_t i = 1; i < users.size(); ++i)
    if (users[i].first == users[i - 1].first) {
      const int a = find(users[i].second), b = find(users[i - 1].second);
      if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
    }
  Reduction out;
  std::vector<int> group_of_root(static_cast<size_t>(R), -1);
  for (int r = 0; r < R; ++r) {
    int& g = group_of_root[static_cast<size_t>(find(r))];
    if (g < 0) {
      g = static_cast<int>(out.groups.size());
      out.groups.emplace_back();
    }
    out.groups[static_cast<size_t>(g)].push_back(r);
  }
  // Signature of a group: its size; per rank its slowdown and jitter key; its routes with the
  // links renamed in order of first use, each with its kind and fault factor.
  auto bits = [](double x) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
  };
  auto slow_factor = [&](uint64_t key) {
    double f = 1.0;
    if (const int node = fabric.nic_node(key); node >= 0)
      for (const auto& [n, x] : in.slow_nodes)
        if (n == node) f = std::max(f, x);
    return f;
  };
  std::map<std::vector<uint64_t>, int> kinds;
  std::unordered_map<uint64_t, uint64_t> rename;
  std::vector<uint64_t> sig;
  for (size_t g = 0; g < out.groups.size(); ++g) {
    sig.assign(1, out.groups[g].size());
    rename.clear();
    for (int r : out.groups[g]) {
      for (int st = 0; st < p; ++st) {
        const size_t k = static_cast<size_t>(r) * static_cast<size_t>(p) + static_cast<size_t>(st);
        sig.push_back(k < in.slowdown.size() ? bits(in.slowdown[k]) : bits(1.0));
        const int full = static_cast<size_t>(r) < in.replica_index.size()
                             ? in.replica_index[static_cast<size_t>(r)]
                             : r;
        sig.push_back(
            in.jitter_sigma > 0 ? static_cast<uint64_t>(full / std::max(1, in.jitter_group)) : 0);
      }
      for (size_t i = begin[static_cast<size_t>(r)]; i < begin[static_cast<size_t>(r) + 1]; ++i) {
        const uint64_t key = keys[i];
        if (key == kRouteEnd) {
          sig.push_back(kRouteEnd);
          continue;
        }
        const auto [it, fresh] = rename.emplace(key, rename.size());
        sig.push_back(it->second * 8 + key % 8);
        sig.push_back(bits(slow_factor(key)));
        (void)fresh;
      }
    }
    const auto [it, fresh] = kinds.emplace(sig, static_cast<int>(g));
    out.kind.push_back(it->second);
    (void)fresh;
  }
  return out;
}

// The input of one group: its replicas' ranks, everything per stage unchanged.
PipelineSimInput group_input(const PipelineSimInput& in, const std::vector<int>& replicas) {
  PipelineSimInput sub = in;
  sub.replicas = static_cast<int>(replicas.size());
  sub.reduce_symmetry = false;
  sub.gpu.clear();
  sub.dp_pred.clear();
  sub.dp_succ.clear();
  sub.slowdown.clear();
  sub.replica_index.clear();
  for (int r : replicas) {
    sub.replica_index.push_back(static_cast<size_t>(r) < in.replica_index.size()
                                    ? in.replica_index[static_cast<size_t>(r)]
                                    : r);
    for (int st = 0; st < in.p; ++st) {
      const size_t k = static_cast<size_t>(r) * static_cast<size_t>(in.p) + static_cast<size_t>(st);
      sub.gpu.push_back(in.gpu[k]);
      if (k < in.dp_pred.size()) sub.dp_pred.push_back(in.dp_pred[k]);
      if (k < in.dp_succ.size()) sub.dp_succ.push_back(in.dp_succ[k]);
      if (k < in.slowdown.size()) sub.slowdown.push_back(in.slowdown[k]);
    }
  }
  return sub;
}

}  // namespace

SimCost sim_cost(double ranks, int v, int m, bool splits_weight_gradients, bool trace) {
  SimCost c;
  c.ranks = ranks;
  c.tasks = ranks * v * static_cast<double>(m) * (splits_weight_gradients ? 3 : 2);
  c.events = 3.5 * c.tasks;
  c.memory_bytes = c.tasks * (64.0 + (trace ? 1024.0 : 0.0));
  return c;
}

PipelineSimResult simulate_pipeline(const PipelineSimInput& in, const IPipelineSchedule& schedule,
                                    bool record_trace) {
  const int ranks = in.p * std::max(1, in.replicas);
  auto cost_of = [&](double simulated) {
    return sim_cost(simulated, in.v, in.m, schedule.splits_weight_gradients(), record_trace);
  };
  if (!in.reduce_symmetry || in.replicas <= 1 || !in.hw ||
      static_cast<int>(in.gpu.size()) != ranks) {
    const SimCost cost = cost_of(ranks);
    if (in.hooks && in.hooks->before_run) in.hooks->before_run(cost);
    Sim sim(in, schedule, record_trace);
    PipelineSimResult r = sim.run(&cost);
    r.simulated_ranks = ranks;
    return r;
  }
  const Reduction red = find_symmetry(in, schedule.v_shape());
  double simulated = 0;
  for (size_t g = 0; g < red.groups.size(); ++g)
    if (red.kind[g] == static_cast<int>(g))
      simulated += static_cast<double>(in.p) * static_cast<double>(red.groups[g].size());
  const SimCost cost = cost_of(simulated);
  if (in.hooks && in.hooks->before_run) in.hooks->before_run(cost);
  PipelineSimResult out;
  out.busy_s.assign(static_cast<size_t>(ranks), 0);
  out.send_blocked_s.assign(static_cast<size_t>(ranks), 0);
  out.send_moving_s.assign(static_cast<size_t>(ranks), 0);
  out.peak_inflight_microbatches.assign(static_cast<size_t>(ranks), 0);
  out.dp_end_s.assign(static_cast<size_t>(ranks), 0);
  out.same_as.assign(static_cast<size_t>(ranks), 0);
  out.end_s.assign(static_cast<size_t>(ranks), 0);
  out.replica_groups = static_cast<int>(red.groups.size());
  // One simulation per kind, copied to the groups of that kind.
  std::vector<PipelineSimResult> kind_result(red.groups.size());
  for (size_t g = 0; g < red.groups.size(); ++g)
    if (red.kind[g] == static_cast<int>(g)) {
      const PipelineSimInput sub = group_input(in, red.groups[g]);
      Sim sim(sub, schedule, record_trace);
      kind_result[g] = sim.run(&cost, static_cast<uint64_t>(out.events));
      out.events += kind_result[g].events;
      out.simulated_ranks += sub.p * sub.replicas;
    }
  long flow_base = 0;
  for (size_t g = 0; g < red.groups.size(); ++g) {
    const size_t kind = static_cast<size_t>(red.kind[g]);
    const PipelineSimResult& k = kind_result[kind];
    out.makespan_s = std::max(out.makespan_s, k.makespan_s);
    out.pipeline_end_s = std::max(out.pipeline_end_s, k.pipeline_end_s);
    // Simulated rank i of a group, as a rank of the full set.
    auto full_rank = [&](const std::vector<int>& replicas, int i) {
      return replicas[static_cast<size_t>(i / in.p)] * in.p + i % in.p;
    };
    for (size_t i = 0; i < k.busy_s.size(); ++i) {
      const auto f = static_cast<size_t>(full_rank(red.groups[g], static_cast<int>(i)));
      out.busy_s[f] = k.busy_s[i];
      out.send_blocked_s[f] = k.send_blocked_s[i];
      out.send_moving_s[f] = k.send_moving_s[i];
      out.peak_inflight_microbatches[f] = k.peak_inflight_microbatches[i];
      out.dp_end_s[f] = k.dp_end_s[i];
      out.end_s[f] = k.end_s[i];
      out.same_as[f] = full_rank(red.groups[kind], static_cast<int>(i));
    }
    if (record_trace && kind == g) {  // the simulated group's events, under its own ranks
      long flows = 0;
      for (TraceEvent t : k.trace) {
        t.stage = full_rank(red.groups[g], t.stage);
        if (t.flow >= 0) {
          flows = std::max(flows, t.flow + 1);
          t.flow += flow_base;
        }
        out.trace.push_back(std::move(t));
      }
      flow_base += flows;
    }
  }
  return out;
}

}  // namespace dtplan::des
