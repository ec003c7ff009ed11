#include "simulator/schedule/order_timing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "simulator/schedule/task_flow.h"

namespace dtplan {

namespace {

using Task = ScheduleTask;

// Every rank's task order of one (schedule, p, v, m), kept per thread: searches evaluate the
// same few over and over.
struct Orders {
  const IPipelineSchedule* schedule = nullptr;
  int p = 0, v = 0, m = 0;
  std::vector<std::vector<Task>> order;
  std::vector<size_t> last_grad;  // per rank: its last weight-gradient task
};

struct Message {
  int to, pass;
  size_t slot;
};

struct Scratch {
  // Every (schedule, p, v, m) this thread has timed: a search meets a few dozen.
  std::unordered_map<uint64_t, Orders> cache;
  // [pass][rank][chunk x m + mb] flattened: when an input arrives / its receive is posted
  // (< 0: not yet).
  std::vector<double> arrive, posted;
  std::vector<size_t> k;  // per rank: its next task
  std::vector<double> free_s, end_s, grad_start_s, raw_f, raw_b;
  std::vector<std::array<Message, 10>> pending;  // per rank: its sends in flight (<= 5 tasks x 2)
  std::vector<int> n_pending;
  std::vector<char> post_after_send;
  std::vector<std::array<Task, 4>> held;  // per rank: outputs waiting for the next point
  std::vector<int> n_held;
  std::vector<int> queue;  // ranks to run, a ring of p
  std::vector<char> queued;
};

const Orders& orders_of(Scratch& sc, const IPipelineSchedule& s, int p, int v, int m) {
  const uint64_t key = (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&s)) << 32) ^
                       (static_cast<uint64_t>(p) << 40) ^ (static_cast<uint64_t>(v) << 32) ^
                       static_cast<uint64_t>(m);
  Orders& o = sc.cache[key];
  if (o.schedule == &s && o.p == p && o.v == v && o.m == m) return o;
  o.schedule = &s;
  o.p = p, o.v = v, o.m = m;
  o.order.resize(static_cast<size_t>(p));
  o.last_grad.assign(static_cast<size_t>(p), 0);
  const bool split = s.splits_weight_gradients();
  for (int r = 0; r < p; ++r) {
    std::vector<Task>& t = o.order[static_cast<size_t>(r)];
    t = s.task_order(r, p, v, m);
    for (size_t j = 0; j < t.size(); ++j)
      if (produces_weight_gradients(t[j], split)) o.last_grad[static_cast<size_t>(r)] = j;
  }
  return o;
}

}  // namespace

PipelineTime time_task_order(const IPipelineSchedule& s, const PipelineInput& in) {
  thread_local Scratch sc;
  const int p = in.p, v = in.v, m = in.m;
  const Orders& ord = orders_of(sc, s, p, v, m);
  const bool split = s.splits_weight_gradients(), vee = s.v_shape();
  const bool rendezvous = s.rendezvous_sends();
  const double t_x = p > 1 ? in.p2p_s : 0.0;  // one exchange
  const auto P = static_cast<size_t>(p), slots = static_cast<size_t>(v) * static_cast<size_t>(m);
  auto at = [&](int pass, int r, int chunk, int mb) {
    return (static_cast<size_t>(pass) * P + static_cast<size_t>(r)) * slots +
           static_cast<size_t>(chunk) * static_cast<size_t>(m) + static_cast<size_t>(mb);
  };
  sc.arrive.assign(2 * P * slots, -1.0);
  sc.posted.assign(2 * P * slots, rendezvous ? -1.0 : 0.0);
  sc.k.assign(P, 0);
  sc.free_s.assign(P, 0.0);
  sc.end_s.assign(P, 0.0);
  sc.grad_start_s.assign(P, 0.0);
  sc.raw_f.resize(P);
  sc.raw_b.resize(P);
  sc.pending.resize(P);
  sc.n_pending.assign(P, 0);
  sc.post_after_send.assign(P, 0);
  sc.held.resize(P);
  sc.n_held.assign(P, 0);
  for (int r = 0; r < p; ++r) {
    const double hops = p > 1 ? pipeline_exchanges_per_pass(r, p, v) : 0.0;
    sc.raw_f[static_cast<size_t>(r)] = in.f[r] - hops * t_x;
    sc.raw_b[static_cast<size_t>(r)] = in.b[r] - hops * t_x;
  }
  for (int mb = 0; mb < m; ++mb) sc.arrive[at(Task::kF, 0, 0, mb)] = 0;  // the data loader's
  auto post_at = [&](int r, double time) {
    post_receives_from(ord.order[static_cast<size_t>(r)], sc.k[static_cast<size_t>(r)],
                       [&](int pass, int chunk, int mb) {
                         double& x = sc.posted[at(pass, r, chunk, mb)];
                         if (x < 0) x = time;
                       });
  };
  for (int r = 0; r < p; ++r) post_at(r, 0.0);

  size_t remaining = 0;
  for (const auto& o : ord.order) remaining += o.size();
  // A worklist of ranks: a rank runs until it waits; whatever it did can only unblock its
  // neighbours (exchanges go between neighbouring ranks, and between the last and the first
  // with interleaved chunks), which are queued again.
  sc.queue.resize(P);
  sc.queued.assign(P, 1);
  for (size_t r = 0; r < P; ++r) sc.queue[r] = static_cast<int>(r);
  size_t head = 0, queued = P;
  auto enqueue = [&](int r) {
    if (sc.queued[static_cast<size_t>(r)]) return;
    sc.queued[static_cast<size_t>(r)] = 1;
    sc.queue[(head + queued++) % P] = r;
  };
  while (queued > 0 && remaining > 0) {
    const int r = sc.queue[head];
    head = (head + 1) % P;
    --queued;
    sc.queued[static_cast<size_t>(r)] = 0;
    bool progress = false;
    {
      const auto ru = static_cast<size_t>(r);
      const std::vector<Task>& order = ord.order[ru];
      for (;;) {
        // Sends in flight: the rank is free once every one has landed.
        if (int& n = sc.n_pending[ru]; n > 0) {
          const double request = sc.free_s[ru];
          double done = request;
          bool known = true;
          for (int j = 0; j < n && known; ++j) {
            const Message& x = sc.pending[ru][static_cast<size_t>(j)];
            const double post =
                sc.posted[(static_cast<size_t>(x.pass) * P + static_cast<size_t>(x.to)) * slots +
                          x.slot];
            known = post >= 0;
            done = std::max(done, std::max(request, post) + t_x);
          }
          if (!known) break;
          for (int j = 0; j < n; ++j) {
            const Message& x = sc.pending[ru][static_cast<size_t>(j)];
            const size_t i =
                (static_cast<size_t>(x.pass) * P + static_cast<size_t>(x.to)) * slots + x.slot;
            sc.arrive[i] = std::max(request, sc.posted[i]) + t_x;
          }
          n = 0;
          sc.free_s[ru] = done;
          progress = true;
          if (sc.post_after_send[ru]) {
            sc.post_after_send[ru] = 0;
            post_at(r, done);
          }
        }
        if (sc.k[ru] >= order.size()) break;
        const Task t = order[sc.k[ru]];
        double start = sc.free_s[ru];
        auto need = [&](int pass, int chunk, int mb) {
          const double a = sc.arrive[at(pass, r, chunk, mb)];
          start = std::max(start, a);
          return a >= 0;
        };
        if ((t.pass == Task::kF || t.pass == Task::kFB) && !need(Task::kF, t.chunk, t.mb)) break;
        if ((t.pass == Task::kB || t.pass == Task::kBW) && !holds_loss(vee, p, v, r, t.chunk) &&
            !need(Task::kB, t.chunk, t.mb))
          break;
        if (t.pass == Task::kFB && !holds_loss(vee, p, v, r, t.chunk2) &&
            !need(Task::kB, t.chunk2, t.mb2))
          break;
        const double end = start + task_seconds(t, split, v, sc.raw_f[ru], sc.raw_b[ru], in.w[r]);
        if (sc.k[ru] == ord.last_grad[ru]) sc.grad_start_s[ru] = start;
        ++sc.k[ru];
        --remaining;
        progress = true;
        sc.free_s[ru] = sc.end_s[ru] = end;
        if (!t.hold && !t.serial) post_at(r, end);
        if (t.hold) {
          if (sc.n_held[ru] == static_cast<int>(sc.held[ru].size()))
            throw std::logic_error("a pipeline order holds more than 4 tasks' outputs");
          sc.held[ru][static_cast<size_t>(sc.n_held[ru]++)] = t;
          continue;
        }
        auto out = [&](int pass, int chunk, int mb) {
          const PipelineHop h = pipeline_hop(vee, p, v, static_cast<Task::Pass>(pass), r, chunk);
          if (h.to < 0) return;
          if (h.local) {
            sc.arrive[at(pass, r, h.chunk, mb)] = end;
            return;
          }
          sc.pending[ru][static_cast<size_t>(sc.n_pending[ru]++)] = {
              h.to, pass,
              static_cast<size_t>(h.chunk) * static_cast<size_t>(m) + static_cast<size_t>(mb)};
        };
        auto outputs = [&](const Task& x) {
          if (x.pass == Task::kF || x.pass == Task::kFB) out(Task::kF, x.chunk, x.mb);
          if (x.pass == Task::kB || x.pass == Task::kBW) out(Task::kB, x.chunk, x.mb);
          if (x.pass == Task::kFB) out(Task::kB, x.chunk2, x.mb2);
        };
        for (int j = 0; j < sc.n_held[ru]; ++j) outputs(sc.held[ru][static_cast<size_t>(j)]);
        sc.n_held[ru] = 0;
        outputs(t);
        if (t.serial) {
          if (sc.n_pending[ru] == 0)
            post_at(r, end);
          else
            sc.post_after_send[ru] = 1;
        }
      }
    }
    if (progress) {
      if (r > 0) enqueue(r - 1);
      if (r + 1 < p) enqueue(r + 1);
      if (r == 0 && p > 1) enqueue(p - 1);
      if (r == p - 1 && p > 1) enqueue(0);
    }
  }
  if (remaining > 0)
    throw std::logic_error(
        fmt::format("{} pipeline order deadlocks (p={}, v={}, m={})", "schedule", p, v, m));
  PipelineTime out;
  double busiest = 0;
  for (int r = 0; r < p; ++r) {
    out.total_s = std::max(out.total_s, sc.end_s[static_cast<size_t>(r)]);
    busiest = std::max(busiest, m * (in.f[r] + in.b[r] + in.w[r]));
    if (in.rank_end_s) in.rank_end_s[r] = sc.end_s[static_cast<size_t>(r)];
    if (in.rank_grad_start_s) in.rank_grad_start_s[r] = sc.grad_start_s[static_cast<size_t>(r)];
  }
  out.bubble_s = std::max(0.0, out.total_s - busiest);
  return out;
}

}  // namespace dtplan
