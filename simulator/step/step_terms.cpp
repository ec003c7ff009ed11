#include "simulator/step/step_terms.h"

#include <stdexcept>

#include "core/registry.h"

namespace dtplan {

namespace {

// JSON keys and labels of the exposed-communication terms, per dimension (kCommDimNames order).
constexpr const char* kExposedKeys[kCommDims] = {"exposed_comm_s.tp", "exposed_comm_s.cp",
                                                 "exposed_comm_s.ep", "exposed_comm_s.pp",
                                                 "exposed_comm_s.dp"};
constexpr const char* kExposedLabels[kCommDims] = {
    "exposed tp comm", "exposed cp comm", "exposed ep comm", "exposed pp comm", "exposed dp comm"};

const std::vector<Registry<IStepTerm>::Entry>& plugins() {
  const auto& entries = Registry<IStepTerm>::global().entries();
  if (entries.size() > static_cast<size_t>(kMaxExtraStepTerms))
    throw std::logic_error("more step-term plug-ins registered than kMaxExtraStepTerms");
  return entries;
}

}  // namespace

std::vector<StepTermValue> step_terms(const Estimate& e) {
  std::vector<StepTermValue> out;
  out.push_back({"compute_s", "compute", e.compute_s, true});
  out.push_back({"recompute_s", "recompute", e.recompute_s, false});
  for (int d = 0; d < kCommDims; ++d)
    out.push_back({kExposedKeys[d], kExposedLabels[d], e.exposed_comm_s[d], false});
  out.push_back({"overhead_s", "framework overhead", e.overhead_s, false});
  out.push_back({"bubble_s", "pipeline bubble", e.bubble_s, false});
  out.push_back({"optimizer_s", "optimizer step", e.optimizer_s, true});
  const auto& extra = plugins();
  for (size_t k = 0; k < extra.size(); ++k)
    out.push_back(
        {extra[k].instance->key(), extra[k].instance->label(), e.extra_terms_s[k], false});
  return out;
}

double step_terms_without_bubble_s(const Estimate& e) {
  double sum = e.compute_s + e.recompute_s + e.overhead_s + e.optimizer_s;
  for (double x : e.exposed_comm_s) sum += x;
  for (double x : e.extra_terms_s) sum += x;
  return sum;
}

void add_registered_step_terms(const ModelSpec& m, const Cluster& c, const Workload& w,
                               const Plan& p, Estimate& e) {
  const auto& extra = plugins();
  // Terms that add to the step each see the step without plug-in terms (their order of
  // registration, which is the link order, does not matter) ...
  double added = 0;
  for (size_t k = 0; k < extra.size(); ++k)
    if (!extra[k].instance->runs_beside_step()) {
      e.extra_terms_s[k] = extra[k].instance->seconds(m, c, w, p, e);
      added += e.extra_terms_s[k];
    }
  e.step_time_s += added;
  // ... and the ones beside it see the step with them.
  for (size_t k = 0; k < extra.size(); ++k)
    if (extra[k].instance->runs_beside_step()) {
      e.extra_terms_s[k] = extra[k].instance->seconds(m, c, w, p, e);
      e.step_time_s += e.extra_terms_s[k];
    }
}

}  // namespace dtplan
