#include "core/hf_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "core/yaml_reader.h"

namespace dtplan {

const std::vector<std::string>& hf_supported_model_types() {
  static const std::vector<std::string> types = {"llama",     "mistral",     "mixtral",
                                                 "qwen2",     "qwen3",       "qwen2_moe",
                                                 "qwen3_moe", "deepseek_v2", "deepseek_v3"};
  return types;
}

namespace {

// Fields a config may carry that the importer does not need; every other key is accepted too
// (HF configs carry many training/serving keys), so no unknown-key check here.
struct HfReader {
  YamlMap map;
  std::vector<std::string> missing;

  int64_t need_int(const char* key, int64_t min_value = 1) {
    if (!map.has(key)) {
      missing.emplace_back(key);
      return 0;
    }
    return map.get_int(key, min_value);
  }
  int64_t want_int(const char* key, int64_t fallback, int64_t min_value = 0) {
    return map.has(key) ? map.get_int(key, min_value) : fallback;
  }
};

}  // namespace

ModelSpec import_hf_config(const std::string& path, const std::string& name,
                           std::vector<std::string>* notes) {
  YAML::Node root = load_yaml_file(path);
  HfReader r{YamlMap(root, path, ""), {}};
  YamlMap& y = r.map;

  std::string model_type = y.opt_string("model_type").value_or("");
  const auto& types = hf_supported_model_types();
  const bool known = std::find(types.begin(), types.end(), model_type) != types.end();

  ModelSpec m;
  m.hidden = r.need_int("hidden_size");
  m.layers = static_cast<int>(r.need_int("num_hidden_layers"));
  m.heads = static_cast<int>(r.need_int("num_attention_heads"));
  m.vocab = r.need_int("vocab_size");
  m.max_seq = r.need_int("max_position_embeddings");
  const bool deepseek = model_type.starts_with("deepseek");
  const bool qwen_moe = model_type == "qwen2_moe" || model_type == "qwen3_moe";
  const bool mixtral = model_type == "mixtral";
  m.ffn_hidden = r.need_int("intermediate_size");

  // Expert fields, under their three spellings.
  int64_t experts = 0;
  const char* experts_key = mixtral    ? "num_local_experts"
                            : deepseek ? "n_routed_experts"
                                       : "num_experts";
  if (mixtral || deepseek || qwen_moe) experts = r.need_int(experts_key);
  int64_t topk = (experts > 0) ? r.need_int("num_experts_per_tok") : 0;
  int64_t moe_width = 0;
  if (deepseek || qwen_moe) moe_width = experts > 0 ? r.need_int("moe_intermediate_size") : 0;

  if (!known || !r.missing.empty()) {
    std::string reason;
    if (!known)
      reason = fmt::format("model_type '{}' is not a supported architecture (supported: {})",
                           model_type.empty() ? "(absent)" : model_type, fmt::join(types, ", "));
    if (!r.missing.empty())
      reason += fmt::format("{}missing required field{}: {}", reason.empty() ? "" : "; ",
                            r.missing.size() > 1 ? "s" : "", fmt::join(r.missing, ", "));
    YAML::Node where = known ? root : y.child("model_type");
    throw InputError(location_of(where.IsDefined() ? where : root, path), "", reason);
  }

  m.kv_heads = static_cast<int>(r.want_int("num_key_value_heads", m.heads, 1));
  if (m.heads % m.kv_heads != 0)
    y.fail("num_key_value_heads",
           fmt::format("must divide num_attention_heads ({}), got {}", m.heads, m.kv_heads));
  m.ffn_act = FfnAct::kSwiglu;  // every supported family uses a gated SiLU MLP
  if (auto act = y.opt_string("hidden_act"); act && *act != "silu" && *act != "swiglu")
    y.fail("hidden_act", fmt::format("'{}' is not a gated SiLU activation; the supported "
                                     "families all use silu",
                                     *act));
  // A quantized checkpoint (DeepSeek-V3's: quant_method fp8, e4m3, 128x128 weight blocks) is a
  // storage format: the architecture and parameter count are the same, and the training
  // precision is the workload's (--precision), which this does not set.
  if (auto q = y.opt_map("quantization_config"); q && notes)
    notes->push_back(fmt::format(
        "{}: quantization_config (quant_method '{}') describes how the checkpoint's weights are "
        "stored; the model YAML does not carry it, and training is planned in --precision "
        "(bf16 unless given; fp8 plans FP8 training with 16-bit master weights)",
        path, q->opt_string("quant_method").value_or("?")));
  m.tied_embeddings = y.opt_bool("tie_word_embeddings").value_or(false);
  m.norm = NormKind::kRmsNorm;
  m.linear_bias = false;
  m.position_embedding = PositionEmbedding::kRope;
  m.norm_eps = y.has("rms_norm_eps") ? y.get_double("rms_norm_eps", 0) : m.norm_eps;
  m.attention_dropout = y.has("attention_dropout") ? y.get_double("attention_dropout", 0, true) : 0;
  if (m.attention_dropout >= 1)
    y.fail("attention_dropout",
           fmt::format("is a probability, must be < 1, got {}", m.attention_dropout));
  // Qwen2 (and Qwen2-MoE) give q_proj, k_proj and v_proj a bias and o_proj none, with no config
  // field for it (transformers models/qwen2/modeling_qwen2.py, Qwen2Attention); Qwen3 drops the
  // bias and adds q_norm / k_norm over each head (models/qwen3/modeling_qwen3.py, Qwen3Attention).
  m.qkv_bias = model_type == "qwen2" || model_type == "qwen2_moe";
  m.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe";
  // attention_bias (llama, mistral, qwen3, deepseek) puts a bias on o_proj as well, and mlp_bias
  // on the FFN: neither is a dtplan architecture.
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (y.opt_bool(key).value_or(false))
      y.fail(key,
             "biases on the output or FFN projections are not modelled (dtplan models "
             "biases on every linear layer, or on Q/K/V only as Qwen2 has)");
  // Sliding-window attention (Mistral 7B v0.1: sliding_window 4096) is not modelled; Qwen2/3
  // carry a window with use_sliding_window false, which is full attention.
  if (y.has("sliding_window") && y.opt_bool("use_sliding_window").value_or(true))
    y.fail("sliding_window",
           "sliding-window attention is not modelled (full attention is); "
           "set it to null for a model that attends to the whole context");
  m.rope.theta = y.has("rope_theta") ? y.get_double("rope_theta", 0) : m.rope.theta;
  if (auto rs = y.opt_map("rope_scaling")) {
    // transformers modeling_rope_utils.py: "rope_type", or the older "type".
    std::string type = rs->opt_string("rope_type").value_or("");
    if (auto t = rs->opt_string("type"); type.empty() && t) type = *t;
    RopeSpec& e = m.rope;
    if (type == "default") {
      // transformers' name for unscaled rotary embeddings (modeling_rope_utils.py).
    } else if (type == "llama3") {
      e.scaling = RopeScaling::kLlama3;
      e.low_freq_factor = rs->get_double("low_freq_factor", 0);
      e.high_freq_factor = rs->get_double("high_freq_factor", 0);
    } else if (type == "yarn") {
      e.scaling = RopeScaling::kYarn;
      e.beta_fast = rs->has("beta_fast") ? rs->get_double("beta_fast", 0) : e.beta_fast;
      e.beta_slow = rs->has("beta_slow") ? rs->get_double("beta_slow", 0) : e.beta_slow;
      e.mscale = rs->has("mscale") ? rs->get_double("mscale", 0, true) : e.mscale;
      e.mscale_all_dim =
          rs->has("mscale_all_dim") ? rs->get_double("mscale_all_dim", 0, true) : e.mscale_all_dim;
    } else {
      y.fail("rope_scaling", fmt::format("rope type '{}' is not modelled (llama3 and yarn are)",
                                         type.empty() ? "(absent)" : type));
    }
    if (e.scaling != RopeScaling::kNone) {
      e.factor = rs->get_double("factor", 0);
      e.original_max_seq = rs->get_int("original_max_position_embeddings");
    }
  }

  if (deepseek && y.has("kv_lora_rank")) {
    MlaSpec a;
    a.q_lora_rank = static_cast<int>(y.has("q_lora_rank") ? y.get_int("q_lora_rank", 0) : 0);
    a.kv_lora_rank = static_cast<int>(r.need_int("kv_lora_rank"));
    a.qk_nope_head_dim = static_cast<int>(r.need_int("qk_nope_head_dim"));
    a.qk_rope_head_dim = static_cast<int>(r.need_int("qk_rope_head_dim"));
    a.v_head_dim = static_cast<int>(r.need_int("v_head_dim"));
    if (!r.missing.empty())
      throw InputError(location_of(root, path), "",
                       fmt::format("MLA config is missing: {}", fmt::join(r.missing, ", ")));
    m.mla = a;
  }
  if (y.has("head_dim"))
    m.head_dim = static_cast<int>(y.get_int("head_dim"));
  else if (m.mla)
    m.head_dim = m.mla->v_head_dim;
  else if (m.hidden % m.heads == 0)
    m.head_dim = static_cast<int>(m.hidden / m.heads);
  else
    y.fail("num_attention_heads", fmt::format("hidden_size ({}) is not divisible by it ({}) and "
                                              "no head_dim is given",
                                              m.hidden, m.heads));

  if (experts > 0) {
    MoeSpec e;
    e.experts = static_cast<int>(experts);
    e.topk = static_cast<int>(topk);
    if (e.topk > e.experts)
      y.fail("num_experts_per_tok", fmt::format("must be <= {} ({})", experts_key, experts));
    e.expert_ffn_hidden = mixtral ? m.ffn_hidden : moe_width;
    if (deepseek) {
      e.shared_experts = static_cast<int>(r.want_int("n_shared_experts", 0));
      e.shared_ffn_hidden = e.shared_experts > 0 ? moe_width : 0;
      e.dense_layers = static_cast<int>(r.want_int("first_k_dense_replace", 0));
      int64_t freq = r.want_int("moe_layer_freq", 1, 1);
      if (freq != 1)
        y.fail("moe_layer_freq",
               "only moe_layer_freq 1 (every layer after the dense ones) is supported");
      e.layer_freq = 1;
      m.mtp_layers = static_cast<int>(r.want_int("num_nextn_predict_layers", 0));
      // DeepSeek's MoEGate (modeling_deepseek.py of the HF model repos): scoring_func softmax
      // (V2) or sigmoid (V3); topk_method greedy, group_limited_greedy or noaux_tc (V3: the
      // e_score_correction_bias); norm_topk_prob; routed_scaling_factor; n_group / topk_group.
      RouterSpec& g = e.router;
      if (auto f = y.opt_enum("scoring_func", {"softmax", "sigmoid"}))
        g.score = *f == "sigmoid" ? RouterScore::kSigmoid : RouterScore::kSoftmax;
      if (auto t = y.opt_enum("topk_method", {"greedy", "group_limited_greedy", "noaux_tc"})) {
        g.expert_bias = *t == "noaux_tc";
        if (*t != "greedy") {
          g.groups = static_cast<int>(r.want_int("n_group", 0));
          g.group_topk = static_cast<int>(r.want_int("topk_group", 0));
          // The model format's own rules (model_spec.cpp, moe.router), at the config's keys.
          if (g.groups > 1 && e.experts % g.groups != 0)
            y.fail("n_group",
                   fmt::format("must divide the experts ({}), got {}", e.experts, g.groups));
          if (g.groups > 1 && (g.group_topk < 1 || g.group_topk > g.groups))
            y.fail("topk_group",
                   fmt::format("must be in [1, n_group ({})], got {}", g.groups, g.group_topk));
        }
      }
      g.normalize_topk = y.opt_bool("norm_topk_prob").value_or(false);
      if (y.has("routed_scaling_factor")) g.topk_scaling = y.get_double("routed_scaling_factor", 0);
    } else if (qwen_moe) {
      // Qwen2-MoE / Qwen3-MoE: softmax over all experts, top-k renormalised when norm_topk_prob.
      e.router.normalize_topk = y.opt_bool("norm_topk_prob").value_or(false);
      int64_t shared_width = r.want_int("shared_expert_intermediate_size", 0);
      e.shared_experts = shared_width > 0 ? 1 : 0;
      e.shared_ffn_hidden = shared_width;
      e.layer_freq = static_cast<int>(r.want_int("decoder_sparse_step", 1, 1));
      YAML::Node mlp_only = y.child("mlp_only_layers");
      if (mlp_only.IsDefined() && mlp_only.IsSequence()) {
        // Representable only as a dense prefix 0..k-1.
        int expect = 0;
        for (const auto& it : mlp_only) {
          if (scalar_int(it, path, "mlp_only_layers") != expect)
            throw InputError(location_of(it, path), "mlp_only_layers",
                             "only a leading run of dense layers (0, 1, ..., k-1) is supported");
          ++expect;
        }
        e.dense_layers = expect;
        if (expect > 0 && e.layer_freq != 1)
          y.fail("decoder_sparse_step",
                 "dense leading layers with decoder_sparse_step > 1 are not supported");
      }
    }
    if (e.dense_layers >= m.layers)
      y.fail(deepseek ? "first_k_dense_replace" : "mlp_only_layers",
             fmt::format("leaves no MoE layer among {} layers", m.layers));
    m.moe = e;
  }

  // Name: the override, else the folder of a config.json, else the file stem.
  std::filesystem::path p(path);
  std::string stem = p.stem().string();
  if (stem == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
    stem = p.parent_path().filename().string();
  m.name = name.empty() ? stem : name;
  m.display_name = y.opt_string("_name_or_path").value_or(m.name);
  m.source = fmt::format(
      "imported by dtplan import-hf from {} (Hugging Face config.json, "
      "model_type {})",
      p.filename().string(), model_type);
  m.file = path;
  if (const auto v = model_bounds_violation(m))
    y.fail_here(v->field.empty() ? v->reason : v->field + " " + v->reason);
  // Whatever the rules above miss, the model format's loader does not: the YAML import-hf would
  // write must read back (a hostile-input trial found configs whose YAML `check` refused).
  try {
    parse_model_yaml(model_to_yaml(m), path + " (as imported)");
  } catch (const InputError& e) {
    y.fail_here(fmt::format("the imported model does not pass dtplan's model check: {}", e.what()));
  }
  return m;
}

}  // namespace dtplan
