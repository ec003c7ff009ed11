// ModelSpec: the architecture of a dense or MoE decoder-only transformer, as read from a model
// YAML (docs/file-formats.md) or imported from a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtplan {

enum class FfnAct { kGelu, kSwiglu };  // gelu: 2 matrices; swiglu: gated, 3 matrices
enum class NormKind { kRmsNorm, kLayerNorm };
enum class PositionEmbedding { kRope, kLearned, kAlibi, kNone };
// How rotary frequencies are rescaled for long context: none, Llama 3.1's band-wise scaling
// (HF rope_type "llama3") or YaRN (HF "yarn", DeepSeek-V2/V3).
enum class RopeScaling { kNone, kLlama3, kYarn };
// How the router turns logits into expert weights: softmax (Mixtral, Qwen-MoE, DeepSeek-V2) or a
// per-expert sigmoid (DeepSeek-V3, HF scoring_func).
enum class RouterScore { kSoftmax, kSigmoid };

const char* to_string(FfnAct a);
const char* to_string(NormKind n);
const char* to_string(PositionEmbedding p);
const char* to_string(RopeScaling r);
const char* to_string(RouterScore r);

// Rotary position embedding (position_embedding rope). HF config.json: rope_theta, rope_scaling.
struct RopeSpec {
  double theta = 10000;  // base frequency (HF rope_theta; Megatron --rotary-base)
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1;             // scaling factor (llama3 and yarn)
  double low_freq_factor = 1;    // llama3
  double high_freq_factor = 4;   // llama3
  int64_t original_max_seq = 0;  // context the frequencies were trained at (llama3, yarn)
  double beta_fast = 32;         // yarn
  double beta_slow = 1;          // yarn
  double mscale = 1;             // yarn
  double mscale_all_dim = 0;     // yarn
  bool operator==(const RopeSpec&) const = default;
};

// The MoE router's scoring (HF DeepSeek/Qwen/Mixtral config fields in brackets).
struct RouterSpec {
  RouterScore score = RouterScore::kSoftmax;  // [scoring_func]
  // Whether the top-k weights are renormalised to sum to 1 [norm_topk_prob; Mixtral always];
  // false: softmax over all experts, the top-k weights kept as they are (DeepSeek-V2).
  bool normalize_topk = true;
  bool expert_bias = false;   // aux-loss-free balancing bias on the scores [topk_method noaux_tc]
  double topk_scaling = 1.0;  // weights multiplied by this [routed_scaling_factor]
  int groups = 0;             // group-limited routing: expert groups [n_group]; 0 or 1: none
  int group_topk = 0;         // groups each token may use [topk_group]
  bool operator==(const RouterSpec&) const = default;
};

struct MoeSpec {
  int experts = 0;                // routed experts per MoE layer
  int topk = 0;                   // routed experts per token
  int64_t expert_ffn_hidden = 0;  // FFN width of one routed expert
  int shared_experts = 0;         // always-active experts per MoE layer
  int64_t shared_ffn_hidden = 0;  // FFN width of one shared expert
  int dense_layers = 0;           // the first k layers use the dense FFN
  int layer_freq = 1;             // after those, every layer_freq-th layer is MoE
  RouterSpec router;
  bool operator==(const MoeSpec&) const = default;
};

struct MlaSpec {
  int q_lora_rank = 0;  // 0: queries are not low-rank compressed
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool operator==(const MlaSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  std::string display_name;
  std::string source;
  std::string file;  // where it was loaded from ("" when built in code)

  int layers = 0;
  int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // GQA groups; == heads for multi-head attention
  int head_dim = 0;
  int64_t ffn_hidden = 0;  // dense-layer FFN width
  FfnAct ffn_act = FfnAct::kSwiglu;
  int64_t vocab = 0;
  bool tied_embeddings = false;
  int64_t max_seq = 0;
  NormKind norm = NormKind::kRmsNorm;
  bool linear_bias = false;
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  RopeSpec rope;                 // read only when position_embedding is rope
  bool qkv_bias = false;         // biases on the Q, K, V projections only (Qwen2)
  bool qk_norm = false;          // RMSNorm over each head's queries and keys (Qwen3)
  double norm_eps = 1e-5;        // epsilon of every LayerNorm/RMSNorm
  double attention_dropout = 0;  // dropout on attention probabilities
  double hidden_dropout = 0;     // dropout after the attention and FFN blocks
  int mtp_layers = 0;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;

  bool is_moe() const { return moe.has_value(); }
  // Whether 0-based layer `i` carries routed experts.
  bool is_moe_layer(int i) const;
  int moe_layer_count() const { return moe_layers_before(layers); }
  // MoE layers among layers [0, x), in O(1).
  int moe_layers_before(int x) const;
  int dense_layer_count() const { return layers - moe_layer_count(); }
  int64_t q_width() const;   // query projection width (heads x head dim)
  int64_t kv_width() const;  // key (= value) projection width for GQA/MHA
  int ffn_matrices() const { return ffn_act == FfnAct::kSwiglu ? 3 : 2; }

  // The architecture without name/source/file, for comparing an import with the zoo.
  bool same_architecture(const ModelSpec& other) const;
};

// Parameter counts by component (whole model, not sharded).
struct ParamCounts {
  int64_t embedding = 0;       // input token embedding
  int64_t position = 0;        // learned position table
  int64_t output = 0;          // untied output projection (0 when tied)
  int64_t attention = 0;       // all layers: projections (+ MLA norms, biases)
  int64_t dense_mlp = 0;       // dense-FFN layers
  int64_t routed_experts = 0;  // all routed experts of all MoE layers
  int64_t active_routed = 0;   // top-k of them
  int64_t shared_experts = 0;
  int64_t router = 0;
  int64_t norms = 0;  // layer norms and the final norm
  int64_t mtp = 0;    // multi-token-prediction modules (not in total)

  // Per-layer figures, for sharding.
  int64_t attention_per_layer = 0;
  int64_t dense_mlp_per_layer = 0;
  int64_t experts_per_moe_layer = 0;  // routed, all experts
  int64_t shared_per_moe_layer = 0;
  int64_t router_per_moe_layer = 0;
  int64_t norms_per_layer = 0;

  int64_t total() const;   // every parameter of the main model (MTP excluded)
  int64_t active() const;  // parameters touched per token (top-k routed experts)
};

ParamCounts count_params(const ModelSpec& m);

// Bounds on a model's shape, so that parameter and FLOP counts stay exact in 64 bits: each field
// far above any published model (hidden 2^20, layers 16,384, heads 2^16, ...) and at most 10^15
// parameters in all (the largest published models hold a few 10^12). The first field out of
// bounds and why, or nullopt. Every model loader (model YAML, HF config.json, ground-truth cases)
// refuses such a model at its file.
struct BoundViolation {
  std::string field, reason;
};
std::optional<BoundViolation> model_bounds_violation(const ModelSpec& m);

// Reads and validates a model YAML. Throws InputError with file:line:col.
ModelSpec load_model_file(const std::string& path);
// Parses a YAML document already in memory (`file` names it in errors).
ModelSpec parse_model_yaml(const std::string& text, const std::string& file);

// Writes a model YAML in the documented format.
std::string model_to_yaml(const ModelSpec& m);

}  // namespace dtplan
