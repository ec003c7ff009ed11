#include "executor/rank_grid.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace dtplan::exec {

const char* to_string(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kDpCp:
      return "dp-cp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kEtp:
      return "etp";
    case GroupKind::kEdp:
      return "edp";
  }
  return "?";
}

namespace {

std::vector<std::string> split_order(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = std::min(s.find('-', a), s.size());
    out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace

RankGrid::RankGrid(const Plan& p) : world_(p.world()) {
  const std::vector<std::string> names = split_order(to_string(p.rank_order));
  auto build = [&](int tp, int cp, int ep, int dp, const char* which) {
    Grid g;
    g.names = names;
    for (const auto& n : names)
      g.sizes.push_back(n == "tp" ? tp : n == "cp" ? cp : n == "ep" ? ep : n == "dp" ? dp : p.pp);
    // Megatron's RankGenerator appends a missing dimension of size 1 and refuses a larger one.
    for (const auto& [n, size] : {std::pair<const char*, int>{"cp", cp}, {"ep", ep}})
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        if (size != 1)
          throw InputError({}, "--rank-order",
                           fmt::format("order {} has no '{}' dimension, but the {} grid's {} "
                                       "size is {} (Megatron's RankGenerator refuses this)",
                                       to_string(p.rank_order), n, which, n, size));
        g.names.push_back(n);
        g.sizes.push_back(1);
      }
    return g;
  };
  dense_ = build(p.tp, p.cp, 1, p.dp, "dense");
  if (p.etp < 1 || p.ep < 1 || world_ % (p.etp * p.ep * p.pp) != 0)
    throw InputError({}, "--ep",
                     fmt::format("{} GPUs do not split into expert TP {} x EP {} x PP {}", world_,
                                 p.etp, p.ep, p.pp));
  expert_ = build(p.etp, 1, p.ep, p.edp(), "expert");
}

const RankGrid::Grid& RankGrid::grid_of(GroupKind k) const {
  return k == GroupKind::kEp || k == GroupKind::kEtp || k == GroupKind::kEdp ? expert_ : dense_;
}

std::vector<bool> RankGrid::mask_of(GroupKind k) const {
  const Grid& g = grid_of(k);
  std::vector<bool> m(g.names.size(), false);
  auto set = [&](const char* n) {
    for (size_t i = 0; i < g.names.size(); ++i)
      if (g.names[i] == n) m[i] = true;
  };
  switch (k) {
    case GroupKind::kTp:
    case GroupKind::kEtp:
      set("tp");
      break;
    case GroupKind::kCp:
      set("cp");
      break;
    case GroupKind::kDp:
    case GroupKind::kEdp:
      set("dp");
      break;
    case GroupKind::kDpCp:
      set("dp"), set("cp");
      break;
    case GroupKind::kPp:
      set("pp");
      break;
    case GroupKind::kEp:
      set("ep");
      break;
  }
  return m;
}

int RankGrid::group_size(GroupKind k) const {
  const Grid& g = grid_of(k);
  const std::vector<bool> m = mask_of(k);
  int n = 1;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) n *= g.sizes[i];
  return n;
}

int RankGrid::coord(GroupKind k, int rank) const {
  // The index within the group: the masked coordinates, innermost first.
  const Grid& g = grid_of(k);
  const std::vector<bool> m = mask_of(k);
  int stride = 1, inner = 1, out = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    const int c = (rank / stride) % g.sizes[i];
    if (m[i]) out += c * inner, inner *= g.sizes[i];
    stride *= g.sizes[i];
  }
  return out;
}

int RankGrid::group_index(GroupKind k, int rank) const {
  const Grid& g = grid_of(k);
  const std::vector<bool> m = mask_of(k);
  int stride = 1, inner = 1, out = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    const int c = (rank / stride) % g.sizes[i];
    if (!m[i]) out += c * inner, inner *= g.sizes[i];
    stride *= g.sizes[i];
  }
  return out;
}

std::vector<int> RankGrid::group(GroupKind k, int rank) const {
  std::vector<int> out;
  const int idx = group_index(k, rank);
  for (int r = 0; r < world_; ++r)
    if (group_index(k, r) == idx) out.push_back(r);
  return out;
}

std::string RankGrid::order(GroupKind k) const {
  const Grid& g = grid_of(k);
  std::string s;
  for (const auto& n : g.names) s += (s.empty() ? "" : "-") + n;
  return s;
}

}  // namespace dtplan::exec
