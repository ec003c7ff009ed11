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

ModelSpec import_hf_config(const std::string& path, const std::string& name) {
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
  m.tied_embeddings = y.opt_bool("tie_word_embeddings").value_or(false);
  m.norm = NormKind::kRmsNorm;
  m.linear_bias = false;
  m.position_embedding = PositionEmbedding::kRope;

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
    } else if (qwen_moe) {
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
  return m;
}

}  // namespace dtplan
