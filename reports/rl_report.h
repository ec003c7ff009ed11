// The RL post-training report (dtplan rl --out): the step's phases with their arithmetic, the
// pools' idle shares, weight sync and staleness, a timeline of two steps, the architectures
// compared, and the what-if variations of the configuration (docs/rl.md).
#pragma once

#include <string>
#include <vector>

#include "planner/rl.h"
#include "reports/renderers.h"

namespace dtplan::reports {

struct RlReportData {
  std::string title, config_file;
  std::string policy, cluster;
  int gpus = 0;
  bool searched = false;  // --search: every architecture and pool split
  rl::RlSearchResult result;
  struct Variation {
    std::string name;
    bool found = false;
    rl::RlResult best;
    std::string why;
  };
  std::vector<Variation> whatif;
};

std::string render_rl(const RlReportData& d, Format f);
// The JSON of `dtplan rl --json` (docs/rl.md, "JSON"), also embedded in the report.
std::string rl_json(const RlReportData& d);

}  // namespace dtplan::reports
