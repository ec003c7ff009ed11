#include "core/model_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "core/yaml_reader.h"

namespace dtplan {

const char* to_string(FfnAct a) { return a == FfnAct::kGelu ? "gelu" : "swiglu"; }
const char* to_string(NormKind n) { return n == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* to_string(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearned:
      return "learned";
    case PositionEmbedding::kAlibi:
      return "alibi";
    case PositionEmbedding::kNone:
      return "none";
    case PositionEmbedding::kRope:
      break;
  }
  return "rope";
}

const char* to_string(RopeScaling r) {
  switch (r) {
    case RopeScaling::kLlama3:
      return "llama3";
    case RopeScaling::kYarn:
      return "yarn";
    case RopeScaling::kNone:
      break;
  }
  return "none";
}

const char* to_string(RouterScore r) { return r == RouterScore::kSigmoid ? "sigmoid" : "softmax"; }

bool ModelSpec::is_moe_layer(int i) const {
  if (!moe || i < moe->dense_layers || i >= layers) return false;
  return (i - moe->dense_layers + 1) % moe->layer_freq == 0;
}

int ModelSpec::moe_layers_before(int x) const {
  if (!moe) return 0;
  x = std::min(x, layers);
  if (x <= moe->dense_layers) return 0;
  // Layer i >= dense_layers is MoE when j = i - dense_layers + 1 is a multiple of layer_freq.
  return (x - moe->dense_layers) / moe->layer_freq;
}

int64_t ModelSpec::q_width() const {
  if (mla) return int64_t{heads} * (mla->qk_nope_head_dim + mla->qk_rope_head_dim);
  return int64_t{heads} * head_dim;
}

int64_t ModelSpec::kv_width() const {
  if (mla) return int64_t{heads} * mla->v_head_dim;
  return int64_t{kv_heads} * head_dim;
}

bool ModelSpec::same_architecture(const ModelSpec& o) const {
  return layers == o.layers && hidden == o.hidden && heads == o.heads && kv_heads == o.kv_heads &&
         head_dim == o.head_dim && ffn_hidden == o.ffn_hidden && ffn_act == o.ffn_act &&
         vocab == o.vocab && tied_embeddings == o.tied_embeddings && max_seq == o.max_seq &&
         norm == o.norm && linear_bias == o.linear_bias &&
         position_embedding == o.position_embedding &&
         (position_embedding != PositionEmbedding::kRope || rope == o.rope) &&
         qkv_bias == o.qkv_bias && qk_norm == o.qk_norm && norm_eps == o.norm_eps &&
         attention_dropout == o.attention_dropout && hidden_dropout == o.hidden_dropout &&
         mtp_layers == o.mtp_layers && moe == o.moe && mla == o.mla;
}

int64_t ParamCounts::total() const {
  return embedding + position + output + attention + dense_mlp + routed_experts + shared_experts +
         router + norms;
}

int64_t ParamCounts::active() const { return total() - routed_experts + active_routed; }

// Parameter counting. Shapes follow the Megatron-LM / Hugging Face module layouts:
// attention Q, K, V and output projections (MLA: the DeepSeek-V2 low-rank Q and joint KV
// compression with their RMSNorms), an FFN of 2 (GELU) or 3 (SwiGLU) matrices per expert,
// a router of hidden x experts, one norm before attention and one before the FFN.
ParamCounts count_params(const ModelSpec& m) {
  ParamCounts c;
  const int64_t h = m.hidden;
  const int64_t norm_params = m.norm == NormKind::kLayerNorm ? 2 * h : h;
  const int64_t mats = m.ffn_matrices();
  auto ffn = [&](int64_t width) {
    int64_t p = mats * h * width;
    if (m.linear_bias) p += (mats - 1) * width + h;
    return p;
  };

  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const int64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
    int64_t q = a.q_lora_rank > 0
                    ? h * a.q_lora_rank + a.q_lora_rank + int64_t{a.q_lora_rank} * m.heads * qk_head
                    : h * m.heads * qk_head;
    int64_t kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                 int64_t{a.kv_lora_rank} * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    int64_t o = int64_t{m.heads} * a.v_head_dim * h;
    c.attention_per_layer = q + kv + o;
  } else {
    const int64_t qw = m.q_width(), kw = m.kv_width();
    c.attention_per_layer = h * (qw + 2 * kw) + qw * h;
    if (m.linear_bias)
      c.attention_per_layer += qw + 2 * kw + h;
    else if (m.qkv_bias)
      c.attention_per_layer += qw + 2 * kw;
  }
  // Qwen3's q_norm and k_norm: one RMSNorm weight of head_dim each, shared by all heads.
  if (m.qk_norm) c.attention_per_layer += 2 * int64_t{m.head_dim};
  c.norms_per_layer = 2 * norm_params;
  c.dense_mlp_per_layer = ffn(m.ffn_hidden);

  const int moe_layers = m.moe_layer_count();
  const int dense_layers = m.layers - moe_layers;
  c.embedding = m.vocab * h;
  c.position = m.position_embedding == PositionEmbedding::kLearned ? m.max_seq * h : 0;
  c.output = m.tied_embeddings ? 0 : m.vocab * h;
  c.attention = c.attention_per_layer * m.layers;
  c.norms = c.norms_per_layer * m.layers + norm_params;
  c.dense_mlp = c.dense_mlp_per_layer * dense_layers;
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    const int64_t one_expert = ffn(e.expert_ffn_hidden);
    c.experts_per_moe_layer = one_expert * e.experts;
    c.shared_per_moe_layer = ffn(e.shared_ffn_hidden) * e.shared_experts;
    // The router's weight, and with aux-loss-free balancing its per-expert score bias (an
    // nn.Parameter in DeepSeek-V3's modeling_deepseek.py, e_score_correction_bias, stored in the
    // checkpoint).
    c.router_per_moe_layer = h * e.experts + (e.router.expert_bias ? e.experts : 0);
    c.routed_experts = c.experts_per_moe_layer * moe_layers;
    c.active_routed = one_expert * e.topk * moe_layers;
    c.shared_experts = c.shared_per_moe_layer * moe_layers;
    c.router = c.router_per_moe_layer * moe_layers;
  }
  if (m.mtp_layers > 0) {
    // DeepSeek-V3 MTP module: two norms, a 2h -> h projection, one transformer block (MoE when
    // the model is MoE) and a final norm; embedding and output head are shared with the model.
    int64_t block =
        c.attention_per_layer + c.norms_per_layer +
        (m.moe ? c.experts_per_moe_layer + c.shared_per_moe_layer + c.router_per_moe_layer
               : c.dense_mlp_per_layer);
    c.mtp = m.mtp_layers * (3 * norm_params + 2 * h * h + block);
  }
  return c;
}

std::optional<BoundViolation> model_bounds_violation(const ModelSpec& m) {
  struct Bound {
    const char* field;
    double value, max;
  };
  const double experts = m.moe ? m.moe->experts : 0;
  const Bound bounds[] = {
      {"layers", static_cast<double>(m.layers), 16384},
      {"hidden", static_cast<double>(m.hidden), 1 << 20},
      {"heads", static_cast<double>(m.heads), 1 << 16},
      {"kv_heads", static_cast<double>(m.kv_heads), 1 << 16},
      {"head_dim", static_cast<double>(m.head_dim), 1 << 16},
      {"ffn_hidden", static_cast<double>(m.ffn_hidden), 1 << 24},
      {"vocab", static_cast<double>(m.vocab), 1 << 24},
      {"max_seq", static_cast<double>(m.max_seq), 1 << 30},
      {"mtp_layers", static_cast<double>(m.mtp_layers), 64},
      {"moe.experts", experts, 1 << 16},
      {"moe.expert_ffn_hidden", m.moe ? static_cast<double>(m.moe->expert_ffn_hidden) : 0, 1 << 24},
      {"moe.shared_experts", m.moe ? static_cast<double>(m.moe->shared_experts) : 0, 1024},
      {"moe.shared_ffn_hidden", m.moe ? static_cast<double>(m.moe->shared_ffn_hidden) : 0, 1 << 24},
      {"moe.layer_freq", m.moe ? static_cast<double>(m.moe->layer_freq) : 0, 16384},
  };
  for (const Bound& b : bounds)
    if (b.value > b.max)
      return BoundViolation{b.field, fmt::format("must be <= {:.0f}, got {:.0f}", b.max, b.value)};
  // Parameters, in floating point (every product below fits a double's range): attention,
  // MLP or experts per layer, embedding and output.
  const double h = static_cast<double>(m.hidden), hd = m.head_dim;
  const double attention = h * hd * (2.0 * m.heads + 2.0 * m.kv_heads);
  double mlp = 3.0 * h * static_cast<double>(m.ffn_hidden);
  if (m.moe)
    mlp =
        std::max(mlp, 3.0 * h *
                          (experts * static_cast<double>(m.moe->expert_ffn_hidden) +
                           m.moe->shared_experts * static_cast<double>(m.moe->shared_ffn_hidden)));
  const double total =
      m.layers * (attention + mlp) * (1.0 + m.mtp_layers) + 2.0 * h * static_cast<double>(m.vocab);
  if (total > 1e15)
    return BoundViolation{
        "", fmt::format("about {:.3g} parameters: dtplan plans models of up to 1e15", total)};
  return std::nullopt;
}

static ModelSpec model_from_yaml(const YAML::Node& root, const std::string& file) {
  YamlMap y(root, file, "");
  ModelSpec m;
  m.file = file;
  m.name = y.get_string("name");
  m.display_name = y.opt_string("display_name").value_or(m.name);
  m.source = y.get_string("source");
  m.layers = static_cast<int>(y.get_int("layers"));
  m.hidden = y.get_int("hidden");
  m.heads = static_cast<int>(y.get_int("heads"));
  m.kv_heads = static_cast<int>(y.opt_int("kv_heads").value_or(m.heads));
  if (m.heads % m.kv_heads != 0)
    y.fail("kv_heads", fmt::format("must divide heads ({}), got {}", m.heads, m.kv_heads));
  if (auto hd = y.opt_int("head_dim")) {
    m.head_dim = static_cast<int>(*hd);
  } else {
    if (m.hidden % m.heads != 0)
      y.fail("heads", fmt::format("hidden ({}) is not divisible by heads ({}); give head_dim",
                                  m.hidden, m.heads));
    m.head_dim = static_cast<int>(m.hidden / m.heads);
  }
  m.ffn_hidden = y.get_int("ffn_hidden");
  m.ffn_act = y.get_enum("ffn_act", {"gelu", "swiglu"}) == "gelu" ? FfnAct::kGelu : FfnAct::kSwiglu;
  m.vocab = y.get_int("vocab");
  m.tied_embeddings = y.get_bool("tied_embeddings");
  m.max_seq = y.get_int("max_seq");
  if (auto n = y.opt_enum("norm", {"rmsnorm", "layernorm"}))
    m.norm = *n == "layernorm" ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.linear_bias = y.opt_bool("linear_bias").value_or(false);
  if (auto p = y.opt_enum("position_embedding", {"rope", "learned", "alibi", "none"})) {
    m.position_embedding = *p == "learned" ? PositionEmbedding::kLearned
                           : *p == "alibi" ? PositionEmbedding::kAlibi
                           : *p == "none"  ? PositionEmbedding::kNone
                                           : PositionEmbedding::kRope;
  }
  if (auto r = y.opt_map("rope")) {
    if (m.position_embedding != PositionEmbedding::kRope)
      y.fail("rope", fmt::format("is for rotary embeddings; position_embedding is {}",
                                 to_string(m.position_embedding)));
    RopeSpec& e = m.rope;
    e.theta = r->opt_double("theta", 0).value_or(e.theta);
    if (auto sc = r->opt_enum("scaling", {"none", "llama3", "yarn"}))
      e.scaling = *sc == "llama3" ? RopeScaling::kLlama3
                  : *sc == "yarn" ? RopeScaling::kYarn
                                  : RopeScaling::kNone;
    if (e.scaling != RopeScaling::kNone) {
      e.factor = r->get_double("factor", 0);
      e.original_max_seq = r->get_int("original_max_seq");
    }
    if (e.scaling == RopeScaling::kLlama3) {
      e.low_freq_factor = r->opt_double("low_freq_factor", 0).value_or(e.low_freq_factor);
      e.high_freq_factor = r->opt_double("high_freq_factor", 0).value_or(e.high_freq_factor);
      if (e.high_freq_factor <= e.low_freq_factor)
        r->fail("high_freq_factor",
                fmt::format("must exceed low_freq_factor ({})", e.low_freq_factor));
    }
    if (e.scaling == RopeScaling::kYarn) {
      e.beta_fast = r->opt_double("beta_fast", 0).value_or(e.beta_fast);
      e.beta_slow = r->opt_double("beta_slow", 0).value_or(e.beta_slow);
      e.mscale = r->opt_double("mscale", 0, true).value_or(e.mscale);
      e.mscale_all_dim = r->opt_double("mscale_all_dim", 0, true).value_or(e.mscale_all_dim);
    }
    r->finish();
  }
  m.qkv_bias = y.opt_bool("qkv_bias").value_or(false);
  if (m.qkv_bias && m.linear_bias)
    y.fail("qkv_bias", "is implied by linear_bias (every projection has a bias); drop one");
  if (m.qkv_bias && m.mla) y.fail("qkv_bias", "is not defined for multi-latent attention");
  m.qk_norm = y.opt_bool("qk_norm").value_or(false);
  m.norm_eps = y.opt_double("norm_eps", 0).value_or(m.norm_eps);
  if (m.norm_eps >= 1) y.fail("norm_eps", fmt::format("must be < 1, got {}", m.norm_eps));
  for (const char* key : {"attention_dropout", "hidden_dropout"}) {
    const double v = y.opt_double(key, 0, true).value_or(0);
    if (v >= 1) y.fail(key, fmt::format("is a probability, must be < 1, got {}", v));
    (std::string_view(key) == "attention_dropout" ? m.attention_dropout : m.hidden_dropout) = v;
  }
  m.mtp_layers = static_cast<int>(y.opt_int("mtp_layers", 0).value_or(0));

  if (auto mo = y.opt_map("moe")) {
    MoeSpec e;
    e.experts = static_cast<int>(mo->get_int("experts"));
    e.topk = static_cast<int>(mo->get_int("topk"));
    if (e.topk > e.experts)
      mo->fail("topk", fmt::format("must be <= experts ({}), got {}", e.experts, e.topk));
    e.expert_ffn_hidden = mo->opt_int("expert_ffn_hidden").value_or(m.ffn_hidden);
    e.shared_experts = static_cast<int>(mo->opt_int("shared_experts", 0).value_or(0));
    e.shared_ffn_hidden = mo->opt_int("shared_ffn_hidden", 0).value_or(0);
    if (e.shared_experts > 0 && e.shared_ffn_hidden == 0) e.shared_ffn_hidden = e.expert_ffn_hidden;
    if (e.shared_experts == 0) e.shared_ffn_hidden = 0;
    e.dense_layers = static_cast<int>(mo->opt_int("dense_layers", 0).value_or(0));
    if (e.dense_layers >= m.layers)
      mo->fail("dense_layers",
               fmt::format("must be < layers ({}), got {}", m.layers, e.dense_layers));
    e.layer_freq = static_cast<int>(mo->opt_int("layer_freq").value_or(1));
    if (auto ro = mo->opt_map("router")) {
      RouterSpec& r = e.router;
      if (auto sc = ro->opt_enum("score", {"softmax", "sigmoid"}))
        r.score = *sc == "sigmoid" ? RouterScore::kSigmoid : RouterScore::kSoftmax;
      r.normalize_topk = ro->opt_bool("normalize_topk").value_or(r.normalize_topk);
      r.expert_bias = ro->opt_bool("expert_bias").value_or(r.expert_bias);
      r.topk_scaling = ro->opt_double("topk_scaling", 0).value_or(r.topk_scaling);
      r.groups = static_cast<int>(ro->opt_int("groups", 0, 1 << 16).value_or(0));
      r.group_topk = static_cast<int>(ro->opt_int("group_topk", 0, 1 << 16).value_or(0));
      if (r.groups > 1 && e.experts % r.groups != 0)
        ro->fail("groups", fmt::format("must divide experts ({}), got {}", e.experts, r.groups));
      if (r.groups > 1 && (r.group_topk < 1 || r.group_topk > r.groups))
        ro->fail("group_topk",
                 fmt::format("must be in [1, groups ({})], got {}", r.groups, r.group_topk));
      ro->finish();
    }
    mo->finish();
    m.moe = e;
  }
  if (auto ml = y.opt_map("mla")) {
    MlaSpec a;
    a.q_lora_rank = static_cast<int>(ml->opt_int("q_lora_rank", 0).value_or(0));
    a.kv_lora_rank = static_cast<int>(ml->get_int("kv_lora_rank"));
    a.qk_nope_head_dim = static_cast<int>(ml->get_int("qk_nope_head_dim"));
    a.qk_rope_head_dim = static_cast<int>(ml->get_int("qk_rope_head_dim"));
    a.v_head_dim = static_cast<int>(ml->get_int("v_head_dim"));
    ml->finish();
    m.mla = a;
  }
  y.finish();
  if (const auto v = model_bounds_violation(m)) {
    const std::string key = v->field.starts_with("moe.") ? v->field.substr(4) : v->field;
    if (v->field.starts_with("moe.")) y.get_map("moe").fail(key, v->reason);
    if (!v->field.empty() && y.has(key)) y.fail(key, v->reason);
    y.fail_here(v->field.empty() ? v->reason : v->field + " " + v->reason);
  }
  return m;
}

ModelSpec load_model_file(const std::string& path) {
  return model_from_yaml(load_yaml_file(path), path);
}

ModelSpec parse_model_yaml(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError({file, e.mark.line + 1, e.mark.column + 1}, "",
                     fmt::format("syntax error: {}", e.msg));
  }
  if (!root.IsDefined() || root.IsNull()) throw InputError({file, 1, 1}, "", "document is empty");
  return model_from_yaml(root, file);
}

static std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// Shortest text that reads back as the same double.
static std::string num(double v) { return fmt::format("{}", v); }

std::string model_to_yaml(const ModelSpec& m) {
  std::ostringstream o;
  o << "name: " << quoted(m.name) << "\n";
  if (!m.display_name.empty() && m.display_name != m.name)
    o << "display_name: " << quoted(m.display_name) << "\n";
  o << "source: " << quoted(m.source) << "\n";
  o << "layers: " << m.layers << "\n";
  o << "hidden: " << m.hidden << "\n";
  o << "heads: " << m.heads << "\n";
  o << "kv_heads: " << m.kv_heads << "\n";
  o << "head_dim: " << m.head_dim << "\n";
  o << "ffn_hidden: " << m.ffn_hidden << "\n";
  o << "ffn_act: " << to_string(m.ffn_act) << "\n";
  o << "vocab: " << m.vocab << "\n";
  o << "tied_embeddings: " << (m.tied_embeddings ? "true" : "false") << "\n";
  o << "max_seq: " << m.max_seq << "\n";
  o << "norm: " << to_string(m.norm) << "\n";
  o << "linear_bias: " << (m.linear_bias ? "true" : "false") << "\n";
  o << "position_embedding: " << to_string(m.position_embedding) << "\n";
  if (m.position_embedding == PositionEmbedding::kRope) {
    const RopeSpec& r = m.rope;
    o << "rope:\n  theta: " << num(r.theta) << "\n";
    if (r.scaling != RopeScaling::kNone)
      o << "  scaling: " << to_string(r.scaling) << "\n  factor: " << num(r.factor)
        << "\n  original_max_seq: " << r.original_max_seq << "\n";
    if (r.scaling == RopeScaling::kLlama3)
      o << "  low_freq_factor: " << num(r.low_freq_factor)
        << "\n  high_freq_factor: " << num(r.high_freq_factor) << "\n";
    if (r.scaling == RopeScaling::kYarn)
      o << "  beta_fast: " << num(r.beta_fast) << "\n  beta_slow: " << num(r.beta_slow)
        << "\n  mscale: " << num(r.mscale) << "\n  mscale_all_dim: " << num(r.mscale_all_dim)
        << "\n";
  }
  if (m.qkv_bias) o << "qkv_bias: true\n";
  if (m.qk_norm) o << "qk_norm: true\n";
  o << "norm_eps: " << num(m.norm_eps) << "\n";
  o << "attention_dropout: " << num(m.attention_dropout) << "\n";
  o << "hidden_dropout: " << num(m.hidden_dropout) << "\n";
  if (m.mtp_layers > 0) o << "mtp_layers: " << m.mtp_layers << "\n";
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    o << "moe:\n  experts: " << e.experts << "\n  topk: " << e.topk
      << "\n  expert_ffn_hidden: " << e.expert_ffn_hidden
      << "\n  shared_experts: " << e.shared_experts << "\n";
    if (e.shared_experts > 0) o << "  shared_ffn_hidden: " << e.shared_ffn_hidden << "\n";
    o << "  dense_layers: " << e.dense_layers << "\n  layer_freq: " << e.layer_freq << "\n";
    const RouterSpec& r = e.router;
    o << "  router:\n    score: " << to_string(r.score)
      << "\n    normalize_topk: " << (r.normalize_topk ? "true" : "false")
      << "\n    expert_bias: " << (r.expert_bias ? "true" : "false")
      << "\n    topk_scaling: " << num(r.topk_scaling) << "\n";
    if (r.groups > 1)
      o << "    groups: " << r.groups << "\n    group_topk: " << r.group_topk << "\n";
  }
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    o << "mla:\n  q_lora_rank: " << a.q_lora_rank << "\n  kv_lora_rank: " << a.kv_lora_rank
      << "\n  qk_nope_head_dim: " << a.qk_nope_head_dim
      << "\n  qk_rope_head_dim: " << a.qk_rope_head_dim << "\n  v_head_dim: " << a.v_head_dim
      << "\n";
  }
  return o.str();
}

}  // namespace dtplan
