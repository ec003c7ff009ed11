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
  link_flows_.emplace_back();
  left_.push_back(0);
  unfixed_.push_back(0);
  link_mark_.push_back(0);
  return static_cast<int>(capacity_.size() - 1);
}

int FlowNetwork::start_flow(const std::vector<int>& path, double bytes, Notify done) {
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
  f.fresh = true;  // needs its first completion event whatever its rate
  f.done = done;
  ++f.version;  // events of the slot's previous flow are stale
  ++active_;
  if (f.path.empty()) {  // nothing to share: done at once
    f.rate = std::numeric_limits<double>::infinity();
    f.fresh = false;
    schedule_completion(id);
    return id;
  }
  for (int l : f.path) link_flows_[static_cast<size_t>(l)].push_back(id);
  reallocate(f.path);
  return id;
}

// The flows that share a link with `path`, directly or through other flows: only their rates
// can change when a flow on `path` starts or ends (max-min fairness is decided per connected
// component of the flow-link graph).
void FlowNetwork::collect_component(const std::vector<int>& path) {
  comp_flows_.clear();
  comp_links_.clear();
  ++mark_;
  if (flow_mark_.size() < flows_.size()) flow_mark_.resize(flows_.size(), 0);
  for (int l : path)
    if (link_mark_[static_cast<size_t>(l)] != mark_) {
      link_mark_[static_cast<size_t>(l)] = mark_;
      comp_links_.push_back(l);
    }
  for (size_t k = 0; k < comp_links_.size(); ++k)
    for (int fl : link_flows_[static_cast<size_t>(comp_links_[k])]) {
      if (flow_mark_[static_cast<size_t>(fl)] == mark_) continue;
      flow_mark_[static_cast<size_t>(fl)] = mark_;
      comp_flows_.push_back(fl);
      for (int l : flows_[static_cast<size_t>(fl)].path)
        if (link_mark_[static_cast<size_t>(l)] != mark_) {
          link_mark_[static_cast<size_t>(l)] = mark_;
          comp_links_.push_back(l);
        }
    }
}

// Max-min fair rates by progressive filling over the component: repeatedly find the link whose
// remaining capacity split among its unfixed flows is smallest, fix those flows at that share,
// and continue. Flows are first brought up to now at their old rates; a flow whose rate did not
// change keeps its completion event (its finish time is the same).
void FlowNetwork::reallocate(const std::vector<int>& path) {
  const double now = engine_.now();
  collect_component(path);
  for (int fl : comp_flows_) {
    Flow& f = flows_[static_cast<size_t>(fl)];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last_update));
    f.last_update = now;
    f.old_rate = f.rate;
  }
  if (!sharing_) {
    for (int fl : comp_flows_) {
      Flow& f = flows_[static_cast<size_t>(fl)];
      double r = std::numeric_limits<double>::infinity();
      for (int l : f.path) r = std::min(r, capacity_[static_cast<size_t>(l)]);
      f.rate = r;
    }
  } else {
    for (int l : comp_links_) {
      left_[static_cast<size_t>(l)] = capacity_[static_cast<size_t>(l)];
      unfixed_[static_cast<size_t>(l)] = 0;
    }
    for (int fl : comp_flows_) {
      flows_[static_cast<size_t>(fl)].fixed = false;
      for (int l : flows_[static_cast<size_t>(fl)].path) ++unfixed_[static_cast<size_t>(l)];
    }
    for (;;) {
      double share = std::numeric_limits<double>::infinity();
      int bottleneck = -1;
      for (int l : comp_links_) {
        const auto lu = static_cast<size_t>(l);
        if (unfixed_[lu] > 0 && left_[lu] / unfixed_[lu] < share) {
          share = left_[lu] / unfixed_[lu];
          bottleneck = l;
        }
      }
      if (bottleneck < 0) break;
      for (int fl : link_flows_[static_cast<size_t>(bottleneck)]) {
        Flow& f = flows_[static_cast<size_t>(fl)];
        if (f.fixed) continue;
        f.rate = share;
        f.fixed = true;
        for (int l : f.path) {
          left_[static_cast<size_t>(l)] -= share;
          --unfixed_[static_cast<size_t>(l)];
        }
      }
    }
  }
  for (int fl : comp_flows_) {
    Flow& f = flows_[static_cast<size_t>(fl)];
    if (f.rate != f.old_rate || f.fresh) {
      f.fresh = false;
      schedule_completion(fl);
    }
  }
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
  f.active = false;
  f.remaining = 0;
  f.rate = 0;
  --active_;
  for (int l : f.path) {
    std::vector<int>& on = link_flows_[static_cast<size_t>(l)];
    on.erase(std::find(on.begin(), on.end(), static_cast<int>(flow)));
  }
  const Notify done = f.done;
  free_slots_.push_back(static_cast<int>(flow));
  reallocate(f.path);
  engine.schedule_at(engine.now(), done.handler, done.kind, done.payload);
}

}  // namespace dtplan::des
