// OpList (simulator/workload/op.h): a push past the capacity is an error, not a silent drop.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "simulator/workload/op.h"

namespace dtplan {
namespace {

// Expectation: two ops fit in an OpList<2>; the third throws std::length_error naming the
// capacity, and the list keeps the two it had.
TEST(OpList, PushPastCapacityThrows) {
  OpList<2> ops;
  Op op{};
  op.kind = OpKind::kGemm;
  ops.push(op);
  ops.push(op);
  EXPECT_TRUE(ops.full());
  try {
    ops.push(op);
    FAIL() << "no error";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 2 ops"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ops.size(), 2);
}

}  // namespace
}  // namespace dtplan
