#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "calibrate/i_backend.h"
#include "cli/commands.h"
#include "core/catalog.h"
#include "core/framework_profile.h"
#include "core/registry.h"
#include "executor/i_exec_backend.h"
#include "planner/emit/i_emitter.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan::cli {

void register_list(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "list", "List the model zoo, the hardware or framework profiles, or a plug-in registry");
  static std::string what;
  cmd->add_option(
         "what", what,
         "models | profiles | frameworks | schedules | collectives | emitters | backends | "
         "executors")
      ->required()
      ->check(CLI::IsMember({"models", "profiles", "frameworks", "schedules", "collectives",
                             "emitters", "backends", "executors"}));
  cmd->callback([&ctx] {
    if (what == "models") {
      fmt::print("{:<18} {:>6} {:>7} {:>5} {:>6} {:>9} {:>9}  {}\n", "name", "layers", "hidden",
                 "heads", "kv", "total(B)", "active(B)", "description");
      for (const auto& n : list_model_names()) {
        ModelSpec m = load_model(n);
        ParamCounts c = count_params(m);
        fmt::print("{:<18} {:>6} {:>7} {:>5} {:>6} {:>9.1f} {:>9.1f}  {}\n", n, m.layers, m.hidden,
                   m.heads, m.kv_heads, static_cast<double>(c.total()) / 1e9,
                   static_cast<double>(c.active()) / 1e9, m.display_name);
      }
    } else if (what == "frameworks") {
      fmt::print("{:<20} {:<11} {:<14} {:>7} {:<18}  {}\n", "name (--framework)", "stack",
                 "attention", "effic.", "versions", "description");
      for (const auto& n : list_framework_profile_names()) {
        const FrameworkProfile f = load_framework_profile(n);
        std::string kernels, versions;
        for (const auto& k : f.attention_kernels) kernels += (kernels.empty() ? "" : ",") + k;
        for (const auto& v : f.versions) versions += (versions.empty() ? "" : ",") + v;
        fmt::print("{:<20} {:<11} {:<14} {:>7.3g} {:<18}  {}\n", n, f.stack, kernels,
                   f.compute_efficiency, versions.empty() ? "-" : versions, f.description);
      }
    } else if (what == "schedules") {
      for (const auto& e : Registry<IPipelineSchedule>::global().entries())
        fmt::print("{:<14} {}\n", e.name, e.description);
    } else if (what == "emitters") {
      for (const auto& e : Registry<IEmitter>::global().entries()) {
        fmt::print("{:<14} {}\n", e.name, e.description);
        const IEmitter* em = find_emitter(e.name);
        bool first = true;
        for (const FrameworkVersion& v : em->versions()) {
          fmt::print("{:<14}   --framework-version {}{}: {}\n", "", v.name,
                     first ? " (default)" : "", v.description);
          first = false;
        }
      }
    } else if (what == "backends") {
      for (const auto& e : Registry<calibrate::ICalibrationBackend>::global().entries())
        fmt::print("{:<14} {}\n", e.name, e.description);
    } else if (what == "executors") {
      for (const auto& e : Registry<exec::IExecBackend>::global().entries())
        fmt::print("{:<14} {}\n", e.name, e.description);
    } else if (what == "collectives") {
      for (const auto& e : Registry<ICollectiveAlgorithm>::global().entries())
        fmt::print("{:<14} {}\n", e.name, e.description);
    } else {
      fmt::print("{:<18} {:>5} {:>9} {:>9} {:>8} {:>11} {:>9}  {}\n", "name", "GPUs", "HBM(GiB)",
                 "bf16(TF)", "fp8(TF)", "NVLink(GB/s)", "net(GB/s)", "GPU");
      for (const auto& n : list_profile_names()) {
        HardwareProfile p = load_profile(n);
        fmt::print("{:<18} {:>5} {:>9.0f} {:>9.0f} {:>8.0f} {:>11.0f} {:>9.0f}  {}\n", n,
                   p.node.gpus_per_node, p.gpu.memory_gib, p.gpu.peak_tflops[0],
                   p.gpu.peak_tflops[static_cast<size_t>(Precision::kFp8)],
                   p.node.nvlink_gbps_per_direction, p.scale_out.node_gbps(), p.gpu.name);
      }
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
