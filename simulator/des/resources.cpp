#include "simulator/des/resources.h"

#include <algorithm>
#include <limits>

namespace dtplan::des {

void Stream::submit(double duration_s, Notify done) {
  queue_.push_back({duration_s, done});
  if (!running_) start_next();
}

void Stream::start_next() {
  if (queue_.empty()) {
    running_ = false;
    return;
  }
  running_ = true;
  current_ = queue_.front();
  queue_.pop_front();
  busy_s_ += current_.duration_s;
  engine_.schedule_in(current_.duration_s, id_, 0);
}

void Stream::on_event(Engine& engine, uint32_t, uint64_t) {
  const Notify done = current_.done;
  start_next();
  engine.schedule_at(engine.now(), done.handler, done.kind, done.payload);
}

int FlowNetwork::add_link(double capacity_bytes_per_s) {
  capacity_.push_back(capacity_bytes_per_s);
  return static_cast<int>(capacity_.size() - 1);
}

int FlowNetwork::start_flow(const std::vector<int>& path, double bytes, Notify done) {
  advance_all();
  int id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
  } else {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[static_cast<size_t>(id)];
  f.path = path;
  f.remaining = bytes;
  f.rate = 0;
  f.last_update = engine_.now();
  f.active = true;
  f.done = done;
  ++f.version;  // events of the slot's previous flow are stale
  ++active_;
  reallocate();
  return id;
}

// Brings every active flow's remaining bytes up to now at its current rate.
void FlowNetwork::advance_all() {
  const double now = engine_.now();
  for (Flow& f : flows_) {
    if (!f.active) continue;
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last_update));
    f.last_update = now;
  }
}

// Max-min fair rates by progressive filling: repeatedly find the link whose remaining capacity
// split among its unfixed flows is smallest, fix those flows at that share, and continue.
void FlowNetwork::reallocate() {
  const size_t nl = capacity_.size();
  if (!sharing_) {
    for (size_t i = 0; i < flows_.size(); ++i) {
      Flow& f = flows_[i];
      if (!f.active) continue;
      double r = std::numeric_limits<double>::infinity();
      for (int l : f.path) r = std::min(r, capacity_[static_cast<size_t>(l)]);
      f.rate = f.path.empty() ? std::numeric_limits<double>::infinity() : r;
      schedule_completion(static_cast<int>(i));
    }
    return;
  }
  std::vector<double> left(capacity_);
  std::vector<int> unfixed(nl, 0);
  std::vector<char> fixed(flows_.size(), 1);
  for (size_t i = 0; i < flows_.size(); ++i) {
    if (!flows_[i].active) continue;
    fixed[i] = 0;
    for (int l : flows_[i].path) ++unfixed[static_cast<size_t>(l)];
    if (flows_[i].path.empty()) {
      flows_[i].rate = std::numeric_limits<double>::infinity();
      fixed[i] = 1;
    }
  }
  for (;;) {
    double share = std::numeric_limits<double>::infinity();
    size_t bottleneck = nl;
    for (size_t l = 0; l < nl; ++l)
      if (unfixed[l] > 0 && left[l] / unfixed[l] < share) {
        share = left[l] / unfixed[l];
        bottleneck = l;
      }
    if (bottleneck == nl) break;
    for (size_t i = 0; i < flows_.size(); ++i) {
      if (fixed[i]) continue;
      const auto& path = flows_[i].path;
      if (std::find(path.begin(), path.end(), static_cast<int>(bottleneck)) == path.end()) continue;
      flows_[i].rate = share;
      fixed[i] = 1;
      for (int l : path) {
        left[static_cast<size_t>(l)] -= share;
        --unfixed[static_cast<size_t>(l)];
      }
    }
  }
  for (size_t i = 0; i < flows_.size(); ++i)
    if (flows_[i].active) schedule_completion(static_cast<int>(i));
}

void FlowNetwork::schedule_completion(int flow) {
  Flow& f = flows_[static_cast<size_t>(flow)];
  ++f.version;
  const double t = f.rate > 0 ? f.remaining / f.rate : std::numeric_limits<double>::infinity();
  if (t == std::numeric_limits<double>::infinity()) return;
  // payload: flow id in the low 32 bits, version in the high 32 bits.
  engine_.schedule_in(t, id_, 0, static_cast<uint64_t>(flow) | (f.version << 32));
}

void FlowNetwork::on_event(Engine& engine, uint32_t, uint64_t payload) {
  const auto flow = static_cast<size_t>(payload & 0xffffffffu);
  const uint64_t version = payload >> 32;
  Flow& f = flows_[flow];
  if (!f.active || (f.version & 0xffffffffu) != version) return;  // stale completion
  advance_all();
  f.active = false;
  f.remaining = 0;
  --active_;
  const Notify done = f.done;
  free_slots_.push_back(static_cast<int>(flow));
  reallocate();
  engine.schedule_at(engine.now(), done.handler, done.kind, done.payload);
}

}  // namespace dtplan::des
