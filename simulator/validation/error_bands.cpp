#include "simulator/validation/error_bands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/catalog.h"
#include "core/yaml_reader.h"

namespace dtplan {

namespace {

constexpr int kMinCases = 8;     // a regime needs this many cases
constexpr int kMinFamilies = 2;  // from this many publication families
constexpr double kLow = 0.10, kHigh = 0.90;

// The features in the order a sparse regime gives them up.
enum Feature {
  kCalibrated,
  kScale,
  kCp,
  kMoe,
  kFramework,
  kZero3,
  kFp8,
  kGeneration,
  kNumFeatures
};
const char* const kFeatureNames[kNumFeatures] = {
    "calibration", "scale",  "context parallelism", "MoE",
    "framework",   "ZeRO-3", "precision",           "GPU generation"};

bool same(const Regime& a, const Regime& b, Feature f) {
  switch (f) {
    case kCalibrated:
      return a.calibrated == b.calibrated;
    case kFramework:
      return a.framework == b.framework;
    case kScale:
      return a.scale == b.scale;
    case kCp:
      return a.cp == b.cp;
    case kMoe:
      return a.moe == b.moe;
    case kZero3:
      return a.zero3 == b.zero3;
    case kFp8:
      return a.fp8 == b.fp8;
    case kGeneration:
      return a.generation == b.generation;
    default:
      return true;
  }
}

// p-quantile of values weighted by `w` (linear between the weight midpoints).
double weighted_quantile(std::vector<std::pair<double, double>> vw, double p) {
  std::sort(vw.begin(), vw.end());
  double total = 0;
  for (const auto& [v, w] : vw) total += w;
  double before = 0, prev_pos = -1, prev_v = vw.front().first;
  for (const auto& [v, w] : vw) {
    const double pos = (before + w / 2) / total;
    if (pos >= p) {
      if (prev_pos < 0) return v;
      return prev_v + (v - prev_v) * (p - prev_pos) / (pos - prev_pos);
    }
    before += w;
    prev_pos = pos;
    prev_v = v;
  }
  return vw.back().first;
}

}  // namespace

std::string gpu_generation(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("B200") || has("B300") || has("GB2") || has("GB3")) return "blackwell";
  if (has("H100") || has("H200") || has("H800") || has("H20")) return "hopper";
  if (has("A100") || has("A800") || has("A30")) return "ampere";
  return "other";
}

std::string Regime::describe_matched(int dropped) const {
  // The features in Feature order, each with its words; the first `dropped` are left out.
  const std::string words[kNumFeatures] = {calibrated ? "calibrated profile" : "stock profile",
                                           scale == 0   ? "1-8 GPUs"
                                           : scale == 1 ? "9-256 GPUs"
                                                        : "257+ GPUs",
                                           cp ? "CP" : "no CP",
                                           moe ? "MoE" : "dense",
                                           framework,
                                           zero3 ? "ZeRO-3/FSDP" : "ZeRO 0-2",
                                           fp8 ? "fp8" : "16-bit",
                                           generation};
  std::string s;
  for (int f = kNumFeatures - 1; f >= std::max(0, dropped); --f)
    s += (s.empty() ? "" : ", ") + words[f];
  return s;
}

std::string Regime::describe() const {
  return fmt::format("{}{}, {}, {}, {}, {}, {}, {}", generation, calibrated ? " (calibrated)" : "",
                     framework, fp8 ? "fp8" : "16-bit", zero3 ? "ZeRO-3/FSDP" : "ZeRO 0-2",
                     moe ? "MoE" : "dense", cp ? "CP" : "no CP",
                     scale == 0   ? "1-8 GPUs"
                     : scale == 1 ? "9-256 GPUs"
                                  : "257+ GPUs");
}

Regime regime_of(const HardwareProfile& hw, const ModelSpec& m, const Workload& w, const Plan& p,
                 int num_gpus, const std::string& framework) {
  Regime r;
  r.generation = gpu_generation(hw.gpu.name);
  r.framework = framework;
  r.calibrated = !hw.calibration.empty();
  r.fp8 = w.precision == Precision::kFp8;
  r.zero3 = p.zero >= 3;
  r.moe = m.moe.has_value();
  r.cp = p.cp > 1;
  r.offload = p.offload_layers > 0 && p.recompute != Recompute::kFull;
  r.scale = num_gpus <= 8 ? 0 : num_gpus <= 256 ? 1 : 2;
  return r;
}

std::string band_family(const std::string& group) { return group.substr(0, group.find('_')); }

ErrorBand band_for(const ErrorBandTable& t, const Regime& r, const std::string& exclude_group,
                   const std::string& exclude_family) {
  ErrorBand b;
  b.needed_cases = kMinCases;
  b.needed_families = kMinFamilies;
  // The GPU generation is never given up: a band from other generations is no band.
  for (int dropped = 0; dropped < kNumFeatures; ++dropped) {
    std::map<std::string, int> per_family, per_group;
    std::vector<const BandRecord*> match;
    for (const BandRecord& rec : t.records) {
      if (rec.group == exclude_group) continue;
      const std::string fam = band_family(rec.group);
      if (!exclude_family.empty() && fam == exclude_family) continue;
      bool ok = true;
      for (int f = dropped; f < kNumFeatures && ok; ++f)
        ok = same(rec.regime, r, static_cast<Feature>(f));
      if (!ok) continue;
      match.push_back(&rec);
      ++per_family[fam];
      ++per_group[rec.group];
    }
    b.generation_cases = static_cast<int>(match.size());  // the last pass: the generation only
    b.generation_families = static_cast<int>(per_family.size());
    if (static_cast<int>(match.size()) < kMinCases ||
        static_cast<int>(per_family.size()) < kMinFamilies)
      continue;
    std::vector<std::pair<double, double>> vw;
    vw.reserve(match.size());
    for (const BandRecord* rec : match) vw.emplace_back(rec->ratio, 1.0 / per_group[rec->group]);
    b.found = true;
    b.low = weighted_quantile(vw, kLow);
    b.high = weighted_quantile(vw, kHigh);
    b.cases = static_cast<int>(match.size());
    b.families = static_cast<int>(per_family.size());
    b.groups = static_cast<int>(per_group.size());
    for (int f = 0; f < dropped; ++f) b.dropped.push_back(kFeatureNames[f]);
    b.regime = r.describe_matched(dropped);
    for (const BandRecord* rec : match) {
      b.max_gpus = std::max(b.max_gpus, rec->gpus);
      b.max_seq_len = std::max(b.max_seq_len, rec->seq_len);
    }
    return b;
  }
  return b;
}

BandCoverage leave_one_out_coverage(const ErrorBandTable& t, bool by_family) {
  BandCoverage c;
  std::vector<double> widths;
  int inside = 0;
  for (const BandRecord& rec : t.records) {
    const ErrorBand b = by_family ? band_for(t, rec.regime, "", band_family(rec.group))
                                  : band_for(t, rec.regime, rec.group);
    if (!b.found) continue;
    ++c.cases;
    inside += rec.ratio >= b.low && rec.ratio <= b.high;
    widths.push_back((b.high - b.low) / 2);
  }
  if (c.cases > 0) {
    c.inside = static_cast<double>(inside) / c.cases;
    std::nth_element(widths.begin(),
                     widths.begin() + static_cast<std::ptrdiff_t>(widths.size() / 2), widths.end());
    c.median_half_width = widths[widths.size() / 2];
  }
  return c;
}

std::string bands_to_json(const ErrorBandTable& t) {
  std::string o = "{\n";
  o += fmt::format(
      "  \"about\": \"dtplan's accuracy record: measured / predicted step time of every "
      "predicted case, with its regime (simulator/validation/error_bands.h). Generated by "
      "`dtplan accuracy --cases {} --write-bands`; do not edit.\",\n",
      t.cases_file);
  o += fmt::format("  \"cases_file\": \"{}\",\n  \"records\": [\n", t.cases_file);
  for (size_t i = 0; i < t.records.size(); ++i) {
    const BandRecord& r = t.records[i];
    o += fmt::format(
        "    {{\"id\": \"{}\", \"group\": \"{}\", \"generation\": \"{}\", \"framework\": "
        "\"{}\", \"calibrated\": {}, \"fp8\": {}, "
        "\"zero3\": {}, \"moe\": {}, \"cp\": {}, \"offload\": {}, \"scale\": {}, \"gpus\": "
        "{}, \"seq\": {}, \"ratio\": {:.9g}}}{}\n",
        r.id, r.group, r.regime.generation, r.regime.framework, r.regime.calibrated, r.regime.fp8,
        r.regime.zero3, r.regime.moe, r.regime.cp, r.regime.offload, r.regime.scale, r.gpus,
        r.seq_len, r.ratio, i + 1 < t.records.size() ? "," : "");
  }
  o += "  ]\n}\n";
  return o;
}

namespace {

// The record through yaml-cpp: slow (a 0.5 MB file takes ~0.25 s), but every error names
// file:line:col. Used when the fast reader below finds anything it does not expect.
ErrorBandTable load_bands_located(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap()) throw InputError(location_of(root, path), "", "not an error-band record");
  YamlMap top(root, path, "");
  ErrorBandTable t;
  top.allow("about");
  t.cases_file = top.get_string("cases_file");
  const YAML::Node recs = top.child("records");
  if (!recs.IsSequence()) top.fail("records", "must be a list");
  for (size_t i = 0; i < recs.size(); ++i) {
    YamlMap y(recs[i], path, fmt::format("records[{}]", i));
    BandRecord r;
    r.id = y.get_string("id");
    r.group = y.get_string("group");
    r.regime.generation = y.get_string("generation");
    r.regime.framework = y.get_string("framework");
    r.regime.calibrated = y.get_bool("calibrated");
    r.regime.fp8 = y.get_bool("fp8");
    r.regime.zero3 = y.get_bool("zero3");
    r.regime.moe = y.get_bool("moe");
    r.regime.cp = y.get_bool("cp");
    r.regime.offload = y.get_bool("offload");
    r.regime.scale = static_cast<int>(y.get_int("scale", 0));
    r.gpus = static_cast<int>(y.get_int("gpus", 1));
    r.seq_len = y.get_int("seq", 1);
    r.ratio = y.get_double("ratio", 0);
    y.finish();
    t.records.push_back(std::move(r));
  }
  top.finish();
  return t;
}

// The same reading through nlohmann::json (the record is JSON): the same fields and bounds;
// nullopt on anything unexpected, so that the located reader reports it.
std::optional<ErrorBandTable> load_bands_fast(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  // Keys as parsed, to catch a duplicate key (the DOM keeps one of them silently).
  size_t keys = 0;
  const nlohmann::json j = nlohmann::json::parse(
      in,
      [&keys](int, nlohmann::json::parse_event_t e, nlohmann::json&) {
        keys += e == nlohmann::json::parse_event_t::key;
        return true;
      },
      /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("cases_file") || !j.contains("records")) return std::nullopt;
  size_t kept = j.size();
  if (j["records"].is_array())
    for (const auto& rec : j["records"]) kept += rec.is_object() ? rec.size() : 0;
  if (kept != keys) return std::nullopt;
  for (const auto& [k, v] : j.items())
    if (k != "about" && k != "cases_file" && k != "records") return std::nullopt;
  const auto& cf = j["cases_file"];
  const auto& recs = j["records"];
  if (!cf.is_string() || !recs.is_array()) return std::nullopt;
  ErrorBandTable t;
  t.cases_file = cf.get<std::string>();
  t.records.reserve(recs.size());
  static const std::set<std::string, std::less<>> kFields = {
      "id",  "group", "generation", "framework", "calibrated", "fp8", "zero3",
      "moe", "cp",    "offload",    "scale",     "gpus",       "seq", "ratio"};
  for (const auto& rec : recs) {
    if (!rec.is_object() || rec.size() != kFields.size()) return std::nullopt;
    for (const auto& [k, v] : rec.items())
      if (!kFields.count(k)) return std::nullopt;
    auto str = [&](const char* k, std::string& out) {
      const auto& v = rec[k];
      if (!v.is_string()) return false;
      out = v.get<std::string>();
      return !out.empty();
    };
    auto flag = [&](const char* k, bool& out) {
      const auto& v = rec[k];
      if (!v.is_boolean()) return false;
      out = v.get<bool>();
      return true;
    };
    auto integer = [&](const char* k, int64_t lo, int64_t& out) {
      const auto& v = rec[k];
      if (!v.is_number_integer()) return false;
      out = v.get<int64_t>();
      return out >= lo && out <= YamlMap::kMaxFieldInt;
    };
    BandRecord r;
    int64_t scale = 0, gpus = 0, seq = 0;
    const auto& ratio = rec["ratio"];
    if (!str("id", r.id) || !str("group", r.group) || !str("generation", r.regime.generation) ||
        !str("framework", r.regime.framework) || !flag("calibrated", r.regime.calibrated) ||
        !flag("fp8", r.regime.fp8) || !flag("zero3", r.regime.zero3) ||
        !flag("moe", r.regime.moe) || !flag("cp", r.regime.cp) ||
        !flag("offload", r.regime.offload) || !integer("scale", 0, scale) ||
        !integer("gpus", 1, gpus) || !integer("seq", 1, seq) || !ratio.is_number())
      return std::nullopt;
    r.ratio = ratio.get<double>();
    if (!std::isfinite(r.ratio) || r.ratio <= 0) return std::nullopt;
    r.regime.scale = static_cast<int>(scale);
    r.gpus = static_cast<int>(gpus);
    r.seq_len = seq;
    t.records.push_back(std::move(r));
  }
  return t;
}

}  // namespace

ErrorBandTable load_bands(const std::string& path) {
  if (std::optional<ErrorBandTable> t = load_bands_fast(path)) return std::move(*t);
  return load_bands_located(path);
}

const ErrorBandTable* shipped_bands() {
  static std::once_flag once;
  static std::unique_ptr<ErrorBandTable> table;
  std::call_once(once, [] {
    const std::string path = data_dir() + "/accuracy/error_bands.json";
    if (std::filesystem::exists(path)) table = std::make_unique<ErrorBandTable>(load_bands(path));
  });
  return table.get();
}

}  // namespace dtplan
