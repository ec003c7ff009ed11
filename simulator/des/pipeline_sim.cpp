#include "simulator/des/pipeline_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "simulator/des/engine.h"
#include "simulator/des/resources.h"

namespace dtplan::des {

namespace {

enum Pass : uint32_t { kF = 0, kB = 1, kW = 2 };

struct Task {
  Pass pass;
  int mb, chunk;
};

// The per-rank task order of each schedule (Narayanan et al. 2021; Megatron schedules.py).
std::vector<Task> order_for(int s, const PipelineSimInput& in, PipelineOrder order) {
  const int p = in.p, m = in.m, v = in.v;
  std::vector<Task> t;
  if (order == PipelineOrder::kGPipe) {
    for (int i = 0; i < m; ++i) t.push_back({kF, i, 0});
    for (int i = 0; i < m; ++i) t.push_back({kB, i, 0});
    return t;
  }
  if (order == PipelineOrder::kOneFOneB) {
    const int warm = std::min(p - s - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f) t.push_back({kF, f, 0});
    while (f < m) {
      t.push_back({kF, f++, 0});
      t.push_back({kB, b++, 0});
    }
    while (b < m) t.push_back({kB, b++, 0});
    return t;
  }
  if (order == PipelineOrder::kZbH1) {
    // ZB-H1 (Qi et al., ICLR 2024): in step x rank s runs F(x), B(x - (p-1-s)) and
    // W(x - (p-1)), each when its index is a micro-batch. The warm-up forwards and the
    // activations held are 1F1B's; deferring W by p-1 steps fills the bubble, which becomes
    // (p-1)(F + B - W) for m >= p and W <= F.
    for (int x = 0; x < m + p - 1; ++x) {
      const int b = x - (p - 1 - s), w = x - (p - 1);
      if (x < m) t.push_back({kF, x, 0});
      if (b >= 0 && b < m) t.push_back({kB, b, 0});
      if (w >= 0 && w < m) t.push_back({kW, w, 0});
    }
    return t;
  }
  // Interleaved: virtual micro-batch k -> (chunk, micro-batch) in groups of p.
  const int total = m * v;
  auto fwd = [&](int k) { return Task{kF, (k / (p * v)) * p + k % p, (k / p) % v}; };
  auto bwd = [&](int k) { return Task{kB, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v}; };
  const int warm = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  int f = 0, b = 0;
  for (; f < warm; ++f) t.push_back(fwd(f));
  while (f < total) {
    t.push_back(fwd(f++));
    t.push_back(bwd(b++));
  }
  while (b < total) t.push_back(bwd(b++));
  return t;
}

class Sim final : public Handler {
 public:
  Sim(const PipelineSimInput& in, PipelineOrder order, bool trace)
      : in_(in),
        engine_(),
        net_(engine_, in.link_sharing),
        trace_(trace),
        split_w_(order == PipelineOrder::kZbH1) {
    id_ = engine_.add_handler(this);
    const int p = in.p, v = in.v, m = in.m;
    for (int s = 0; s < p; ++s) {
      orders_.push_back(order_for(s, in, order));
      next_.push_back(0);
      busy_.push_back(false);
      busy_s_.push_back(0);
      live_.push_back(0);
      peak_live_.push_back(0);
    }
    // Links between neighbouring ranks, one per direction (the last rank wraps to the first
    // for interleaved chunks).
    for (int s = 0; s < p; ++s) {
      fwd_link_.push_back(net_.add_link(in.p2p_bytes_per_s > 0 ? in.p2p_bytes_per_s : 1e300));
      bwd_link_.push_back(net_.add_link(in.p2p_bytes_per_s > 0 ? in.p2p_bytes_per_s : 1e300));
    }
    // ready_[pass][s][chunk][mb]: the input has arrived on rank s.
    ready_.assign(2, std::vector<std::vector<char>>(
                         static_cast<size_t>(p), std::vector<char>(static_cast<size_t>(v * m), 0)));
    for (int i = 0; i < m; ++i) ready_[kF][0][static_cast<size_t>(i)] = 1;  // chunk 0, rank 0
    done_f_.assign(static_cast<size_t>(p), std::vector<char>(static_cast<size_t>(v * m), 0));
  }

  PipelineSimResult run() {
    for (int s = 0; s < in_.p; ++s) try_start(s);
    engine_.run();
    PipelineSimResult r;
    r.makespan_s = engine_.now();
    r.busy_s = busy_s_;
    for (int peak : peak_live_)
      r.peak_inflight_microbatches.push_back(static_cast<double>(peak) / in_.v);
    r.trace = std::move(trace_events_);
    r.events = static_cast<long>(engine_.events_processed());
    return r;
  }

  // kind 0: a task finished on rank (payload); kind 1: a message arrived (payload encodes
  // pass, receiver, sender and slot). Sends are blocking, as Megatron's p2p calls in the
  // 1F1B schedules: the sender's stream waits for the transfer.
  void on_event(Engine& e, uint32_t kind, uint64_t payload) override {
    if (kind == 0) {
      const int s = static_cast<int>(payload);
      finish(s, e.now());
    } else {
      const int pass = static_cast<int>(payload >> 56);
      const int to = static_cast<int>((payload >> 40) & 0xffff);
      const int from = static_cast<int>((payload >> 24) & 0xffff);
      const int idx = static_cast<int>(payload & 0xffffff);
      ready_[static_cast<size_t>(pass)][static_cast<size_t>(to)][static_cast<size_t>(idx)] = 1;
      busy_[static_cast<size_t>(from)] = false;
      try_start(from);
      try_start(to);
    }
  }

 private:
  size_t slot(int chunk, int mb) const { return static_cast<size_t>(chunk * in_.m + mb); }

  void try_start(int s) {
    const auto su = static_cast<size_t>(s);
    if (busy_[su] || next_[su] >= orders_[su].size()) return;
    const Task t = orders_[su][next_[su]];
    const size_t k = slot(t.chunk, t.mb);
    if (t.pass == kF && !ready_[kF][su][k]) return;
    if (t.pass == kB) {
      if (!done_f_[su][k]) return;
      // The last chunk on the last rank starts the backward from its own forward.
      const bool origin = s == in_.p - 1 && t.chunk == in_.v - 1;
      if (!origin && !ready_[kB][su][k]) return;
    }
    // W follows its B on the same rank (the order guarantees it): nothing to wait for.
    const double d = t.pass == kF   ? in_.f[su] / in_.v
                     : t.pass == kW ? in_.w[su] / in_.v
                     : split_w_     ? in_.b[su] / in_.v
                                    : (in_.b[su] + in_.w[su]) / in_.v;
    busy_[su] = true;
    if (t.pass == kF) peak_live_[su] = std::max(peak_live_[su], ++live_[su]);
    current_start_[s] = engine_.now();
    busy_s_[su] += d;
    engine_.schedule_in(d, id_, 0, static_cast<uint64_t>(s));
  }

  void send(int pass, int from, int to, size_t idx, int link) {
    const uint64_t payload = (static_cast<uint64_t>(pass) << 56) |
                             (static_cast<uint64_t>(to) << 40) |
                             (static_cast<uint64_t>(from) << 24) | idx;
    busy_[static_cast<size_t>(from)] = true;  // blocked until the transfer completes
    if (in_.p2p_bytes <= 0 || in_.p2p_bytes_per_s <= 0) {
      engine_.schedule_in(0, id_, 1, payload);
      return;
    }
    net_.start_flow({link}, in_.p2p_bytes, {id_, 1, payload});
  }

  void finish(int s, double now) {
    const auto su = static_cast<size_t>(s);
    const Task t = orders_[su][next_[su]++];
    busy_[su] = false;
    if (trace_)
      trace_events_.push_back({s,
                               fmt::format("{}{}.{}",
                                           t.pass == kF   ? 'F'
                                           : t.pass == kB ? 'B'
                                                          : 'W',
                                           t.mb, t.chunk),
                               current_start_[s], now});
    if (t.pass == kW) {
      try_start(s);
      return;
    }
    if (t.pass == kB) --live_[su];
    const int p = in_.p, v = in_.v;
    if (t.pass == kF) {
      done_f_[su][slot(t.chunk, t.mb)] = 1;
      // Forward output goes to the next rank; past the last rank, to rank 0's next chunk.
      if (s < p - 1)
        send(kF, s, s + 1, slot(t.chunk, t.mb), fwd_link_[su]);
      else if (t.chunk < v - 1)
        send(kF, s, 0, slot(t.chunk + 1, t.mb), fwd_link_[su]);
    } else {
      if (s > 0)
        send(kB, s, s - 1, slot(t.chunk, t.mb), bwd_link_[su]);
      else if (t.chunk > 0)
        send(kB, s, p - 1, slot(t.chunk - 1, t.mb), bwd_link_[su]);
    }
    try_start(s);
  }

  const PipelineSimInput& in_;
  Engine engine_;
  FlowNetwork net_;
  Engine::HandlerId id_ = 0;
  bool trace_;
  bool split_w_;  // B and W are separate tasks (zero-bubble schedules)
  std::vector<std::vector<Task>> orders_;
  std::vector<size_t> next_;
  std::vector<bool> busy_;
  std::vector<double> busy_s_;
  std::vector<int> live_, peak_live_;  // (chunk, micro-batch) activations alive on each rank
  std::vector<int> fwd_link_, bwd_link_;
  std::vector<std::vector<std::vector<char>>> ready_;
  std::vector<std::vector<char>> done_f_;
  std::unordered_map<int, double> current_start_;
  std::vector<TraceEvent> trace_events_;
};

}  // namespace

PipelineSimResult simulate_pipeline(const PipelineSimInput& in, PipelineOrder order,
                                    bool record_trace) {
  Sim sim(in, order, record_trace);
  return sim.run();
}

}  // namespace dtplan::des
