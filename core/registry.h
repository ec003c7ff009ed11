// A registry of named plug-ins (pipeline schedules, collective algorithms, launch emitters,
// calibration backends). Each implementation file registers itself with one line:
//
//   DTPLAN_REGISTER(IPipelineSchedule, OneFOneB, "1f1b", "one forward, one backward
//   (PipeDream-Flush)");
//
// Plug-in objects are linked into every executable through an OBJECT library (see
// cmake/DtplanOptions.cmake, dtplan_link_plugins), so the linker keeps the registrations.
// Contract: registration happens during static initialization, before main(); lookups after.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtplan {

template <typename Interface>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    std::shared_ptr<const Interface> instance;
  };

  static Registry& global() {
    static Registry r;  // function-local: safe to use from other static initializers
    return r;
  }

  bool add(std::string name, std::string description, std::shared_ptr<const Interface> impl) {
    entries_.push_back({std::move(name), std::move(description), std::move(impl)});
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return true;
  }

  // nullptr when no plug-in has that name.
  const Interface* find(std::string_view name) const {
    for (const auto& e : entries_)
      if (e.name == name) return e.instance.get();
    return nullptr;
  }

  const std::vector<Entry>& entries() const { return entries_; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

 private:
  std::vector<Entry> entries_;
};

// __COUNTER__, not __LINE__: two plug-ins on the same line of different files share one
// translation unit in a unity build (the CI sanitizer builds).
#define DTPLAN_REGISTER_CONCAT2(a, b) a##b
#define DTPLAN_REGISTER_CONCAT(a, b) DTPLAN_REGISTER_CONCAT2(a, b)
#define DTPLAN_REGISTER(Interface, Impl, name, description)                        \
  namespace {                                                                      \
  [[maybe_unused]] const bool DTPLAN_REGISTER_CONCAT(registered_, __COUNTER__) =   \
      ::dtplan::Registry<Interface>::global().add(name, description,               \
                                                  std::make_shared<const Impl>()); \
  }

}  // namespace dtplan
