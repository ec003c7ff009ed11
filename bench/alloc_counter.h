// Heap allocations counted by replacing the global operator new: linked into the executables
// that check the estimator's no-allocation contract (bench/estimator_bench and
// tests/unit/simulator/estimator_alloc_test.cpp), and only those.
#pragma once

namespace dtplan::testing {
// Allocations made through operator new since the program started.
long heap_allocations();
}  // namespace dtplan::testing
