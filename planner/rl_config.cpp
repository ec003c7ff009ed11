// The RL configuration YAML (docs/rl.md, "Configuration"): strict, every error at file:line:col.
#include <fmt/format.h>

#include <cmath>
#include <fstream>

#include "core/catalog.h"
#include "core/input_file.h"
#include "core/yaml_reader.h"
#include "planner/rl.h"

namespace dtplan::rl {

namespace {

// The keys a file's top level may hold (also what a what-if entry may override).
const std::vector<std::string>& top_keys() {
  static const std::vector<std::string> k = {
      "title",         "policy",          "critic",  "reward",       "reference",    "old_logprob",
      "algorithm",     "cluster",         "gpus",    "architecture", "rollout_gpus", "batch",
      "prompt_length", "response_length", "rollout", "training",     "sync",         "whatif"};
  return k;
}

constexpr double kMaxResponseTokens = 1 << 22;  // 4M tokens: far beyond any context window

ModelSpec model_at(YamlMap& y, const char* key) {
  const std::string name = relative_to(y.get_string(key), y.file());
  try {
    return load_model(name);
  } catch (const InputError& e) {
    throw InputError(location_of(y.node()[key], y.file()), y.field(key), e.what());
  }
}

LengthDistribution read_length(YamlMap d, bool response) {
  LengthDistribution L;
  const std::string kind =
      d.opt_enum("distribution", {"fixed", "lognormal", "empirical"}).value_or("fixed");
  constexpr double kMaxTokens = kMaxResponseTokens;
  auto tokens = [&](const char* key) {
    const double v = d.get_double(key, 1, true);
    if (v > kMaxTokens) d.fail(key, fmt::format("{} tokens is beyond 4M", v));
    return v;
  };
  if (kind == "fixed") {
    L.kind = LengthDistribution::Kind::kFixed;
    L.mean_tokens = tokens("mean");
    L.max_tokens = L.mean_tokens;
  } else if (kind == "lognormal") {
    L.kind = LengthDistribution::Kind::kLognormal;
    L.mean_tokens = tokens("mean");
    L.sigma = d.get_double("sigma", 0);
    if (L.sigma > 4)
      d.fail("sigma", fmt::format("{} is beyond 4 (a spread of e^4 = 55x)", L.sigma));
    L.max_tokens = tokens("max");
    if (L.max_tokens <= L.mean_tokens)
      d.fail("max", fmt::format("must exceed the mean ({} tokens)", L.mean_tokens));
    L.prepare();
  } else {
    L.kind = LengthDistribution::Kind::kEmpirical;
    // Points inline (`cdf: [[tokens, p], ...]`) or in a CSV file (`cdf_file`: tokens,p lines).
    const bool inline_cdf = d.has("cdf");
    const bool from_file = d.has("cdf_file");
    if (inline_cdf == from_file) d.fail_here("an empirical distribution needs cdf or cdf_file");
    std::vector<std::pair<double, double>> pts;
    std::vector<SourceLocation> where;
    const std::string cdf_field = d.field(inline_cdf ? "cdf" : "cdf_file");
    if (inline_cdf) {
      const YAML::Node n = d.child("cdf");
      if (!n.IsSequence() || n.size() == 0)
        d.fail("cdf", "expected a list of [tokens, probability]");
      for (size_t i = 0; i < n.size(); ++i) {
        const YAML::Node p = n[i];
        const std::string f = fmt::format("{}[{}]", d.field("cdf"), i);
        if (!p.IsSequence() || p.size() != 2)
          throw InputError(location_of(p, d.file()), f, "expected [tokens, probability]");
        pts.emplace_back(scalar_double(p[0], d.file(), f), scalar_double(p[1], d.file(), f));
        where.push_back(location_of(p, d.file()));
      }
    } else {
      const std::string path = relative_to(d.get_string("cdf_file"), d.file());
      const std::string text = read_input_file(path, d.field("cdf_file"));
      std::istringstream in(text);
      std::string line;
      int lineno = 0;
      while (std::getline(in, line)) {
        ++lineno;
        if (line.empty() || line[0] == '#') continue;
        const size_t comma = line.find(',');
        char* end = nullptr;
        const std::string a = line.substr(0, comma);
        const double t = std::strtod(a.c_str(), &end);
        const bool ok_a = end != a.c_str() && *end == '\0';
        double p = 0;
        bool ok_b = false;
        if (comma != std::string::npos) {
          const std::string b = line.substr(comma + 1);
          p = std::strtod(b.c_str(), &end);
          ok_b = end != b.c_str() && (*end == '\0' || *end == '\r');
        }
        if (!ok_a && !ok_b && lineno == 1) continue;  // a header line
        if (!ok_a || !ok_b || !std::isfinite(t) || !std::isfinite(p))
          throw InputError({path, lineno, 1}, cdf_field,
                           "expected 'tokens,probability' with two finite numbers");
        pts.emplace_back(t, p);
        where.push_back({path, lineno, 1});
      }
      if (pts.empty()) throw InputError({path, 1, 1}, cdf_field, "holds no points");
    }
    for (size_t i = 0; i < pts.size(); ++i) {
      const auto& [t, p] = pts[i];
      if (!(t >= 1 && t <= kMaxTokens))
        throw InputError(where[i], cdf_field, fmt::format("tokens {} out of range (1-4M)", t));
      if (!(p > 0 && p <= 1))
        throw InputError(where[i], cdf_field, fmt::format("probability {} out of range (0, 1]", p));
      if (i > 0 && (t <= pts[i - 1].first || p < pts[i - 1].second))
        throw InputError(where[i], cdf_field,
                         "points must have increasing tokens and non-decreasing probabilities");
    }
    if (std::abs(pts.back().second - 1.0) > 1e-9)
      throw InputError(where.back(), cdf_field, "the last point's probability must be 1");
    L.cdf = std::move(pts);
    L.max_tokens = L.cdf.back().first;
    L.mean_tokens = L.mean();
  }
  (void)response;
  d.finish();
  return L;
}

// The longest sequence (the prompt plus the longest response the distribution allows) within
// the policy's context, and the response lengths within the reader's bounds.
void check_context(const RlConfig& c, const SourceLocation& at, const std::string& field) {
  const LengthDistribution& L = c.response;
  const double longest = L.kind == LengthDistribution::Kind::kFixed ? L.mean_tokens : L.max_tokens;
  if (!(longest >= 1 && longest <= kMaxResponseTokens))
    throw InputError(at, field,
                     fmt::format("responses of up to {:.0f} tokens: out of range (1-4M)", longest));
  if (L.kind == LengthDistribution::Kind::kEmpirical && !L.cdf.empty() && L.cdf.front().first < 1)
    throw InputError(at, field, "responses shorter than 1 token");
  if (c.prompt_tokens + longest > double(c.policy.max_seq))
    throw InputError(at, field,
                     fmt::format("a {:.0f}-token prompt and a {:.0f}-token response exceed the "
                                 "policy's context ({} tokens, max_seq)",
                                 c.prompt_tokens, longest, c.policy.max_seq));
}

RlConfig read_config(YamlMap& y) {
  RlConfig c;
  c.file = y.file();
  c.at = location_of(y.node(), c.file);
  c.title = y.opt_string("title").value_or("RL post-training step");
  c.policy = model_at(y, "policy");
  const std::string algo = y.opt_enum("algorithm", {"grpo", "ppo", "dapo"}).value_or("grpo");
  c.algorithm = algo == "ppo"    ? Algorithm::kPpo
                : algo == "dapo" ? Algorithm::kDapo
                                 : Algorithm::kGrpo;
  if (y.has("critic")) {
    if (c.algorithm != Algorithm::kPpo) y.fail("critic", "only PPO trains a critic");
    c.critic = model_at(y, "critic");
  }
  if (auto r = y.opt_map("reward")) {
    const std::string kind = r->get_enum("kind", {"rule", "model"});
    if (kind == "model") {
      c.reward_model = model_at(*r, "model");
    } else {
      c.reward_s_per_sample = r->opt_double("seconds_per_sample", 0, true).value_or(0);
      if (c.reward_s_per_sample > 3600)
        r->fail("seconds_per_sample", "more than an hour per sample");
      c.reward_workers = static_cast<int>(r->opt_int("workers", 1, 1 << 20).value_or(64));
    }
    r->finish();
  }
  c.reference = y.opt_bool("reference").value_or(true);
  c.old_logprob = y.opt_bool("old_logprob").value_or(true);

  // Cluster: a profile name (with gpus) or a cluster YAML.
  {
    const std::string name = relative_to(y.get_string("cluster"), y.file());
    const int gpus = static_cast<int>(y.opt_int("gpus", 1, 1 << 20).value_or(0));
    try {
      c.cluster = load_cluster(name, gpus);
    } catch (const InputError& e) {
      const char* key = e.field() == "--gpus" ? "gpus" : "cluster";
      const YAML::Node at = y.node()[key];
      throw InputError(location_of(at.IsDefined() ? at : y.node()["cluster"], y.file()),
                       y.field(key), e.reason());
    }
    if (c.cluster.heterogeneous())
      y.fail("cluster", "RL planning takes one GPU kind (a homogeneous cluster)");
  }
  const int G = c.cluster.num_gpus;

  {
    std::vector<std::string> archs = architecture_names();
    archs.push_back("search");
    if (y.has("architecture")) c.architecture_at = location_of(y.node()["architecture"], c.file);
    if (y.has("gpus")) c.gpus_at = location_of(y.node()["gpus"], c.file);
    const std::string a = y.opt_enum("architecture", archs).value_or("search");
    c.architecture_was_set = a != "search";
    c.architecture_search = y.has("architecture") && a == "search";
    for (int i = 0; i < kNumArchitectures; ++i)
      if (a == architecture_names()[static_cast<size_t>(i)])
        c.architecture = static_cast<Architecture>(i);
  }
  if (auto v = y.opt_int("rollout_gpus", 1, 1 << 20)) {
    c.rollout_gpus_at = location_of(y.node()["rollout_gpus"], c.file);
    if (c.architecture == Architecture::kColocated)
      y.fail("rollout_gpus", "a colocated plan runs the rollout on every GPU");
    if (*v >= G) y.fail("rollout_gpus", fmt::format("{} leaves no training GPUs of the {}", *v, G));
    c.rollout_gpus = static_cast<int>(*v);
  }

  if (auto b = y.opt_map("batch")) {
    c.prompts_per_step = b->get_int("prompts_per_step", 1, 1 << 20);
    c.samples_per_prompt = static_cast<int>(b->opt_int("samples_per_prompt", 1, 4096).value_or(1));
    if (c.prompts_per_step * c.samples_per_prompt > (int64_t{1} << 20))
      b->fail("samples_per_prompt", "more than 1M responses per step");
    b->finish();
  } else {
    y.fail("batch",
           "say how many prompts per step (batch: {prompts_per_step: N, samples_per_prompt: G})");
  }
  {
    const LengthDistribution p = read_length(y.get_map("prompt_length"), false);
    c.prompt_tokens = p.mean();
  }
  c.response = read_length(y.get_map("response_length"), true);
  check_context(c, location_of(y.node()["response_length"], c.file), y.field("response_length"));

  if (auto r = y.opt_map("rollout")) {
    InferenceLayout& il = c.rollout;
    if (auto t = r->opt_int("tp", 1, 1024)) {
      if (G % *t) r->fail("tp", fmt::format("does not divide the {} GPUs", G));
      if (c.policy.heads % *t)
        r->fail("tp", fmt::format("does not divide the policy's {} heads", c.policy.heads));
      c.rollout_tp = static_cast<int>(*t);
    }
    if (auto pp = r->opt_int("pp", 1, 256)) {
      if (*pp > c.policy.layers)
        r->fail("pp", fmt::format("more stages than the policy's {} layers", c.policy.layers));
      il.pp = static_cast<int>(*pp);
    }
    if (c.rollout_tp > 0 && G % (c.rollout_tp * il.pp))
      r->fail("pp",
              fmt::format("tp x pp = {} does not divide the {} GPUs", c.rollout_tp * il.pp, G));
    if (c.rollout_tp > 0 && c.rollout_gpus > 0 && c.rollout_gpus % (c.rollout_tp * il.pp))
      r->fail("tp", fmt::format("tp x pp = {} does not divide rollout_gpus ({})",
                                c.rollout_tp * il.pp, c.rollout_gpus));
    auto prec = [&](const char* key) {
      const std::string s = r->opt_enum(key, {"bf16", "fp16", "fp8"}).value_or("bf16");
      const Precision p = *parse_precision(s);
      if (c.cluster.profile.gpu.peak_flops(p) <= 0)
        r->fail(key, fmt::format("{} has no {} tensor cores", c.cluster.profile.gpu.name, s));
      return p;
    };
    il.weights = prec("weights");
    il.kv = prec("kv_cache");
    auto util = [&](const char* key, double fallback) {
      const double v = r->opt_double(key, 0).value_or(fallback);
      if (v > 1) r->fail(key, "is a fraction of the GPU memory and must be <= 1");
      return v;
    };
    il.gpu_memory_utilization = util("gpu_memory_utilization", 0.9);
    c.colocated_gpu_memory_utilization = util("colocated_gpu_memory_utilization", 0.5);
    il.max_num_seqs = static_cast<int>(r->opt_int("max_num_seqs", 1, 1 << 20).value_or(256));
    il.prefix_caching = r->opt_bool("prefix_caching").value_or(true);
    il.cuda_graphs = r->opt_bool("cuda_graphs").value_or(true);
    if (auto s = r->opt_map("speculative")) {
      il.spec_accept_tokens = s->get_double("accepted_tokens", 1, true);
      if (il.spec_accept_tokens > 16) s->fail("accepted_tokens", "more than 16 tokens per step");
      il.spec_draft_overhead = s->opt_double("draft_overhead", 0, true).value_or(0);
      if (il.spec_draft_overhead > 10) s->fail("draft_overhead", "more than 10 target steps");
      s->finish();
    }
    r->finish();
  }

  if (auto t = y.opt_map("training")) {
    const std::string p = t->opt_enum("precision", {"bf16", "fp16", "fp8"}).value_or("bf16");
    c.precision = *parse_precision(p);
    if (auto f = t->opt_string("framework")) {
      try {
        c.framework = parse_framework(*f, t->field("framework"));
      } catch (const InputError& e) {
        throw InputError(location_of(t->node()["framework"], c.file), t->field("framework"),
                         e.reason());
      }
    }
    if (auto m = t->opt_int("mini_batch_samples", 1, 1 << 24)) c.mini_batch_samples = *m;
    c.epochs = static_cast<int>(t->opt_int("epochs", 1, 64).value_or(1));
    c.offload = t->opt_bool("offload").value_or(false);
    auto ints = [&](const char* key, int lo, int hi, std::vector<int>& into) {
      if (t->has(key)) into = int_list(t->child(key), c.file, t->field(key), lo, hi);
    };
    ints("tp", 1, 1024, c.space.tp);
    ints("pp", 1, 1024, c.space.pp);
    ints("cp", 1, 1024, c.space.cp);
    ints("ep", 1, 4096, c.space.ep);
    ints("vpp", 1, 256, c.space.vpp);
    ints("mbs", 1, 1 << 16, c.space.mbs);
    ints("zero", 0, 3, c.space.zero);
    if (t->has("recompute")) {
      for (const std::string& s : string_list(t->child("recompute"), c.file, t->field("recompute"),
                                              {"none", "selective", "full"}))
        c.space.recompute.push_back(s == "full"        ? Recompute::kFull
                                    : s == "selective" ? Recompute::kSelective
                                                       : Recompute::kNone);
    }
    t->finish();
  }
  if (c.mini_batch_samples > c.prompts_per_step * c.samples_per_prompt)
    y.fail("training", fmt::format("mini_batch_samples exceeds the {} responses per step",
                                   c.prompts_per_step * c.samples_per_prompt));

  if (auto s = y.opt_map("sync")) {
    const std::string m =
        s->opt_enum("method", {"nccl-broadcast", "bucketed-rdma"}).value_or("nccl-broadcast");
    c.sync_method = m == "bucketed-rdma" ? SyncMethod::kBucketedRdma : SyncMethod::kNcclBroadcast;
    if (auto k = s->opt_int("interval_steps", 1, 1024)) {
      if (*k > 1 && c.architecture != Architecture::kFullyAsync)
        s->fail("interval_steps",
                "only the fully asynchronous architecture syncs less often than every step "
                "(set architecture: fully-async)");
      c.sync_interval_steps = static_cast<int>(*k);
    }
    if (auto b = s->opt_double("bucket_mib", 0)) {
      if (*b > 1 << 20) s->fail("bucket_mib", "more than 1 TiB per bucket");
      if (*b < 1) s->fail("bucket_mib", "less than 1 MiB per bucket");
      c.sync_bucket_bytes = *b * (1 << 20);
    }
    c.queue_steps = static_cast<int>(s->opt_int("queue_steps", 1, 64).value_or(1));
    s->finish();
  }
  return c;
}

}  // namespace

RlFile load_rl_file(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap())
    throw InputError({path, 1, 1}, "", "expected a map of RL settings (docs/rl.md)");
  RlFile f;
  {
    YamlMap y(root, path, "");
    y.allow("whatif");
    f.base = read_config(y);
    y.finish();
  }
  const YAML::Node w = root["whatif"];
  if (w.IsDefined() && !w.IsNull()) {
    if (!w.IsSequence())
      throw InputError(location_of(w, path), "whatif", "expected a list of named variations");
    for (size_t i = 0; i < w.size(); ++i) {
      const YAML::Node v = w[i];
      const std::string field = fmt::format("whatif[{}]", i);
      if (!v.IsMap()) throw InputError(location_of(v, path), field, "expected a map");
      YamlMap vm(v, path, field);
      RlVariant var;
      var.name = vm.get_string("name");
      // The base's keys, each replaced whole by the variation's; response_scale multiplies the
      // response length distribution.
      YAML::Node merged(YAML::NodeType::Map);
      for (const auto& kv : root) {
        const std::string k = kv.first.as<std::string>();
        if (k != "whatif") merged[k] = kv.second;
      }
      double scale = 1;
      for (const auto& kv : v) {
        const std::string k = kv.first.as<std::string>();
        if (k == "name") continue;
        if (k == "response_scale") {
          scale = vm.get_double("response_scale", 0);
          if (scale > 64 || scale < 1.0 / 64)
            vm.fail("response_scale", "must be between 1/64 and 64");
          continue;
        }
        if (k == "whatif" || std::find(top_keys().begin(), top_keys().end(), k) == top_keys().end())
          throw InputError(location_of(kv.first, path), field + "." + k,
                           fmt::format("unknown key{}",
                                       did_you_mean(k, std::span<const std::string>(top_keys()))));
        vm.allow(k);
        merged[k] = kv.second;
        var.keys.push_back(k);
      }
      vm.finish();
      // A variation that makes the plan colocated drops the base's pool size.
      if (v["architecture"].IsDefined() && v["architecture"].IsScalar() &&
          v["architecture"].Scalar() == "colocated" && !v["rollout_gpus"].IsDefined())
        merged.remove("rollout_gpus");
      try {
        YamlMap my(merged, path, "");
        var.config = read_config(my);
        my.finish();
        if (scale != 1) {
          LengthDistribution& L = var.config.response;
          L.mean_tokens *= scale;
          L.max_tokens *= scale;
          for (auto& pt : L.cdf) pt.first *= scale;
          L.prepare();
          check_context(var.config, location_of(v["response_scale"], path),
                        field + ".response_scale");
        }
      } catch (const InputError& e) {
        // Name the variation: the merged keys keep the base's positions.
        if (e.field().rfind(field, 0) == 0) throw;
        throw InputError(location_of(v, path), field,
                         fmt::format("variation '{}': {}", var.name, e.what()));
      }
      var.config.title = var.name;
      f.whatif.push_back(std::move(var));
    }
  }
  return f;
}

}  // namespace dtplan::rl

namespace dtplan::rl {

namespace {

// YAML's merge key (`<<: *anchor`, yaml.org/type/merge.html), which yaml-cpp 0.7 reads as a
// plain key: the map's own keys over those of the merged map(s), one level deep.
YAML::Node with_merge_keys(const YAML::Node& n, const std::string& file, const std::string& field) {
  if (!n.IsMap() || !n["<<"].IsDefined()) return n;
  YAML::Node out(YAML::NodeType::Map);
  auto take = [&](const YAML::Node& m) {
    if (!m.IsMap())
      throw InputError(location_of(m, file), field + ".<<", "a merge key takes a map (an alias)");
    for (const auto& kv : m) out[kv.first.as<std::string>()] = kv.second;
  };
  const YAML::Node src = n["<<"];
  if (src.IsSequence())
    for (const auto& m : src) take(m);
  else
    take(src);
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (k != "<<") out[k] = kv.second;
  }
  return out;
}

}  // namespace

const char* to_string(CaseQuantity q) {
  switch (q) {
    case CaseQuantity::kStepTime:
      return "step_time_s";
    case CaseQuantity::kGeneration:
      return "generation_s";
    case CaseQuantity::kGenerationShare:
      return "generation_share";
    case CaseQuantity::kSpeedup:
      return "speedup";
    case CaseQuantity::kSyncTime:
      return "sync_time_s";
  }
  return "step_time_s";
}

std::vector<RlCase> load_rl_cases(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap()) throw InputError({path, 1, 1}, "", "expected a map with a `cases:` list");
  YamlMap top(root, path, "");
  top.allow("assumptions");
  for (const auto& kv : root) {  // anchors for the cases' configurations (x-...)
    const std::string k = kv.first.as<std::string>();
    if (k.rfind("x-", 0) == 0) top.allow(k);
  }
  top.opt_string("title");
  const YAML::Node list = top.child("cases");
  if (!list.IsSequence() || list.size() == 0)
    throw InputError(location_of(root, path), "cases", "expected a non-empty list of cases");
  std::vector<RlCase> out;
  const std::vector<std::string> quantities = {"step_time_s", "generation_s", "generation_share",
                                               "speedup", "sync_time_s"};
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = fmt::format("cases[{}]", i);
    if (!list[i].IsMap()) throw InputError(location_of(list[i], path), field, "expected a map");
    YamlMap y(list[i], path, field);
    RlCase c;
    c.at = location_of(list[i], path);
    c.id = y.get_string("id");
    c.source = y.get_string("source");
    c.quote = y.get_string("quote");
    c.assumed = y.opt_string("assumed").value_or("");
    const std::string q = y.get_enum("quantity", quantities);
    for (size_t k = 0; k < quantities.size(); ++k)
      if (q == quantities[k]) c.quantity = static_cast<CaseQuantity>(k);
    c.measured = y.get_double("measured", 0);
    {
      YamlMap cm(with_merge_keys(y.get_map("config").node(), path, y.field("config")), path,
                 y.field("config"));
      c.config = read_config(cm);
      cm.finish();
    }
    if (y.has("baseline")) {
      if (c.quantity != CaseQuantity::kSpeedup)
        y.fail("baseline", "only a speedup compares with a baseline");
      YamlMap bm(with_merge_keys(y.get_map("baseline").node(), path, y.field("baseline")), path,
                 y.field("baseline"));
      c.baseline = read_config(bm);
      bm.finish();
    } else if (c.quantity == CaseQuantity::kSpeedup) {
      y.fail("quantity", "a speedup needs a baseline configuration");
    }
    for (const RlConfig* cfg : {&c.config, c.baseline ? &*c.baseline : nullptr}) {
      if (cfg && !cfg->architecture)
        y.fail("config", "a case fixes its architecture (colocated, disaggregated, ...)");
    }
    y.finish();
    out.push_back(std::move(c));
  }
  top.finish();
  return out;
}

}  // namespace dtplan::rl
