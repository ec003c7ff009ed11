// A generic discrete-event engine: a time-ordered queue of events delivered to handlers.
// It knows time, events and handlers, nothing about GPUs or layers (STYLE.md: an engine that
// knows only time), so it is tested and benchmarked alone.
//
// Contract: events fire in (time, insertion order); an event scheduled for a time before now()
// is a bug (asserted). Handlers must outlive the run. Scheduling allocates only when the queue
// grows past its capacity (reserve() ahead for large runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace dtplan::des {

class Engine;

// Receives the events addressed to it; `kind` and `payload` are the handler's own vocabulary.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual void on_event(Engine& engine, uint32_t kind, uint64_t payload) = 0;
};

class Engine {
 public:
  using HandlerId = uint32_t;

  HandlerId add_handler(Handler* h);
  void reserve(std::size_t events) { heap_.reserve(events); }

  void schedule_at(double time_s, HandlerId h, uint32_t kind, uint64_t payload = 0);
  void schedule_in(double delay_s, HandlerId h, uint32_t kind, uint64_t payload = 0) {
    schedule_at(now_ + delay_s, h, kind, payload);
  }

  // Processes events until the queue is empty or the next event is later than `until_s`.
  // Returns the number of events processed by this call.
  uint64_t run(double until_s = std::numeric_limits<double>::infinity());

  // Called with events_processed() every 2^16 events (a progress display); empty: none.
  void set_progress(std::function<void(uint64_t)> f) { progress_ = std::move(f); }

  double now() const { return now_; }
  bool empty() const { return heap_.empty(); }
  uint64_t events_processed() const { return processed_; }

 private:
  struct Event {
    double time;
    uint64_t seq;
    uint64_t payload;
    HandlerId handler;
    uint32_t kind;
  };
  static bool later(const Event& a, const Event& b) {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
  void push(const Event& e);
  Event pop();

  std::vector<Event> heap_;
  std::vector<Handler*> handlers_;
  double now_ = 0;
  uint64_t seq_ = 0;
  uint64_t processed_ = 0;
  std::function<void(uint64_t)> progress_;
};

}  // namespace dtplan::des
