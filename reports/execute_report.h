// The validation report of `dtplan execute --out`: a plan's step as run on devices, measured
// beside predicted (step, peak memory, op classes, GEMM shapes, per rank), with how the backend
// ran it (docs/executor.md). Also the command's JSON and text, so all three show one thing.
#pragma once

#include <string>

#include "core/plan.h"
#include "executor/runner.h"
#include "reports/renderers.h"

namespace dtplan::reports {

std::string execute_json(const exec::ExecResult& r, const Plan& p);
std::string execute_text(const exec::ExecResult& r, const Plan& p);
std::string render_execute(const exec::ExecResult& r, const Plan& p, Format f);

}  // namespace dtplan::reports
