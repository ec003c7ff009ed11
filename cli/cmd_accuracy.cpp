#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "core/catalog.h"
#include "core/error.h"
#include "simulator/validation/accuracy.h"

namespace dtplan::cli {

void register_accuracy(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "accuracy", "Predict published runs and compare with their measured step times");
  static std::string cases_path, evaluator = "analytic", attention, out, group, bands_out,
                                 dispatcher = "alltoall";
  static std::vector<std::string> only_profiles;
  static bool json = false, overlap = false, no_overlap = false, tp_overlap = false,
              no_tp_overlap = false, verbose = false;
  cmd->add_option("--cases", cases_path, "Case file (shared/groundtruth format)")->required();
  cmd->add_option("--evaluator", evaluator,
                  "analytic (closed form) or des (discrete-event simulator re-evaluates the chosen "
                  "layout)")
      ->check(CLI::IsMember({"analytic", "des"}))
      ->capture_default_str();
  cmd->add_option("--attention", attention,
                  "Override: this attention kernel for every case (default: each case's "
                  "framework.attention, unfused where it is null)")
      ->check(CLI::IsMember({"flash", "unfused"}));
  auto* ov = cmd->add_flag("--overlap-grad-reduce", overlap,
                           "Override: the gradient reduce overlaps the backward in every case "
                           "(default: each case's framework.grad_reduce_overlap, off where null)");
  cmd->add_flag("--no-overlap-grad-reduce", no_overlap,
                "Override: the gradient reduce follows the backward in every case")
      ->excludes(ov);
  auto* tov = cmd->add_flag("--tp-comm-overlap", tp_overlap,
                            "Override: TP communication overlaps the GEMMs in every case "
                            "(default: each case's framework.tp_comm_overlap, off where null)");
  cmd->add_flag("--no-tp-comm-overlap", no_tp_overlap,
                "Override: TP communication is not overlapped in any case")
      ->excludes(tov);
  cmd->add_option("--moe-dispatcher", dispatcher,
                  "What-if: this MoE token dispatcher in every MoE case (the cases do not record "
                  "theirs; default alltoall): deepep and hybridep send a token once per node")
      ->check(CLI::IsMember({"alltoall", "deepep", "hybridep"}))
      ->capture_default_str();
  cmd->add_option("--group", group,
                  "Only cases whose group starts with this prefix (several: comma-separated)");
  cmd->add_option("--profile", only_profiles, "Only cases on these hardware profiles");
  cmd->add_flag("--json", json, "Machine-readable output (cases[] and summary)");
  cmd->add_flag("--verbose,-v", verbose, "Print every case (default: groups and the worst cases)");
  cmd->add_option("--out,-o", out, "Write the output to this file (atomically)");
  cmd->add_option("--write-bands", bands_out,
                  "Write the error-band record (measured/predicted and regime per case) to this "
                  "file: accuracy/error_bands.json is generated this way from cases.yaml");
  cmd->callback([&ctx] {
    CaseFile file = load_case_file(cases_path);
    std::map<std::string, std::unique_ptr<HardwareProfile>> profiles;
    AccuracyOptions opt;
    if (!attention.empty()) opt.flash_attention = attention == "flash";
    if (overlap || no_overlap) opt.overlap_grad_reduce = overlap;
    if (tp_overlap || no_tp_overlap) opt.tp_comm_overlap = tp_overlap;
    opt.moe_dispatcher = parse_moe_dispatcher(dispatcher).value_or(MoeDispatcher::kAllToAll);
    opt.des = evaluator == "des";
    opt.profile = [&](const std::string& name) -> const HardwareProfile* {
      auto it = profiles.find(name);
      if (it != profiles.end()) return it->second.get();
      std::unique_ptr<HardwareProfile> p;
      try {
        p = std::make_unique<HardwareProfile>(load_profile(name));
      } catch (const InputError&) {
      }
      return (profiles[name] = std::move(p)).get();
    };
    std::map<std::string, std::unique_ptr<FrameworkProfile>> frameworks;
    opt.framework = [&](const std::string& name,
                        const std::string& version) -> const FrameworkProfile* {
      const std::string key = name + "@" + version;
      auto it = frameworks.find(key);
      if (it != frameworks.end()) return it->second.get();
      std::unique_ptr<FrameworkProfile> f;
      if (has_framework_profile(name)) {
        f = std::make_unique<FrameworkProfile>(load_framework_profile(name));
        // A version the profile lists selects its overrides; others keep the base values.
        if (!version.empty() &&
            std::find(f->versions.begin(), f->versions.end(), version) != f->versions.end())
          f = std::make_unique<FrameworkProfile>(load_framework_profile(name + "@" + version));
      }
      return (frameworks[key] = std::move(f)).get();
    };
    // The zoo, for what the case format leaves out (norm, bias, positions, dropout).
    std::vector<ModelSpec> zoo;
    for (const std::string& name : list_model_names()) zoo.push_back(load_model(name));
    opt.zoo = &zoo;
    std::vector<std::string> prefixes;
    for (size_t at = 0; !group.empty() && at <= group.size();) {
      const size_t comma = std::min(group.find(',', at), group.size());
      prefixes.push_back(group.substr(at, comma - at));
      at = comma + 1;
    }
    auto in_groups = [&](const std::string& g) {
      return prefixes.empty() || std::any_of(prefixes.begin(), prefixes.end(), [&](const auto& x) {
               return !x.empty() && g.starts_with(x);
             });
    };
    std::vector<CaseResult> results, layer_results;
    auto on_profile = [&](const std::string& prof) {
      return only_profiles.empty() ||
             std::find(only_profiles.begin(), only_profiles.end(), prof) != only_profiles.end();
    };
    for (const auto& c : file.cases)
      if (in_groups(c.group) && on_profile(c.profile)) results.push_back(predict_case(c, opt));
    if (in_groups("layer_cases"))
      for (const auto& c : file.layer_cases)
        if (on_profile(c.profile)) layer_results.push_back(predict_layer_case(c, opt));
    AccuracySummary s = summarize(results);
    AccuracySummary ls = summarize(layer_results);
    // The error-band record and how well its bands cover the cases they leave out.
    ErrorBandTable bands;
    bands.cases_file = std::filesystem::path(cases_path).filename().string();
    for (const CaseResult& r : results)
      if (r.skipped.empty() && r.predicted_s > 0)
        bands.records.push_back(
            {r.id, r.group, r.regime, r.measured_s / r.predicted_s, r.num_gpus, r.seq_len});
    const BandCoverage by_group = leave_one_out_coverage(bands, false);
    const BandCoverage by_family = leave_one_out_coverage(bands, true);
    if (!bands_out.empty()) {
      write_file_atomic(bands_out, bands_to_json(bands));
      fmt::print(stderr, "wrote {} ({} records)\n", bands_out, bands.records.size());
    }

    std::string text;
    auto o = std::back_inserter(text);
    if (json) {
      nlohmann::json j;
      auto case_json = [](const CaseResult& r) {
        nlohmann::json c = {
            {"id", r.id},
            {"group", r.group},
            {"measured_step_time_s", r.measured_s},
            {"skipped", r.skipped.empty() ? nlohmann::json() : nlohmann::json(r.skipped)}};
        c["predicted_step_time_s"] =
            r.skipped.empty() ? nlohmann::json(r.predicted_s) : nlohmann::json();
        c["error_pct"] = r.skipped.empty() ? nlohmann::json(r.error_pct) : nlohmann::json();
        c["plan"] = r.plan;
        c["candidates"] = r.candidates;
        if (r.skipped.empty()) c["fits_in_memory"] = r.fits;
        c["attention"] = r.flash_attention ? "flash" : "unfused";
        if (!r.attention_kernel.empty()) c["attention_kernel"] = r.attention_kernel;
        c["overlap_grad_reduce"] = r.overlap_grad_reduce;
        c["tp_comm_overlap"] = r.tp_comm_overlap;
        if (r.measured_peak_memory_gib) {
          c["measured_peak_memory_gib"] = *r.measured_peak_memory_gib;
          c["predicted_peak_memory_gib"] = r.predicted_peak_memory_gib
                                               ? nlohmann::json(*r.predicted_peak_memory_gib)
                                               : nlohmann::json();
        }
        return c;
      };
      j["cases"] = nlohmann::json::array();
      for (const auto& r : results) j["cases"].push_back(case_json(r));
      j["layer_cases"] = nlohmann::json::array();
      for (const auto& r : layer_results) j["layer_cases"].push_back(case_json(r));
      auto summary_json = [](const AccuracySummary& x) {
        // No case predicted: no error to state (null, not 0%).
        auto figure = [&](double v) {
          return x.cases_predicted > 0 ? nlohmann::json(v) : nlohmann::json();
        };
        nlohmann::json sj = {{"mape_pct", figure(x.mape_pct)},
                             {"median_abs_pct", figure(x.median_abs_pct)},
                             {"max_abs_pct", figure(x.max_abs_pct)},
                             {"cases_total", x.cases_total},
                             {"cases_predicted", x.cases_predicted},
                             {"memory_cases", x.memory_cases},
                             {"memory_mape_pct", x.memory_mape_pct},
                             {"memory_mean_signed_pct", x.memory_mean_signed_pct},
                             {"memory_cases_within_10pct", x.memory_cases_within_10pct}};
        nlohmann::json mg = nlohmann::json::object(), sg = nlohmann::json::object();
        for (const auto& g : x.groups) {
          mg[g.group] = g.mape_pct;
          sg[g.group] = g.spearman ? nlohmann::json(*g.spearman) : nlohmann::json();
        }
        nlohmann::json bt = nlohmann::json::object();
        for (const auto& g : x.groups)
          if (g.layout_sets > 0)
            bt[g.group] = {{"layout_sets", g.layout_sets}, {"best_in_top3", g.best_in_top3}};
        sj["mape_by_group"] = mg;
        sj["spearman_by_group"] = sg;
        sj["measured_best_in_predicted_top3_by_group"] = bt;
        return sj;
      };
      j["summary"] = summary_json(s);
      auto coverage_json = [](const BandCoverage& c) {
        return nlohmann::json{{"cases", c.cases},
                              {"inside_p10_p90", c.inside},
                              {"median_half_width", c.median_half_width}};
      };
      j["error_bands"] = {{"leave_one_group_out", coverage_json(by_group)},
                          {"leave_one_family_out", coverage_json(by_family)}};
      j["layer_summary"] = summary_json(ls);
      // An override, or "per case" (each case's framework fact; the default where it is null).
      auto setting = [](const std::optional<bool>& v, const char* on, const char* off) {
        return v ? nlohmann::json(*v ? on : off) : nlohmann::json("per case");
      };
      j["assumptions"] = {{"evaluator", evaluator},
                          {"attention", setting(opt.flash_attention, "flash", "unfused")},
                          {"overlap_grad_reduce", setting(opt.overlap_grad_reduce, "on", "off")},
                          {"tp_comm_overlap", setting(opt.tp_comm_overlap, "on", "off")},
                          {"moe_dispatcher", to_string(opt.moe_dispatcher)},
                          {"null_defaults",
                           {{"attention", "unfused"},
                            {"overlap_grad_reduce", "off"},
                            {"overlap_param_gather", "off"},
                            {"tp_comm_overlap", "off"}}}};
      text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
      fmt::format_to(o, "{:<58} {:>11} {:>11} {:>8}\n", "case", "predicted s", "measured s",
                     "error");
      std::vector<const CaseResult*> shown;
      shown.reserve(results.size());
      for (const auto& r : results) shown.push_back(&r);
      if (!verbose) {
        std::sort(shown.begin(), shown.end(), [](const CaseResult* a, const CaseResult* b) {
          return std::fabs(a->error_pct) > std::fabs(b->error_pct);
        });
        if (shown.size() > 25) shown.resize(25);
      }
      for (const CaseResult* r : shown) {
        if (!r->skipped.empty())
          fmt::format_to(o, "{:<58} {:>11} {:>11.4g} skipped: {}\n", r->id, "-", r->measured_s,
                         r->skipped);
        else
          fmt::format_to(o, "{:<58} {:>11.4g} {:>11.4g} {:>+7.1f}%\n", r->id, r->predicted_s,
                         r->measured_s, r->error_pct);
      }
      if (!verbose && results.size() > shown.size())
        fmt::format_to(o, "({} worst of {} cases shown; --verbose for all)\n", shown.size(),
                       results.size());
      for (const auto& r : results)
        if (!r.skipped.empty() && !verbose) fmt::format_to(o, "skipped {}: {}\n", r.id, r.skipped);
      fmt::format_to(o, "\n{:<34} {:>6} {:>9} {:>9} {:>10}\n", "group", "cases", "MAPE", "Spearman",
                     "best@top3");
      for (const auto& g : s.groups)
        fmt::format_to(o, "{:<34} {:>6} {:>8.2f}% {:>9} {:>10}\n", g.group, g.cases, g.mape_pct,
                       g.spearman ? fmt::format("{:.3f}", *g.spearman) : "-",
                       g.layout_sets ? fmt::format("{}/{}", g.best_in_top3, g.layout_sets) : "-");
      if (s.cases_predicted > 0)
        fmt::format_to(o,
                       "\nall cases: MAPE {:.2f}%, median |error| {:.2f}%, max |error| {:.2f}%, "
                       "coverage {}/{}\n",
                       s.mape_pct, s.median_abs_pct, s.max_abs_pct, s.cases_predicted,
                       s.cases_total);
      else
        fmt::format_to(o, "\nall cases: no case predicted (coverage 0/{}): no error to state\n",
                       s.cases_total);
      if (s.memory_cases > 0)
        fmt::format_to(o,
                       "peak memory (the {} predicted cases whose source prints it): mean |error| "
                       "{:.1f}%, mean signed {:+.1f}%, {} within 10%\n",
                       s.memory_cases, s.memory_mape_pct, s.memory_mean_signed_pct,
                       s.memory_cases_within_10pct);
      fmt::format_to(o,
                     "error bands (p10-p90 of measured/predicted by regime): leave-one-group-out "
                     "{:.1f}% of {} cases inside, median half-width {:.1f}%; leave-one-family-out "
                     "{:.1f}% of {}, half-width {:.1f}%\n",
                     100 * by_group.inside, by_group.cases, 100 * by_group.median_half_width,
                     100 * by_family.inside, by_family.cases, 100 * by_family.median_half_width);
      if (!layer_results.empty()) {
        fmt::format_to(o, "\nlayer cases (forward+backward of one layer)\n");
        for (const auto& r : layer_results)
          fmt::format_to(o, "{:<58} {:>9.2f}ms {:>9.2f}ms {:>+7.1f}%\n", r.id, r.predicted_s * 1e3,
                         r.measured_s * 1e3, r.error_pct);
        fmt::format_to(o, "layer cases: MAPE {:.2f}%, max |error| {:.2f}%\n", ls.mape_pct,
                       ls.max_abs_pct);
      }
      auto setting = [](const std::optional<bool>& v, const char* on, const char* off) {
        return v ? fmt::format("{} (override)", *v ? on : off) : std::string("per case");
      };
      fmt::format_to(o,
                     "framework settings: attention {}, gradient-reduce overlap {}, TP overlap {} "
                     "(per case: the case's framework block; null: unfused, not overlapped); MoE "
                     "dispatcher {}\n",
                     setting(opt.flash_attention, "flash", "unfused"),
                     setting(opt.overlap_grad_reduce, "on", "off"),
                     setting(opt.tp_comm_overlap, "on", "off"), to_string(opt.moe_dispatcher));
    }
    write_output(text, out);
    ctx.exit_code = 0;
    // A file none of whose cases can be predicted measures nothing: a gate reading the summary
    // must not pass (the output above lists each case's reason).
    if (s.cases_total > 0 && s.cases_predicted == 0) {
      fmt::print(stderr,
                 "dtplan: error: {}: none of its {} case(s) could be predicted; each one's reason "
                 "is listed in the output\n",
                 cases_path, s.cases_total);
      ctx.exit_code = 2;
    }
  });
}

}  // namespace dtplan::cli
