// One operation of the op program: what one GPU executes for one micro-batch, with the sizes
// after TP/CP/EP/SP sharding. Both evaluators (analytic and discrete-event) consume these.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/hardware.h"

namespace dtplan {

enum class OpKind : uint8_t {
  kGemm,         // dense matmul M x N x K (count independent copies: grouped/batched)
  kAttention,    // fused (flash) attention core: FLOPs and bytes
  kElementwise,  // memory-bound kernel: bytes moved
  kCollective,   // communication within one parallel dimension
};

enum class Pass : uint8_t {
  kForward,
  kBackwardInput,   // input (activation) gradients: the "B" of zero-bubble schedules
  kBackwardWeight,  // weight gradients: the "W"
};

// The passes an op runs in: both (a forward op and its mirrored backward), or one only (FP8
// quantization of a GEMM's input in the forward, of its output gradient in the backward).
enum class OpPasses : uint8_t { kBoth, kForwardOnly, kBackwardOnly };

// The parallel dimension a collective belongs to (for exposed-communication accounting).
enum class CommDim : uint8_t { kTP, kCP, kEP, kPP, kDP };
inline constexpr int kNumCommDims = 5;
const char* to_string(CommDim d);

// Where a communication group lives: how many of its ranks share a node, how many nodes.
struct GroupPlacement {
  int size = 1;            // ranks in the group
  int ranks_per_node = 1;  // of those, how many share one node (NVLink domain)
  int nodes = 1;           // nodes the group spans
  int node_gpus_busy = 1;  // GPUs of one node whose groups of this kind run at once (NIC sharing)
  // All-to-all: the share of the traffic bound for other nodes that crosses the network. 1 for a
  // plain exchange; below 1 where the dispatcher sends a token once per destination node and
  // fans it out over NVLink there (DeepEP / HybridEP: moe_node_dedup_share()).
  double remote_share = 1.0;
  bool crosses_nodes() const { return nodes > 1; }
};

struct Op {
  OpKind kind = OpKind::kElementwise;
  Pass pass = Pass::kForward;
  const char* name = "";
  // GEMM shape (per copy) and copy count.
  int64_t m = 0, n = 0, k = 0;
  int count = 1;
  int kernels = 1;  // kernels the framework launches for this op (host dispatch cost)
  // FLOPs (attention) and bytes moved (elementwise, attention, and GEMM operands).
  double flops = 0;
  double bytes = 0;
  // Collective.
  CollectiveOp collective = CollectiveOp::kAllReduce;
  CommDim dim = CommDim::kTP;
  GroupPlacement group;
  bool recompute = false;     // part of activation recomputation (executed before the backward)
  bool selective = false;     // recomputed under selective recompute (the attention core)
  bool overlappable = false;  // a collective that may hide behind independent compute
  bool has_weights = false;   // a GEMM with a weight operand (so it has a weight-gradient GEMM)
  bool grouped = false;  // a grouped GEMM (MoE experts): each of the `count` groups saturates alone
  OpPasses passes = OpPasses::kBoth;
  // A GEMM that FP8 training keeps in 16 bits: the output layer (Megatron fp8_output_proj is
  // off by default and MXFP8-only, transformer_config.py d98e8a6) and the MoE router
  // (moe_router_dtype: fp32 or the 16-bit training type). Transformer Engine quantizes only
  // its own linear layers; embeddings and norms are not GEMMs.
  bool high_precision = false;
  // Fused attention: the kernel's query length (per CP chunk) and its q/k head width.
  int64_t attn_seq = 0;
  int attn_head_dim = 0;

  double gemm_flops() const { return 2.0 * static_cast<double>(m) * n * k * count; }
};

static_assert(std::is_trivially_copyable_v<Op>);

// A fixed-capacity list of ops: building and walking it allocates nothing, and an empty list
// costs nothing to create (the storage is not initialized until an op is pushed).
template <int Capacity>
class OpList {
 public:
  OpList() {}  // user-provided: value-initialization must not zero the storage
  OpList(const OpList& o) : size_(o.size_) {
    std::memcpy(storage_, o.storage_, size_ * sizeof(Op));
  }
  OpList& operator=(const OpList& o) {
    if (this == &o) return *this;
    size_ = o.size_;
    std::memcpy(storage_, o.storage_, size_ * sizeof(Op));
    return *this;
  }
  // Throws std::length_error past Capacity: the op program outgrew its list (a bug, not input).
  void push(const Op& op) {
    if (size_ >= Capacity)
      throw std::length_error("op program: more than " + std::to_string(Capacity) +
                              " ops in one list (raise kMaxLayerOps or kMaxEdgeOps in "
                              "simulator/workload/op_program.h)");
    new (storage_ + size_++ * sizeof(Op)) Op(op);
  }
  void clear() { size_ = 0; }
  int size() const { return size_; }
  const Op* begin() const { return data(); }
  const Op* end() const { return data() + size_; }
  const Op& operator[](int i) const { return data()[i]; }
  // The last op pushed, to amend (the list must not be empty).
  Op& back() { return std::launder(reinterpret_cast<Op*>(storage_))[size_ - 1]; }
  bool full() const { return size_ >= Capacity; }

 private:
  const Op* data() const { return std::launder(reinterpret_cast<const Op*>(storage_)); }
  alignas(Op) unsigned char storage_[Capacity * sizeof(Op)];
  int size_ = 0;
};

}  // namespace dtplan
