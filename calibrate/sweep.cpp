#include "calibrate/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "calibrate/process_group.h"
#include "core/byte_size.h"
#include "core/catalog.h"
#include "core/error.h"
#include "simulator/workload/op_program.h"

namespace dtplan::calibrate {

std::string SweepOptions::signature() const {
  std::string ops_s;
  for (const auto& o : ops) ops_s += (ops_s.empty() ? "" : ",") + o;
  std::string prec_s;
  for (auto p : precisions) prec_s += std::string(prec_s.empty() ? "" : ",") + to_string(p);
  return fmt::format("quick={} ops={} sizes={}-{}{} max_gemm_gflop={} precisions={}", quick ? 1 : 0,
                     ops_s.empty() ? "all" : ops_s, min_bytes, max_bytes,
                     sizes_given ? "" : "(default)", max_gemm_gflop,
                     prec_s.empty() ? "all" : prec_s);
}

static bool wants(const SweepOptions& o, const std::string& what) {
  return o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), what) != o.ops.end();
}

// GEMM shapes from the zoo's layers under TP 1, 2, 4, 8 (per-GPU shapes after sharding).
static std::set<std::tuple<int64_t, int64_t, int64_t>> zoo_shapes(bool quick) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> out;
  const std::vector<std::string> names =
      quick ? std::vector<std::string>{"llama3-8b"} : list_model_names();
  const std::vector<int> tps = quick ? std::vector<int>{8} : std::vector<int>{1, 2, 4, 8};
  Cluster c;
  c.profile = load_profile("dgx-h100");
  for (const auto& name : names) {
    ModelSpec m;
    try {
      m = load_model(name);
    } catch (const InputError&) {
      continue;  // a zoo file that does not load is reported by `dtplan check`, not here
    }
    for (int tp : tps) {
      if (m.heads % tp != 0) continue;
      Workload w;
      w.seq_len = 4096;
      Plan p;
      p.tp = tp;
      p.sp = tp > 1;
      p.dp = 1;
      c.num_gpus = tp;
      OpProgram prog;
      try {
        build_op_program(m, w, p, c, prog);
      } catch (const InputError&) {
        continue;
      }
      for (const auto* list : {&prog.dense_layer, &prog.moe_layer}) {
        for (int i = 0; i < list->size(); ++i) {
          const Op& op = (*list)[i];
          if (op.kind == OpKind::kGemm && op.m > 0 && op.n > 0 && op.k > 0)
            out.insert({op.m, op.n, op.k});
        }
      }
    }
  }
  return out;
}

std::vector<Task> standard_sweep(const SweepOptions& o, const Environment& env,
                                 const ProcessGroup& world) {
  std::vector<Task> tasks;
  if (wants(o, "gemm")) {
    auto shapes = zoo_shapes(o.quick);
    const std::vector<int64_t> grid = o.quick ? std::vector<int64_t>{256, 1024, 4096}
                                              : std::vector<int64_t>{256, 1024, 2048, 4096, 8192};
    for (int64_t m : grid)
      for (int64_t n : grid)
        for (int64_t k : grid) shapes.insert({m, n, k});
    std::vector<Precision> precs = o.precisions.empty() ? env.precisions : o.precisions;
    for (Precision p : precs) {
      if (std::find(env.precisions.begin(), env.precisions.end(), p) == env.precisions.end())
        continue;
      for (const auto& [m, n, k] : shapes) {
        Task t;
        t.kind = TaskKind::kGemm;
        t.precision = p;
        t.m = m, t.n = n, t.k = k;
        if (o.max_gemm_gflop > 0 && t.gemm_flops() / 1e9 > o.max_gemm_gflop) continue;
        tasks.push_back(t);
      }
    }
  }
  if (!env.collectives || env.max_collective_bytes <= 0) return tasks;
  // --quick keeps the size resolution (factor 2: regimes need points) but stops at 64 MiB
  // unless --sizes says otherwise.
  int64_t max_bytes = std::min(o.max_bytes, env.max_collective_bytes);
  if (o.quick && !o.sizes_given) max_bytes = std::min<int64_t>(max_bytes, int64_t{64} << 20);
  const int64_t factor = 2;
  std::vector<int64_t> sizes;
  for (int64_t b = o.min_bytes; b <= max_bytes; b *= factor) sizes.push_back(b);
  // Groups: (scope, size).
  std::vector<std::pair<CommScope, int>> groups;
  const int local = world.min_ranks_per_node();
  for (int n = 2; n <= local; n *= 2) groups.push_back({CommScope::kIntraNode, n});
  if (local > 2 && (local & (local - 1)) != 0) groups.push_back({CommScope::kIntraNode, local});
  if (world.nodes() > 1) {
    groups.push_back({CommScope::kInterNode, world.nodes()});
    if (world.size() > world.nodes()) groups.push_back({CommScope::kInterNode, world.size()});
  }
  const std::vector<CollectiveOp> coll_ops = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                                              CollectiveOp::kReduceScatter,
                                              CollectiveOp::kAllToAll};
  auto add = [&](CollectiveOp op, CommScope scope, int n) {
    for (int64_t b : sizes) {
      // All-gather, reduce-scatter and all-to-all move `bytes` in n equal parts.
      if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kSendRecv && b % n != 0) continue;
      Task t;
      t.kind = TaskKind::kCollective;
      t.op = op, t.scope = scope, t.group_size = n, t.bytes = b;
      tasks.push_back(t);
    }
  };
  for (auto op : coll_ops) {
    if (!wants(o, to_string(op))) continue;
    for (auto [scope, n] : groups) add(op, scope, n);
  }
  if (wants(o, "send_recv")) {
    if (world.size() == 1) add(CollectiveOp::kSendRecv, CommScope::kIntraNode, 1);
    if (local >= 2) add(CollectiveOp::kSendRecv, CommScope::kIntraNode, 2);
    if (world.nodes() >= 2) add(CollectiveOp::kSendRecv, CommScope::kInterNode, 2);
  }
  return tasks;
}

static int64_t parse_size(const std::string& s, const std::string& /*whole*/) {
  return static_cast<int64_t>(parse_byte_size("--sizes", s));
}

void parse_size_range(const std::string& text, int64_t& min_bytes, int64_t& max_bytes) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    min_bytes = max_bytes = parse_size(text, text);
  } else {
    min_bytes = parse_size(text.substr(0, dash), text);
    max_bytes = parse_size(text.substr(dash + 1), text);
  }
  if (min_bytes < 1 || max_bytes < min_bytes || max_bytes > (int64_t{1} << 36))
    throw InputError(SourceLocation{}, "--sizes",
                     fmt::format("'{}': need 1 B <= min <= max <= 64 GiB", text));
}

}  // namespace dtplan::calibrate
