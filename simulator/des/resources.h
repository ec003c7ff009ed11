// Resources on top of the engine, still free of LLM knowledge:
//  - Stream: runs tasks one at a time in submission order (a CUDA stream, a NIC queue).
//  - FlowNetwork: links with capacities and flows over paths of links, sharing bandwidth by
//    max-min fairness (progressive filling), recomputed whenever a flow starts or ends; with
//    sharing off, every flow runs at its path's bottleneck capacity as if alone.
//
// Contract: completions are delivered as events to the handler given at submission, with the
// caller's kind and payload; bytes, seconds and bytes/s throughout.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "simulator/des/engine.h"

namespace dtplan::des {

struct Notify {
  Engine::HandlerId handler = 0;
  uint32_t kind = 0;
  uint64_t payload = 0;
};

class Stream final : public Handler {
 public:
  explicit Stream(Engine& engine) : engine_(engine), id_(engine.add_handler(this)) {}
  // Queues a task of `duration_s`; `done` fires when it completes.
  void submit(double duration_s, Notify done);
  double busy_s() const { return busy_s_; }
  void on_event(Engine& engine, uint32_t kind, uint64_t payload) override;

 private:
  struct Task {
    double duration_s;
    Notify done;
  };
  void start_next();
  Engine& engine_;
  Engine::HandlerId id_;
  std::deque<Task> queue_;
  bool running_ = false;
  Task current_{};
  double busy_s_ = 0;
};

class FlowNetwork final : public Handler {
 public:
  explicit FlowNetwork(Engine& engine, bool sharing = true)
      : engine_(engine), id_(engine.add_handler(this)), sharing_(sharing) {}

  int add_link(double capacity_bytes_per_s);
  double capacity(int link) const { return capacity_[static_cast<size_t>(link)]; }
  // Starts a transfer of `bytes` over the links of `path`; `done` fires when the last byte
  // arrives. Returns the flow id (valid until the flow completes; ids are reused).
  int start_flow(const std::vector<int>& path, double bytes, Notify done);
  double rate(int flow) const { return flows_[static_cast<size_t>(flow)].rate; }
  int active_flows() const { return active_; }
  void on_event(Engine& engine, uint32_t kind, uint64_t payload) override;

 private:
  struct Flow {
    std::vector<int> path;
    double remaining = 0;
    double rate = 0;
    double last_update = 0;
    uint64_t version = 0;  // completion events of older versions are stale
    bool active = false;
    bool fresh = false;  // started since the last reallocation
    bool fixed = false;  // progressive filling: rate decided
    double old_rate = 0;
    Notify done;
  };
  void collect_component(const std::vector<int>& path);
  void reallocate(const std::vector<int>& path);
  void schedule_completion(int flow);

  Engine& engine_;
  Engine::HandlerId id_;
  bool sharing_;
  std::vector<double> capacity_;
  std::vector<Flow> flows_;
  std::vector<int> free_slots_;  // finished flows' slots, reused so the list stays short
  int active_ = 0;
  std::vector<std::vector<int>> link_flows_;  // per link: the active flows crossing it
  // Scratch of reallocate(), kept between calls (no allocation per event once warm).
  std::vector<double> left_;
  std::vector<int> unfixed_, comp_flows_, comp_links_;
  std::vector<uint32_t> link_mark_, flow_mark_;
  uint32_t mark_ = 0;
};

}  // namespace dtplan::des
