#include <memory>

#include "simulator/analytic/estimator_internal.h"

namespace dtplan {

EstimatorCache::EstimatorCache() : impl_(std::make_unique<Impl>()) {}
EstimatorCache::~EstimatorCache() = default;
size_t EstimatorCache::size() const { return impl_->layers.size(); }

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt) {
  return estimate(m, c, w, p, opt, nullptr);
}

}  // namespace dtplan
