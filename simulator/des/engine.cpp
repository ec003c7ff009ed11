#include "simulator/des/engine.h"

#include <cassert>
#include <utility>

namespace dtplan::des {

Engine::HandlerId Engine::add_handler(Handler* h) {
  handlers_.push_back(h);
  return static_cast<HandlerId>(handlers_.size() - 1);
}

void Engine::schedule_at(double time_s, HandlerId h, uint32_t kind, uint64_t payload) {
  assert(time_s >= now_ && "an event cannot be scheduled in the past");
  assert(h < handlers_.size());
  push({time_s < now_ ? now_ : time_s, seq_++, payload, h, kind});
}

// A binary min-heap by (time, seq), hand-rolled so that pop() moves one element.
void Engine::push(const Event& e) {
  heap_.push_back(e);
  std::size_t i = heap_.size() - 1;
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!later(heap_[parent], heap_[i])) break;
    std::swap(heap_[parent], heap_[i]);
    i = parent;
  }
}

Engine::Event Engine::pop() {
  Event top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  std::size_t i = 0;
  for (;;) {
    const std::size_t l = 2 * i + 1, r = l + 1;
    std::size_t best = i;
    if (l < n && later(heap_[best], heap_[l])) best = l;
    if (r < n && later(heap_[best], heap_[r])) best = r;
    if (best == i) break;
    std::swap(heap_[i], heap_[best]);
    i = best;
  }
  return top;
}

uint64_t Engine::run(double until_s) {
  uint64_t n = 0;
  while (!heap_.empty() && heap_.front().time <= until_s) {
    const Event e = pop();
    now_ = e.time;
    ++n;
    ++processed_;
    handlers_[e.handler]->on_event(*this, e.kind, e.payload);
    if ((processed_ & 0xffff) == 0 && progress_) progress_(processed_);
  }
  return n;
}

}  // namespace dtplan::des
