// Which world ranks form each parallel group of a plan, as Megatron-LM builds them: ranks are
// numbered by the plan's rank order (innermost first, "tp-cp-ep-dp-pp" by default), a rank's
// coordinate in dimension i is (rank / stride_i) % size_i with stride_i the product of the
// sizes before it, and a group of some dimensions is the set of ranks that share every other
// coordinate. Megatron keeps two such grids over the same ranks (parallel_state.py
// initialize_model_parallel @d98e8a6: decoder_rank_generator with ep = 1, and
// expert_decoder_rank_generator with tp = expert TP, cp = 1, dp = world / (etp x ep x pp));
// RankGenerator and generate_masked_orthogonal_rank_groups (parallel_state.py:269-560) are
// the rule this file follows.
#pragma once

#include <string>
#include <vector>

#include "core/plan.h"

namespace dtplan::exec {

enum class GroupKind : int {
  kTp,    // tensor parallel
  kCp,    // context parallel
  kDp,    // data parallel (without CP)
  kDpCp,  // data x context parallel: the dense gradients' reduction group
  kPp,    // pipeline
  kEp,    // expert parallel (expert grid)
  kEtp,   // expert tensor parallel (expert grid)
  kEdp,   // expert data parallel (expert grid): the experts' gradients' reduction group
};
inline constexpr int kNumGroupKinds = 8;
const char* to_string(GroupKind k);

class RankGrid {
 public:
  // Throws InputError when the rank order cannot hold the plan's sizes (an order without "cp"
  // or "ep" needs cp = 1 and ep = 1, as Megatron's RankGenerator requires).
  explicit RankGrid(const Plan& p);

  int world() const { return world_; }
  // The coordinate of `rank` in the dimension a group kind varies (its index in that group).
  int coord(GroupKind k, int rank) const;
  // The world ranks of `rank`'s group of kind k, ascending (Megatron's order within a group).
  std::vector<int> group(GroupKind k, int rank) const;
  // Which group of kind k `rank` is in: 0 .. world/size - 1, the same for every member.
  int group_index(GroupKind k, int rank) const;
  int group_size(GroupKind k) const;
  // Megatron's order string of the grid the kind belongs to ("tp-cp-ep-dp-pp").
  std::string order(GroupKind k) const;

 private:
  struct Grid {
    std::vector<std::string> names;  // innermost first
    std::vector<int> sizes;
  };
  const Grid& grid_of(GroupKind k) const;
  std::vector<bool> mask_of(GroupKind k) const;
  int world_ = 1;
  Grid dense_, expert_;
};

}  // namespace dtplan::exec
