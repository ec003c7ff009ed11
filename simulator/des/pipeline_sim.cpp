#include "simulator/des/pipeline_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "simulator/des/engine.h"
#include "simulator/des/resources.h"
#include "simulator/des/topology.h"

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

// Engine event kinds of the simulation.
enum EventKind : uint32_t { kTaskDone = 0, kArrived = 1, kDpDone = 2 };

// kBW: input and weight gradients as one task in a schedule that splits others (DualPipeV);
// kFB: DualPipeV's overlapped pair, the forward of (mb, chunk) with the whole backward of
// (mb2, chunk2). Only kF and kB outputs travel (ready_ has those two rows).
enum Pass : uint32_t { kF = 0, kB = 1, kW = 2, kBW = 3, kFB = 4 };

struct Task {
  Pass pass;
  int mb, chunk;
  int mb2 = -1, chunk2 = -1;  // the backward half of a kFB pair
  // The rank communicates after the next task, not after this one: this task's outputs are
  // sent with the next one's (Megatron's interleaved steady state runs a forward and a
  // backward back to back, then one batched send/recv for both).
  bool hold = false;
  // The rank posts the next receives only once this task's sends have completed (Megatron's
  // 1F1B warm-up and cool-down call send_forward, then recv_forward, as two blocking calls;
  // its steady state batches them).
  bool serial = false;
};

bool rendezvous(PipelineOrder o) {
  return o == PipelineOrder::kGPipe || o == PipelineOrder::kOneFOneB ||
         o == PipelineOrder::kInterleaved;
}

bool v_shaped(PipelineOrder o) {
  return o == PipelineOrder::kZbV || o == PipelineOrder::kDualPipeV;
}

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024), built as the
// handcrafted ZB-V order of sail-sg/zero-bubble-pipeline-parallelism
// (megatron/core/pipeline_parallel/handcrafted_zb_v): rank s runs
//   warm-up   2(p-s)-1 F0, then s x (F1 F0), then (p-s) x (F1 B1 W1);
//   steady    (F0 B0 W0 F1 B1 W1) until every forward has run;
//   cool-down s x (B0 B1), (p-s) x (B0 W), then the deferred W of chunk 1, then of chunk 0;
// the cool-down's W are the ones deferred into the slots where rank s would wait for
// gradients. The order is written for max(m, 2p-1) micro-batches and the passes of those past
// m are dropped, as the repository does for small m. Every rank holds at most 2p chunk
// activations (1F1B's p micro-batches). With F = B = W per chunk every rank runs without idling
// from its first forward (at s x F) to its end, so the step is 6m chunk-passes + (p-1) F: the
// paper's zero bubble is this idle-free span per rank, which back-to-back steps tile when the
// optimizer step is not synchronized across ranks (the paper's post-validation); one
// synchronized step still pays the (p-1) F fill. The repository's greedy (scheduler/zbv.py)
// finds the same step time when F <= B <= 2W in our checks and a shorter one otherwise (by up
// to a third of the bubble, for F:B:W = 2:1:1).
std::vector<Task> zb_v_order(int s, int p, int m) {
  const int n = std::max(m, 2 * p - 1);
  std::vector<Task> t;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  for (int i = 0; i < 2 * (p - s) - 1; ++i) t.push_back({kF, f0++, 0});
  for (int i = 0; i < s; ++i) {
    t.push_back({kF, f1++, 1});
    t.push_back({kF, f0++, 0});
  }
  for (int i = 0; i < p - s; ++i) {
    t.push_back({kF, f1, 1});
    t.push_back({kB, b1, 1});
    t.push_back({kW, b1, 1});
    ++f1, ++b1;
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) t.push_back({kF, f0++, 0});
    t.push_back({kB, b0, 0});
    t.push_back({kW, b0++, 0});
    t.push_back({kF, f1++, 1});
    t.push_back({kB, b1, 1});
    t.push_back({kW, b1++, 1});
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < s; ++i) {
    t.push_back({kB, b0++, 0});
    t.push_back({kB, b1++, 1});
  }
  for (int i = 0; i < p - s; ++i) {
    t.push_back({kB, b0++, 0});
    t.push_back({kW, w0++, 0});
  }
  while (w1 < b1) t.push_back({kW, w1++, 1});
  while (w0 < b0) t.push_back({kW, w0++, 0});
  std::erase_if(t, [m](const Task& k) { return k.mb >= m; });
  return t;
}

// DualPipeV (deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step): rank s of p, n
// micro-batches, in eight phases
//   1  2(p-s-1) x F0            2  (s+1) x (F0 F1)           3  (p-s-1) x (B1 W F1)
//   4  (n-2p+s+1) x (F0&B1, F1&B0), on the last rank the first F0&B1 as F0 then B1
//   5  (p-s-1) x (B1, F1&B0)    6  (s+1) x (B1 B0), the later half with W deferred
//   7  (p-s-1) x (W B0)         8  (s+1) x W
// where "F&B" is an overlapped pair (one task here, F + B + W long: no overlap credit), B
// without a following W in the list is the whole backward (kBW), and W runs the oldest
// deferred weight gradients (the code's FIFO WeightGradStore). dualpipev.py needs n >= 2p; for
// fewer micro-batches we lay out n = 2p and drop the passes of micro-batches past m (a pair
// losing one half becomes the other half alone), which keeps the order free of deadlock
// because no kept pass depends on a dropped one.
std::vector<Task> dualpipe_v_order(int s, int p, int m) {
  const int n = std::max(m, 2 * p);
  std::vector<Task> t;
  int f[2] = {0, 0}, b[2] = {0, 0};
  std::vector<Task> deferred;  // weight gradients not yet run, oldest first
  size_t next_w = 0;
  auto fwd = [&](int c) { t.push_back({kF, f[c]++, c}); };
  auto bwd = [&](int c, bool split) {
    if (split) {
      t.push_back({kB, b[c], c});
      deferred.push_back({kW, b[c], c});
    } else {
      t.push_back({kBW, b[c], c});
    }
    ++b[c];
  };
  auto wgt = [&] { t.push_back(deferred[next_w++]); };
  auto pair = [&](int cf, int cb) {
    Task k{kFB, f[cf]++, cf};
    k.mb2 = b[cb]++;
    k.chunk2 = cb;
    t.push_back(k);
  };
  const bool last = s == p - 1;
  for (int i = 0; i < 2 * (p - s - 1); ++i) fwd(0);
  for (int i = 0; i < s + 1; ++i) fwd(0), fwd(1);
  for (int i = 0; i < p - s - 1; ++i) bwd(1, true), wgt(), fwd(1);
  for (int i = 0; i < n - 2 * p + s + 1; ++i) {
    if (i == 0 && last)
      fwd(0), bwd(1, false);
    else
      pair(0, 1);
    pair(1, 0);
  }
  for (int i = 0; i < p - s - 1; ++i) bwd(1, false), pair(1, 0);
  // Phase 6: the weight gradients are deferred from the middle pass on (after B1 of the
  // middle step on even ranks, before it on odd ones), as dualpipev.py does.
  const int n6 = s + 1;
  bool split = false;
  for (int i = 0; i < n6; ++i) {
    if (i == n6 / 2 && s % 2 == 1) split = true;
    bwd(1, split);
    if (i == n6 / 2 && s % 2 == 0) split = true;
    bwd(0, split);
  }
  for (int i = 0; i < p - s - 1; ++i) wgt(), bwd(0, true);
  for (int i = 0; i < s + 1; ++i) wgt();
  // Drop the passes of micro-batches past m; a pair keeps the half that remains.
  std::vector<Task> kept;
  for (Task k : t) {
    if (k.pass == kFB) {
      const bool keep_f = k.mb < m, keep_b = k.mb2 < m;
      if (keep_f && keep_b)
        kept.push_back(k);
      else if (keep_f)
        kept.push_back({kF, k.mb, k.chunk});
      else if (keep_b)
        kept.push_back({kBW, k.mb2, k.chunk2});
    } else if (k.mb < m) {
      kept.push_back(k);
    }
  }
  return kept;
}

// The per-rank task order of each schedule (Narayanan et al. 2021; Megatron schedules.py).
std::vector<Task> order_for(int s, const PipelineSimInput& in, PipelineOrder order) {
  const int p = in.p, m = in.m, v = in.v;
  if (v_shaped(order) && v != 2)
    throw std::invalid_argument("the V schedules run two chunks per rank (v = 2)");
  if (order == PipelineOrder::kZbV) return zb_v_order(s, p, m);
  if (order == PipelineOrder::kDualPipeV) return dualpipe_v_order(s, p, m);
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
    for (Task& k : t) k.serial = true;
    while (f < m) {
      t.push_back({kF, f++, 0});
      t.push_back({kB, b++, 0});
    }
    t.back().serial = true;  // the last steady backward sends alone, then receives
    while (b < m) {
      t.push_back({kB, b++, 0});
      t.back().serial = true;
    }
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
  // Interleaved: micro-batches in groups of p; each group runs through chunk 0, then chunk 1,
  // ... (Megatron's virtual micro-batch order; a last group smaller than p when p does not
  // divide m, as Megatron-Core's microbatch_group_size_per_vp_stage = p does).
  std::vector<Task> fwd, bwd;
  for (int g0 = 0; g0 < m; g0 += p) {
    const int size = std::min(p, m - g0);
    for (int c = 0; c < v; ++c)
      for (int i = 0; i < size; ++i) {
        fwd.push_back({kF, g0 + i, c});
        bwd.push_back({kB, g0 + i, v - 1 - c});
      }
  }
  const int total = m * v;
  const int warm = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  int f = 0, b = 0;
  for (; f < warm; ++f) t.push_back(fwd[static_cast<size_t>(f)]);
  while (f < total) {
    t.push_back(fwd[static_cast<size_t>(f++)]);
    t.back().hold = true;
    t.push_back(bwd[static_cast<size_t>(b++)]);
  }
  while (b < total) t.push_back(bwd[static_cast<size_t>(b++)]);
  return t;
}

class Sim final : public Handler {
 public:
  Sim(const PipelineSimInput& in, PipelineOrder order, bool trace)
      : in_(in),
        engine_(),
        net_(engine_, in.link_sharing),
        trace_(trace),
        split_w_(order == PipelineOrder::kZbH1 || v_shaped(order)),
        v_shape_(v_shaped(order)) {
    id_ = engine_.add_handler(this);
    const int v = in.v, m = in.m;
    const int p = ranks_ = in.p * std::max(1, in.replicas);  // every simulated rank
    for (int s = 0; s < p; ++s) {
      if (s >= in.p)  // replicas run their stage's order
        orders_.push_back(orders_[static_cast<size_t>(s % in.p)]);
      else
        orders_.push_back(order_for(s, in, order));
      next_.push_back(0);
      busy_.push_back(false);
      sending_.push_back(0);
      busy_s_.push_back(0);
      send_blocked_s_.push_back(0);
      send_since_.push_back(0);
      live_.push_back(0);
      peak_live_.push_back(0);
      // The last task that produces weight gradients (W where B and W are split): bucketed
      // reduction overlaps it.
      size_t last_b = 0;
      for (size_t k = 0; k < orders_.back().size(); ++k) {
        const Pass ps = orders_.back()[k].pass;
        if (ps != kF && !(split_w_ && ps == kB)) last_b = k;
      }
      last_b_.push_back(last_b);
    }
    dp_active_.assign(static_cast<size_t>(p), 0);
    dp_phase_.assign(static_cast<size_t>(p), 0);
    dp_end_.assign(static_cast<size_t>(p), 0.0);
    dp_start_.assign(static_cast<size_t>(p), {});
    compute_done_.assign(static_cast<size_t>(p), 0);
    if (in.hw && static_cast<int>(in.gpu.size()) == p) {  // a GPU for every simulated rank
      std::vector<int> gpus = in.gpu;
      gpus.insert(gpus.end(), in.dp_pred.begin(), in.dp_pred.end());
      gpus.insert(gpus.end(), in.dp_succ.begin(), in.dp_succ.end());
      topo_ = std::make_unique<Topology>(*in.hw, in.num_gpus, gpus, net_);
    }
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
    if (!rendezvous(order))
      for (auto& per_pass : posted_)
        for (auto& per_rank : per_pass) std::fill(per_rank.begin(), per_rank.end(), 1);
    held_.resize(static_cast<size_t>(p));
    post_after_send_.assign(static_cast<size_t>(p), 0);
  }

  PipelineSimResult run() {
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
    if (kind == kTaskDone) {
      const int s = static_cast<int>(payload);
      finish(s, e.now());
    } else if (kind == kDpDone) {
      dp_done(static_cast<int>(payload & 0xffffffffu), static_cast<int>(payload >> 32));
    } else {
      const int pass = static_cast<int>(payload >> 56);
      const int to = static_cast<int>((payload >> 40) & 0xffff);
      const int from = sender(payload);
      const int idx = static_cast<int>(payload & 0xffffff);
      ready_[static_cast<size_t>(pass)][static_cast<size_t>(to)][static_cast<size_t>(idx)] = 1;
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
  size_t slot(int chunk, int mb) const { return static_cast<size_t>(chunk * in_.m + mb); }

  // Where the output of `pass` (kF: activations, kB: input gradients) of chunk `chunk` on rank
  // s goes: rank `to`, chunk `chunk`; to < 0 where it leaves the pipeline; `local` where the
  // V turns on the last rank (chunk 0 feeds chunk 1 forward, chunk 1 feeds chunk 0 backward)
  // and nothing is sent.
  struct Hop {
    int to = -1, chunk = 0;
    bool local = false;
  };
  Hop route(Pass pass, int rank, int chunk) const {
    const int p = in_.p, v = in_.v;
    const int s = rank % p, base = rank - s;  // stage within the rank's pipeline replica
    Hop h;
    if (v_shape_) {
      const bool down = (pass == kF) == (chunk == 0);  // towards rank p-1
      if (down)
        h = s < p - 1 ? Hop{s + 1, chunk, false} : Hop{s, 1 - chunk, true};
      else
        h = s > 0 ? Hop{s - 1, chunk, false} : Hop{};
    } else if (pass == kF) {
      // Forward output goes to the next rank; past the last rank, to rank 0's next chunk.
      h = s < p - 1 ? Hop{s + 1, chunk} : chunk < v - 1 ? Hop{0, chunk + 1} : Hop{};
    } else {
      h = s > 0 ? Hop{s - 1, chunk} : chunk > 0 ? Hop{p - 1, chunk - 1} : Hop{};
    }
    if (h.to >= 0) h.to += base;
    return h;
  }

  void deliver(Pass pass, int s, int chunk, int mb) {
    const Hop h = route(pass, s, chunk);
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
    const int st = s % in_.p;
    const bool origin = v_shape_ ? st == 0 && chunk == 1 : st == in_.p - 1 && chunk == in_.v - 1;
    return origin || ready_[kB][su][k];
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
    const double f = in_.f[st] / in_.v, b = in_.b[st] / in_.v, w = in_.w[st] / in_.v;
    const double d = t.pass == kF    ? f
                     : t.pass == kW  ? w
                     : t.pass == kB  ? (split_w_ ? b : b + w)
                     : t.pass == kBW ? b + w
                                     : f + b + w;  // kFB: no overlap credit
    double dur = d;
    if (in_.sm_slowdown > 0 && dp_active_[su] > 0) dur *= 1 + in_.sm_slowdown;  // SM contention
    if (in_.dp_overlap && next_[su] == last_b_[su] && dp_phase_[su] == 0 && dp_seconds(s) > 0) {
      dp_phase_[su] = 1;  // buckets reduce while the last backward produces gradients
      start_dp(s, 0.9 * dp_seconds(s), 1);
    }
    busy_[su] = true;
    if (t.pass == kF || t.pass == kFB) peak_live_[su] = std::max(peak_live_[su], ++live_[su]);
    current_start_[s] = engine_.now();
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
    bool posted_any = false;
    for (size_t k = next_[su]; k < orders_[su].size(); ++k) {
      const Task& t = orders_[su][k];
      if (t.pass == kF || t.pass == kFB) post(kF, s, slot(t.chunk, t.mb));
      if (t.pass == kB || t.pass == kBW) post(kB, s, slot(t.chunk, t.mb));
      if (t.pass == kFB) post(kB, s, slot(t.chunk2, t.mb2));
      posted_any = posted_any || t.pass != kW;
      if (posted_any && !t.hold) break;
    }
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
    const size_t idx = payload & 0xffffff;
    return fmt::format("{}{}.{}", (payload >> 56) == kF ? "act " : "grad ",
                       idx % static_cast<size_t>(in_.m), idx / static_cast<size_t>(in_.m));
  }

  // A message's payload: pass, receiver, sender and the receiver's input slot.
  static uint64_t pack(int pass, int to, int from, size_t idx) {
    return (static_cast<uint64_t>(pass) << 56) | (static_cast<uint64_t>(to) << 40) |
           (static_cast<uint64_t>(from) << 24) | idx;
  }
  static int sender(uint64_t payload) { return static_cast<int>((payload >> 24) & 0xffff); }
  // The input a message fills, whoever sends it (the payload without its sender).
  static uint64_t input_key(uint64_t payload) { return payload & ~(uint64_t{0xffff} << 24); }

  void transfer(uint64_t payload, int from, int to, int link) {
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
      pipeline_end_ = std::max(pipeline_end_, now);
      if (dp_seconds(s) > 0) {
        if (!in_.dp_overlap) {
          dp_phase_[su] = 3;
          start_dp(s, dp_seconds(s), 2);
        } else if (dp_phase_[su] == 2) {
          dp_phase_[su] = 3;
          start_dp(s, 0.1 * dp_seconds(s), 2);
        }
      }
    }
    if (trace_) record_task(s, t, current_start_[s], now);
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
        start_dp(s, 0.1 * dp_seconds(s), 2);
      }
      return;
    }
    dp_phase_[su] = 4;
    dp_end_[su] = engine_.now();
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
