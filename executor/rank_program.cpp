#include "executor/rank_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/task_flow.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan::exec {

const char* to_string(OpClass c) {
  switch (c) {
    case OpClass::kGemm:
      return "gemm";
    case OpClass::kAttention:
      return "attention";
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kTp:
      return "tp";
    case OpClass::kCp:
      return "cp";
    case OpClass::kEp:
      return "ep";
    case OpClass::kPp:
      return "pp";
    case OpClass::kDp:
      return "dp";
    case OpClass::kOptimizer:
      return "optimizer";
  }
  return "?";
}

std::string Instr::label() const {
  static const char* const kPass[] = {"F", "B", "W", "BW", "FB"};
  std::string s = task < 0 ? "step-end" : fmt::format("{} mb{} c{}", kPass[pass], mb, chunk);
  if (layer >= 0) s += fmt::format(" L{}", layer);
  if (layer == -2 && (kind == InstrKind::kAlloc || kind == InstrKind::kFree)) s += " loss";
  switch (kind) {
    case InstrKind::kCompute:
    case InstrKind::kCollective:
      s += fmt::format(" {}", op.name);
      break;
    case InstrKind::kSend:
      s += fmt::format(" send to {}", peer);
      break;
    case InstrKind::kRecv:
      s += fmt::format(" recv from {}", peer);
      break;
    case InstrKind::kAlloc:
      s += " alloc activations";
      break;
    case InstrKind::kFree:
      s += " free activations";
      break;
  }
  if (recompute) s += " (recompute)";
  if (modelled) s += " (modelled: a peer is outside the ranks run)";
  return s;
}

namespace {

GroupKind group_of(CommDim d, bool expert) {
  switch (d) {
    case CommDim::kTP:
      return expert ? GroupKind::kEtp : GroupKind::kTp;
    case CommDim::kCP:
      return GroupKind::kCp;
    case CommDim::kEP:
      return GroupKind::kEp;
    case CommDim::kPP:
      return GroupKind::kPp;
    case CommDim::kDP:
      return expert ? GroupKind::kEdp : GroupKind::kDpCp;
  }
  return GroupKind::kTp;
}

OpClass class_of(const Op& o) {
  switch (o.kind) {
    case OpKind::kGemm:
      return OpClass::kGemm;
    case OpKind::kAttention:
      return OpClass::kAttention;
    case OpKind::kElementwise:
      return OpClass::kElementwise;
    case OpKind::kCollective:
      switch (o.dim) {
        case CommDim::kTP:
          return OpClass::kTp;
        case CommDim::kCP:
          return OpClass::kCp;
        case CommDim::kEP:
          return OpClass::kEp;
        case CommDim::kPP:
          return OpClass::kPp;
        case CommDim::kDP:
          return OpClass::kDp;
      }
  }
  return OpClass::kElementwise;
}

// A collective's group of `size` ranks: the placement the op program gave it. The expert
// tensor-parallel group is told apart from the dense one by its size where they differ.
bool is_expert_collective(const Op& o, const Plan& p) {
  return o.kind == OpKind::kCollective && o.dim == CommDim::kTP && p.etp != p.tp &&
         o.group.size == p.etp;
}

// Memory blocks of one (micro-batch, chunk): its saved activations, and the loss's scratch;
// a recomputed layer's rebuilt activations are keyed by the layer.
constexpr int kChunkBlock = -1;
constexpr int kLossBlock = -2;

class Builder {
 public:
  Builder(const ModelSpec& m, const Workload& w, const Plan& p, const Cluster& c,
          const RankGrid& grid, int rank, RankProgram& out)
      : m_(m), w_(w), p_(p), c_(c), grid_(grid), rank_(rank), out_(out) {
    cm_.hw = &c.profile;
    cm_.precision = w.precision;
    cm_.fp8_recipe = w.fp8_recipe;
    build_op_program(m, w, p, c, prog_);
  }

  void run(const IPipelineSchedule& sched) {
    const int s = out_.stage, pp = p_.pp, v = p_.vpp, mbs = p_.num_microbatches();
    v_shape_ = sched.v_shape();
    splits_w_ = sched.splits_weight_gradients();
    out_.order = sched.task_order(s, pp, v, mbs);
    for (size_t t = 0; t < out_.order.size(); ++t) {
      const ScheduleTask& k = out_.order[t];
      task_ = static_cast<int>(t);
      switch (k.pass) {
        case ScheduleTask::kF:
          forward(k.mb, k.chunk);
          break;
        case ScheduleTask::kB:
          backward(k.mb, k.chunk, !splits_w_);
          break;
        case ScheduleTask::kBW:
          backward(k.mb, k.chunk, true);
          break;
        case ScheduleTask::kW:
          weight_gradients(k.mb, k.chunk);
          break;
        case ScheduleTask::kFB:  // a forward overlapped with a whole backward (DualPipeV)
          forward(k.mb, k.chunk);
          backward(k.mb2, k.chunk2, true);
          break;
      }
    }
    task_ = -1;
    step_end();
  }

 private:
  int global_chunk(int stage, int chunk) const {
    if (v_shape_) return chunk == 0 ? stage : 2 * p_.pp - 1 - stage;
    return chunk * p_.pp + stage;
  }
  int last_global_chunk() const { return p_.pp * p_.vpp - 1; }
  int tag(ScheduleTask::Pass dir, int gchunk, int mb) const {
    return ((dir == ScheduleTask::kF ? 0 : 1) * (last_global_chunk() + 1) + gchunk) *
               p_.num_microbatches() +
           mb;
  }
  int pp_peer(int stage) const {
    return grid_.group(GroupKind::kPp, rank_)[static_cast<size_t>(stage)];
  }

  void push(Instr i, ScheduleTask::Pass pass, int mb, int chunk) {
    i.task = task_;
    i.pass = pass;
    i.mb = mb;
    i.chunk = chunk;
    out_.instrs.push_back(i);
  }
  void push_op(const Op& o, ScheduleTask::Pass pass, int mb, int chunk, int layer, bool rec) {
    Instr i;
    i.op = o;
    i.layer = layer;
    i.recompute = rec;
    i.op_class = class_of(o);
    if (o.kind == OpKind::kCollective) {
      i.kind = InstrKind::kCollective;
      i.group = group_of(o.dim, is_expert_collective(o, p_));
      i.predicted_s = collective_cost(c_.profile, o.collective, o.bytes, o.group).time_s;
    } else {
      i.kind = InstrKind::kCompute;
      i.predicted_s = cm_.op_s(o);
    }
    push(i, pass, mb, chunk);
  }
  template <typename List>
  void ops_of(const List& ops, Pass which, ScheduleTask::Pass pass, int mb, int chunk, int layer,
              bool recompute_only, bool selective_only) {
    for (const Op& o : ops) {
      if (o.pass != which) continue;
      if (selective_only && (!o.selective || o.kind == OpKind::kCollective)) continue;
      push_op(o, pass, mb, chunk, layer, recompute_only);
    }
  }
  const LayerOps& layer_ops(int layer) const {
    return m_.is_moe_layer(layer) ? prog_.moe_layer : prog_.dense_layer;
  }
  // Whether full recomputation re-runs the layer `in_chunk` layers into its chunk (the first
  // --recompute-layers of each chunk, or all).
  bool recomputed_in_full(int in_chunk) const {
    return p_.recompute == Recompute::kFull &&
           (p_.recompute_layers == 0 || in_chunk < p_.recompute_layers);
  }
  // What one micro-batch leaves on a layer until its backward (memory_model.h): its input only
  // where full recomputation re-runs it, everything it saves otherwise.
  double saved_bytes(int layer, int in_chunk) const {
    const bool moe = m_.is_moe_layer(layer);
    if (p_.recompute != Recompute::kFull) return layer_activation_bytes(m_, w_, p_, moe);
    Plan q = p_;
    q.recompute_layers = 0;
    if (!recomputed_in_full(in_chunk)) q.recompute = Recompute::kNone;
    return layer_activation_bytes(m_, w_, q, moe);
  }
  double full_layer_bytes(int layer) const {
    Plan q = p_;
    q.recompute = Recompute::kNone;
    q.recompute_layers = 0;
    return layer_activation_bytes(m_, w_, q, m_.is_moe_layer(layer));
  }
  double chunk_activation_bytes(int g) const {
    const LayerRange r = chunk_layers(m_, p_, g);
    double b = g == 0 ? embedding_mask_bytes(m_, w_, p_) : 0.0;
    for (int l = r.begin; l < r.end; ++l) b += saved_bytes(l, l - r.begin);
    return b;
  }
  void memory(InstrKind kind, double bytes, ScheduleTask::Pass pass, int mb, int chunk, int layer) {
    if (bytes <= 0) return;
    Instr a;
    a.kind = kind;
    a.bytes = bytes;
    a.layer = layer;
    push(a, pass, mb, chunk);
  }

  // The receive of `dir`'s input of (mb, chunk) on this stage, where another stage sends it.
  void receive(ScheduleTask::Pass dir, int mb, int chunk) {
    for (int s2 = 0; s2 < p_.pp; ++s2)
      for (int c2 = 0; c2 < p_.vpp; ++c2) {
        const PipelineHop h = pipeline_hop(v_shape_, p_.pp, p_.vpp, dir, s2, c2);
        if (h.local || h.to != out_.stage || h.chunk != chunk) continue;
        Instr i;
        i.kind = InstrKind::kRecv;
        i.op_class = OpClass::kPp;
        i.peer = pp_peer(s2);
        i.bytes = prog_.pp_message_bytes;
        i.tag = tag(dir, global_chunk(out_.stage, chunk), mb);
        push(i, dir, mb, chunk);
        return;
      }
  }
  void send(ScheduleTask::Pass dir, int mb, int chunk) {
    const PipelineHop h = pipeline_hop(v_shape_, p_.pp, p_.vpp, dir, out_.stage, chunk);
    if (h.to < 0 || h.local) return;
    Instr i;
    i.kind = InstrKind::kSend;
    i.op_class = OpClass::kPp;
    i.peer = pp_peer(h.to);
    i.bytes = prog_.pp_message_bytes;
    i.tag = tag(dir, global_chunk(h.to, h.chunk), mb);
    i.predicted_s =
        collective_cost(c_.profile, CollectiveOp::kSendRecv, i.bytes, prog_.groups.pp).time_s;
    push(i, dir, mb, chunk);
  }

  void forward(int mb, int chunk) {
    const auto F = ScheduleTask::kF;
    const int g = global_chunk(out_.stage, chunk);
    receive(F, mb, chunk);
    const LayerRange r = chunk_layers(m_, p_, g);
    memory(InstrKind::kAlloc, chunk_activation_bytes(g), F, mb, chunk, kChunkBlock);
    if (g == 0) ops_of(prog_.embedding, Pass::kForward, F, mb, chunk, -1, false, false);
    for (int l = r.begin; l < r.end; ++l)
      ops_of(layer_ops(l), Pass::kForward, F, mb, chunk, l, false, false);
    if (g == last_global_chunk()) {
      // The logits and the loss's scratch live from the head's forward to its backward.
      memory(InstrKind::kAlloc, loss_scratch_bytes(m_, w_, p_), F, mb, chunk, kLossBlock);
      ops_of(prog_.head, Pass::kForward, F, mb, chunk, -1, false, false);
    }
    send(F, mb, chunk);
  }

  void release(ScheduleTask::Pass pass, int mb, int chunk) {
    memory(InstrKind::kFree, chunk_activation_bytes(global_chunk(out_.stage, chunk)), pass, mb,
           chunk, kChunkBlock);
  }

  void backward(int mb, int chunk, bool with_weights) {
    const auto B = with_weights && splits_w_ ? ScheduleTask::kBW : ScheduleTask::kB;
    const int g = global_chunk(out_.stage, chunk);
    receive(ScheduleTask::kB, mb, chunk);
    const LayerRange r = chunk_layers(m_, p_, g);
    if (g == last_global_chunk()) {
      ops_of(prog_.head, Pass::kBackwardInput, B, mb, chunk, -1, false, false);
      if (with_weights) ops_of(prog_.head, Pass::kBackwardWeight, B, mb, chunk, -1, false, false);
      memory(InstrKind::kFree, loss_scratch_bytes(m_, w_, p_), B, mb, chunk, kLossBlock);
    }
    for (int l = r.end - 1; l >= r.begin; --l) {
      const bool full = recomputed_in_full(l - r.begin);
      // Full recomputation rebuilds the layer's activations, which live until its backward.
      if (full) memory(InstrKind::kAlloc, full_layer_bytes(l), B, mb, chunk, l);
      if (full || p_.recompute == Recompute::kSelective)
        ops_of(layer_ops(l), Pass::kForward, B, mb, chunk, l, true, !full);
      ops_of(layer_ops(l), Pass::kBackwardInput, B, mb, chunk, l, false, false);
      if (with_weights) ops_of(layer_ops(l), Pass::kBackwardWeight, B, mb, chunk, l, false, false);
      if (full) memory(InstrKind::kFree, full_layer_bytes(l), B, mb, chunk, l);
    }
    if (g == 0) {
      ops_of(prog_.embedding, Pass::kBackwardInput, B, mb, chunk, -1, false, false);
      if (with_weights)
        ops_of(prog_.embedding, Pass::kBackwardWeight, B, mb, chunk, -1, false, false);
    }
    send(ScheduleTask::kB, mb, chunk);
    if (with_weights) release(B, mb, chunk);
  }

  void weight_gradients(int mb, int chunk) {
    const auto W = ScheduleTask::kW;
    const int g = global_chunk(out_.stage, chunk);
    const LayerRange r = chunk_layers(m_, p_, g);
    if (g == last_global_chunk())
      ops_of(prog_.head, Pass::kBackwardWeight, W, mb, chunk, -1, false, false);
    for (int l = r.end - 1; l >= r.begin; --l)
      ops_of(layer_ops(l), Pass::kBackwardWeight, W, mb, chunk, l, false, false);
    if (g == 0) ops_of(prog_.embedding, Pass::kBackwardWeight, W, mb, chunk, -1, false, false);
    release(W, mb, chunk);
  }

  // Gradient reduction (all-reduce, or reduce-scatter with a distributed optimizer / ZeRO),
  // the optimizer's pass over its state, and the parameter all-gather after it (ZeRO >= 1).
  void step_end() {
    const ParamsOnRank params = params_on_rank(m_, p_, out_.stage);
    const double gbytes = grad_bytes_per_param(p_, w_.precision);
    const double wbytes =
        bytes_per_element(w_.precision == Precision::kFp8 ? Precision::kBf16 : w_.precision);
    auto collective = [&](const char* name, CollectiveOp op, GroupKind gk, const GroupPlacement& g,
                          double bytes) {
      if (grid_.group_size(gk) <= 1 || bytes <= 0) return;
      Op o;
      o.kind = OpKind::kCollective;
      o.name = name;
      o.collective = op;
      o.dim = CommDim::kDP;
      o.group = g;
      o.bytes = bytes;
      Instr i;
      i.kind = InstrKind::kCollective;
      i.op_class = OpClass::kDp;
      i.op = o;
      i.group = gk;
      i.predicted_s = collective_cost(c_.profile, op, bytes, g).time_s;
      push(i, ScheduleTask::kF, -1, -1);
    };
    const CollectiveOp reduce =
        p_.zero >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
    collective("dp_grad_reduce", reduce, GroupKind::kDpCp, prog_.groups.dp, params.dense * gbytes);
    collective("edp_grad_reduce", reduce, GroupKind::kEdp, prog_.groups.edp,
               params.expert * gbytes);
    // The optimizer reads and writes its state, reads the gradients and writes the weights:
    // element-wise over this rank's shard.
    const StageMemory& mem = out_.predicted_memory;
    Op o;
    o.kind = OpKind::kElementwise;
    o.name = "optimizer_step";
    o.bytes = 2 * mem.optimizer_bytes + mem.grads_bytes + mem.weights_bytes;
    Instr i;
    i.kind = InstrKind::kCompute;
    i.op_class = OpClass::kOptimizer;
    i.op = o;
    i.predicted_s = cm_.memory_s(o.bytes);
    push(i, ScheduleTask::kF, -1, -1);
    if (p_.zero >= 1) {
      collective("dp_param_gather", CollectiveOp::kAllGather, GroupKind::kDpCp, prog_.groups.dp,
                 params.dense * wbytes);
      collective("edp_param_gather", CollectiveOp::kAllGather, GroupKind::kEdp, prog_.groups.edp,
                 params.expert * wbytes);
    }
  }

  const ModelSpec& m_;
  const Workload& w_;
  const Plan& p_;
  const Cluster& c_;
  const RankGrid& grid_;
  int rank_;
  RankProgram& out_;
  ComputeCostModel cm_;
  OpProgram prog_;
  bool v_shape_ = false, splits_w_ = false;
  int task_ = -1;
};

}  // namespace

RankProgram build_rank_program(const ModelSpec& m, const Workload& w, const Plan& p,
                               const Cluster& c, const RankGrid& grid, int rank) {
  if (rank < 0 || rank >= grid.world())
    throw InputError({}, "--rank", fmt::format("rank {} is not in 0..{}", rank, grid.world() - 1));
  const IPipelineSchedule* sched = plan_schedule(p);
  if (!sched)
    throw InputError({}, "--schedule", fmt::format("unknown schedule '{}'", p.schedule.str()));
  if (p.num_microbatches() < 1)
    throw InputError({}, "--gbs", "the plan has no micro-batch (gbs < mbs x dp)");
  RankProgram out;
  out.rank = rank;
  out.stage = grid.coord(GroupKind::kPp, rank);
  out.predicted_memory = stage_memory(m, w, p, *sched, out.stage);
  out.activation_bytes_per_layer = layer_activation_bytes(m, w, p, false);
  auto builder = std::make_unique<Builder>(m, w, p, c, grid, rank, out);  // OpProgram is large
  builder->run(*sched);
  return out;
}

ModelSpec scale_model(const ModelSpec& m, const Plan& p, int factor) {
  if (factor == 1) return m;
  if (factor < 1) throw InputError({}, "--scale", "must be at least 1");
  if (m.mla)
    throw InputError({}, "--scale",
                     fmt::format("{} uses multi-head latent attention, whose widths the executor "
                                 "does not scale; run it with --scale 1",
                                 m.name));
  auto shrink = [&](int64_t v, int64_t multiple, const char* what) {
    int64_t s = v / factor;
    s -= s % multiple;
    if (s < multiple)
      throw InputError({}, "--scale",
                       fmt::format("{} {} / {} leaves fewer than {} (a multiple of the plan's "
                                   "parallel sizes); choose a smaller --scale",
                                   what, v, factor, multiple));
    return s;
  };
  ModelSpec s = m;
  const int head_dim = m.head_dim > 0 ? m.head_dim : static_cast<int>(m.hidden / m.heads);
  const int64_t heads_multiple = int64_t{p.tp} * p.cp;
  // Heads fall with the widths but stay a multiple of TP x CP (at least one per rank).
  s.heads = static_cast<int>(
      std::max(heads_multiple, m.heads / factor / heads_multiple * heads_multiple));
  const int group = std::max(1, m.heads / std::max(1, m.kv_heads));
  int kv = std::min(s.heads, std::max(s.heads / group, p.tp));
  kv -= kv % p.tp;
  s.kv_heads = std::max(kv, p.tp);
  s.head_dim = head_dim;
  s.hidden = shrink(m.hidden, int64_t{p.tp} * 8, "hidden");
  s.ffn_hidden = shrink(m.ffn_hidden, int64_t{p.tp} * 8, "ffn_hidden");
  s.vocab = shrink(m.vocab, int64_t{p.tp} * 128, "vocab");
  if (s.moe) {
    s.moe->expert_ffn_hidden =
        shrink(m.moe->expert_ffn_hidden, int64_t{p.etp} * 8, "moe.expert_ffn_hidden");
    if (s.moe->shared_experts > 0)
      s.moe->shared_ffn_hidden =
          shrink(m.moe->shared_ffn_hidden, int64_t{p.tp} * 8, "moe.shared_ffn_hidden");
  }
  s.name = fmt::format("{} (scaled 1/{})", m.name, factor);
  return s;
}

}  // namespace dtplan::exec
