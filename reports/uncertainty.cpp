#include "reports/uncertainty.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op.h"

namespace dtplan {

double kernel_ceiling(const HardwareProfile& hw, Precision precision, std::string* what) {
  const double peak = hw.gpu.peak_flops(precision);
  if (peak <= 0) return 0;
  double ceiling = 0;
  auto consider = [&](double share, const std::string& which) {
    if (share > ceiling) {
      ceiling = share;
      if (what) *what = fmt::format("{}, profile {}", which, hw.name);
    }
  };
  const EfficiencyParams& ef = hw.efficiency;
  if (precision == Precision::kFp8) {
    consider(ef.gemm_max_fraction_fp8, "FP8 GEMMs, efficiency.gemm_max_fraction_fp8");
    consider(ef.gemm_max_fraction_mxfp8, "MXFP8 GEMMs, efficiency.gemm_max_fraction_mxfp8");
  } else {
    consider(ef.gemm_max_fraction, "GEMMs, efficiency.gemm_max_fraction");
  }
  const double to_peak = hw.gpu.peak_flops(Precision::kBf16) / peak;
  consider(ef.attention_fwd_max_fraction * to_peak,
           "attention forward, efficiency.attention_fwd_max_fraction");
  consider(ef.attention_bwd_max_fraction * to_peak,
           "attention backward, efficiency.attention_bwd_max_fraction");
  for (const EfficiencyParams::AttentionCurve& k : ef.attention_kernels)
    consider(std::max(k.fwd_max_fraction, k.bwd_max_fraction) * to_peak,
             fmt::format("{} attention, efficiency.attention_kernels", k.kernel));
  return ceiling;
}

Uncertainty uncertainty_of(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                           const Estimate& e, const std::string& framework,
                           const std::vector<std::string>& calibration_flags,
                           const ErrorBandTable* table) {
  Uncertainty u;
  // With device groups, the band of the group that holds the busiest stage (it sets the step).
  const int busiest_group = c.heterogeneous() ? stage_device_group(c, p, e.busiest_stage) : -1;
  const HardwareProfile& hw =
      busiest_group >= 0 ? c.groups[static_cast<size_t>(busiest_group)].profile : c.profile;
  if (c.heterogeneous())
    u.warnings.push_back(
        {"heterogeneous-cluster",
         fmt::format("no published run in dtplan's record mixes device groups: the band is that "
                     "of the busiest stage's group ({}), and the composition across groups (each "
                     "stage priced on its group, every pipeline send at the slowest group's "
                     "rate) is not validated against a measured run",
                     hw.name)});
  if (hw.efficiency.status == "initial" && hw.calibration.empty())
    u.warnings.push_back(
        {"profile-not-fitted",
         fmt::format("profile {}: its efficiency values are initial values (datasheets and "
                     "microbenchmarks), not fitted to measured runs, and it holds no calibration",
                     hw.name)});
  if (hw.efficiency.status == "partial" && hw.calibration.empty())
    u.warnings.push_back(
        {"profile-partly-fitted",
         fmt::format("profile {}: some of its efficiency values are fitted to measured runs (or "
                     "copied from a fitted profile), the others are initial values (datasheets "
                     "and microbenchmarks); its efficiency source says which",
                     hw.name)});
  if (!table) table = shipped_bands();
  const Regime r = regime_of(hw, m, w, p, c.num_gpus, framework);
  if (!table) {
    u.warnings.push_back({"no-error-band",
                          "no error-band record (accuracy/error_bands.json in the data directory): "
                          "the figures carry no interval"});
  } else {
    u.band = band_for(*table, r);
    if (!u.band.found)
      u.warnings.push_back(
          {"no-error-band",
           u.band.generation_cases == 0
               ? fmt::format("no published run of dtplan's record resembles this regime ({}): "
                             "none is on {} GPUs, so the figures carry no interval",
                             r.describe(), r.generation)
               : fmt::format("no error band for this regime ({}): dtplan's record holds {} "
                             "published run(s) on {} GPUs, from {} publication famil{}, and a "
                             "band needs at least {} runs from {} families (so that one "
                             "source's errors do not set it); the figures carry no interval",
                             r.describe(), u.band.generation_cases, r.generation,
                             u.band.generation_families,
                             u.band.generation_families == 1 ? "y" : "ies", u.band.needed_cases,
                             u.band.needed_families)});
    else if (!u.band.dropped.empty())
      u.warnings.push_back(
          {"regime-sparse",
           fmt::format("few published runs match this regime ({}): the band is taken from {} "
                       "cases that match {} only (dropped: {})",
                       r.describe(), u.band.cases, u.band.regime,
                       fmt::join(u.band.dropped, ", "))});
  }
  // Activation offload is recorded but not matched (too few published runs do it): the band is
  // that of runs like it without offload, and the warning says how many runs of this GPU
  // generation offload, and that the copies' stalls rest on the profile's host link.
  if (r.offload) {
    int same = 0, any = 0;
    if (table)
      for (const BandRecord& b : table->records)
        if (b.regime.offload) {
          ++any;
          same += b.regime.generation == r.generation;
        }
    u.warnings.push_back(
        {"offload-unvalidated",
         fmt::format("activation offload ({} layers): {} of dtplan's published runs on {} GPUs "
                     "offload activations ({} on any GPU), and {}; the copies to and from host "
                     "memory ({:g} GB/s per GPU with every GPU of the node copying) are priced "
                     "from the profile and hidden only where a pass's compute is longer",
                     p.offload_layers, same, r.generation, any,
                     u.band.found ? "the band comes from runs without it"
                                  : "no band is given (no-error-band)",
                     hw.host.concurrent_gbps_per_gpu())});
  }
  // A schedule built to hide the MoE all-to-all behind the paired micro-batch's compute
  // (DualPipe-V), run with that overlap off: the all-to-all is priced exposed, which is not
  // what the schedule does (a new-user trial: DeepSeek-V3 on 2048 H800, 56% of the step in
  // exposed EP communication, 5.7 days per trillion tokens against the report's 3.7).
  const int ep_dim = static_cast<int>(CommDim::kEP);
  if (const IPipelineSchedule* s = p.pp > 1 ? find_schedule(p.schedule.str()) : nullptr;
      s && s->pairs_forward_with_backward() && m.moe && p.ep > 1 && !p.ep_comm_overlap &&
      e.exposed_comm_s[ep_dim] > 0)
    u.warnings.push_back(
        {"ep-overlap-off",
         fmt::format("schedule {} pairs each forward with another micro-batch's backward to hide "
                     "the MoE all-to-all behind it, but this plan prices the all-to-all exposed "
                     "({:.3g} s of the {:.3g} s step): --ep-comm-overlap prices the overlap the "
                     "schedule is built for (and --moe-dispatcher deepep its kernels)",
                     p.schedule.str(), e.exposed_comm_s[ep_dim], e.step_time_s)});
  // Tensor parallelism beyond the NVLink domain: priced (its collectives on the scale-out
  // network), but the search rejects it unless asked, and no published run does it.
  if (const int domain = hw.node.placement_domain_gpus(); domain > 0 && p.tp > domain)
    u.warnings.push_back(
        {"tp-crosses-nodes",
         fmt::format("TP{} spans {} NVLink domains of {} GPUs: every layer's tensor-parallel "
                     "collectives cross the scale-out network; the search rejects such layouts "
                     "unless --allow-cross-node-tp, and no published run of dtplan's record "
                     "does it",
                     p.tp, (p.tp + domain - 1) / domain, domain)});
  // Beyond the record's range: a run much larger or a sequence much longer than any the band
  // was built on (twice the largest).
  if (u.band.found && u.band.max_gpus > 0 && c.num_gpus > 2 * u.band.max_gpus)
    u.warnings.push_back(
        {"outside-record",
         fmt::format("{} GPUs: the largest published run the band is built on used {}", c.num_gpus,
                     u.band.max_gpus)});
  if (u.band.found && u.band.max_seq_len > 0 && w.seq_len > 2 * u.band.max_seq_len)
    u.warnings.push_back(
        {"outside-record",
         fmt::format("sequences of {} tokens: the longest among the published runs the band is "
                     "built on is {}",
                     w.seq_len, u.band.max_seq_len)});
  for (const std::string& f : calibration_flags) u.warnings.push_back({"outside-calibration", f});
  double lo = u.band.found ? u.band.low : 1;
  const double hi = u.band.found ? u.band.high : 1;
  // The band's optimistic end stops at the kernel ceiling: no step runs its hardware FLOPs at a
  // larger share of the peak than the profile's fastest kernel.
  std::string which;
  const double ceiling = kernel_ceiling(hw, w.precision, &which);
  if (u.band.found && ceiling > 0 && e.hfu > 0 && e.hfu / lo > ceiling) {
    lo = e.hfu / ceiling;
    u.warnings.push_back(
        {"band-at-ceiling",
         fmt::format("the band's fast end is held at the kernel ceiling ({:.0f}% of the peak: {}): "
                     "runs like it were up to {:.2f}x faster than predicted, which would take "
                     "this plan's HFU to {:.0f}%",
                     100 * ceiling, which, 1 / u.band.low, 100 * e.hfu / u.band.low)});
  }
  u.step_low_s = e.step_time_s * lo;
  u.step_high_s = e.step_time_s * hi;
  u.mfu_low = e.mfu / hi;
  u.mfu_high = e.mfu / lo;
  u.tokens_low = e.tokens_per_s / hi;
  u.tokens_high = e.tokens_per_s / lo;
  u.days_low = e.time_to_train_days * lo;
  u.days_high = e.time_to_train_days * hi;
  return u;
}

std::string with_band(const std::string& value, double low, double high, const char* spec,
                      bool have_band) {
  if (!have_band) return value;
  return fmt::format("{} ({}–{})", value, fmt::format(fmt::runtime(spec), low),
                     fmt::format(fmt::runtime(spec), high));
}

}  // namespace dtplan
