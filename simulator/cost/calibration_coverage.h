// Which inputs of an estimate fall outside what a calibrated profile measured: a GEMM beyond
// the fitted size range, a collective size beyond its measured table, or a collective with no
// measured table at all (the alpha-beta model stands in). `dtplan estimate` flags them.
//
// While a CoverageScope is alive on a thread, the cost functions of that thread report to its
// recorder; without one they pay a single thread-local pointer test.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/hardware.h"
#include "simulator/workload/op.h"

namespace dtplan {

class CalibrationCoverage {
 public:
  void note_gemm(const HardwareProfile& hw, Precision p, int64_t m, int64_t n, int64_t k,
                 bool table_hit);
  void note_collective(const HardwareProfile& hw, CollectiveOp op, double bytes,
                       const GroupPlacement& g, const CollectiveTable* table);
  // One line per distinct finding, with how many times the estimate met it.
  std::vector<std::string> warnings() const;

 private:
  std::map<std::string, int> findings_;
};

class CoverageScope {
 public:
  explicit CoverageScope(CalibrationCoverage& c);
  ~CoverageScope();
  CoverageScope(const CoverageScope&) = delete;
  CoverageScope& operator=(const CoverageScope&) = delete;

 private:
  CalibrationCoverage* previous_;
};

CalibrationCoverage* active_coverage();

}  // namespace dtplan
