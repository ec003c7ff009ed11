// Assembles a ReportData from a finished search: the ranked plans with their per-stage memory,
// the rejections, the Pareto front, a TP x PP heatmap and one alternative per dimension (both by
// searching again with pins), the recommended plan's discrete-event timeline, its derivations,
// the assumptions and the provenance of every hardware constant.
//
// Contract: deterministic for a given input (the searches are); throws nothing for a valid
// search setup; `source_json` is stored as given (the caller's `dtplan search --json` text).
#pragma once

#include <string>

#include "planner/search.h"
#include "reports/report_data.h"
#include "simulator/cost/reliability.h"

namespace dtplan::reports {

struct ReportOptions {
  bool heatmap = true;
  bool alternatives = true;
  bool timeline = true;
  FailureOptions failure;  // how the checkpoints-and-failures section prices them
  // The stack the plans run on (a framework profile's `stack`, e.g. "other" for llm-foundry;
  // empty: SearchOptions::framework's rule set), which names the framework and picks the error
  // bands; SearchOptions::framework_rules says whether the rule set's warnings apply.
  std::string framework_stack;
};

ReportData build_report(const ModelSpec& m, const Cluster& c, const Workload& w,
                        const SearchSpace& space, const SearchOptions& opt,
                        const SearchResult& result, const std::string& source_json,
                        const ReportOptions& ropt = {});

// A ranked plan with its per-stage memory, for renderers.
PlanRow make_row(const ModelSpec& m, const Workload& w, const Candidate& c);

// The breakdown of a step as (name, seconds) pairs in the report's order (compute, recompute,
// exposed TP/CP/EP/PP/DP comm, bubble, optimizer, overhead).
std::vector<std::pair<std::string, double>> step_components(const Estimate& e);

}  // namespace dtplan::reports
