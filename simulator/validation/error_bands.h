// Error bands from dtplan's own accuracy record: how far measured step times of published runs
// fell from dtplan's predictions, by regime (GPU generation, precision, ZeRO-3/FSDP, MoE, context
// parallelism, scale), turned into an interval for a new prediction (docs/accuracy.md, "Error
// bands").
//
// `dtplan accuracy --cases cases.yaml --write-bands FILE` writes the record (one line per
// predicted case: its regime, group and measured/predicted ratio); the build ships it as
// accuracy/error_bands.json, and a test fails when it is stale. A prediction's band is the
// p10-p90 of measured/predicted over the cases of its regime, each group (one measured
// configuration series) weighing alike; a regime with fewer than 8 cases or 2 publication
// families drops its least telling features in a fixed order (calibration, scale, context
// parallelism, MoE, framework, ZeRO-3, precision) until enough remain, and the band says which it
// dropped; the GPU generation is never dropped (no band then).
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

struct Regime {
  std::string generation;  // "ampere", "hopper", "blackwell" or "other" (from the GPU's name)
  std::string framework = "megatron";  // the stack: megatron, deepspeed, torchtitan, other
  bool calibrated = false;             // the hardware profile holds calibration tables
  bool fp8 = false;
  bool zero3 = false;  // parameters sharded (ZeRO-3 / FSDP)
  bool moe = false;
  bool cp = false;  // context parallelism
  int scale = 0;    // 0: one node's worth (<= 8 GPUs), 1: <= 256 GPUs, 2: more
  // Activations offloaded to host memory. Recorded, not matched: too few runs do it to build a
  // band on; an offload plan's warning counts them (reports/uncertainty.cpp).
  bool offload = false;
  std::string describe() const;  // "hopper, megatron, fp8, ZeRO 0-2, dense, no CP, 257+ GPUs"
  // The features a band matched, most telling first, leaving out the `dropped` it gave up
  // (error_bands.cpp's order): "hopper, 16-bit, ZeRO 0-2".
  std::string describe_matched(int dropped) const;
};

// The generation of a GPU from its name: A100/A800/A30 ampere, H100/H200/H800/H20 hopper,
// B200/B300/GB200/GB300 blackwell.
std::string gpu_generation(const std::string& gpu_name);
// `framework`: the stack the plan runs on (FrameworkProfile::stack, or a --framework name).
Regime regime_of(const HardwareProfile& hw, const ModelSpec& m, const Workload& w, const Plan& p,
                 int num_gpus, const std::string& framework);

struct BandRecord {
  std::string id, group;
  Regime regime;
  double ratio = 1;  // measured / predicted step time
  int gpus = 0;      // the run's size and sequence length, for the record's range
  int64_t seq_len = 0;
};
// The publication family of a group: its first '_'-separated token ("vtrain_single_h1024_l12"
// -> "vtrain"); a band needs two, and leave-one-family-out coverage holds one out.
std::string band_family(const std::string& group);

struct ErrorBandTable {
  std::string cases_file;  // what the record was generated from
  std::vector<BandRecord> records;
};

struct ErrorBand {
  bool found = false;
  // Multiply the predicted step time (and time to train) by these: p10 and p90 of measured /
  // predicted. Throughput and MFU take the reciprocals the other way round.
  double low = 1, high = 1;
  int cases = 0, groups = 0, families = 0;
  std::vector<std::string> dropped;  // regime features the band could not match
  std::string regime;                // the features matched, in words
  // The largest run and the longest sequence among the cases the band is built on.
  int max_gpus = 0;
  int64_t max_seq_len = 0;
  // Without a band, why: the runs of the regime's GPU generation (the one feature never given
  // up) and their publication families, against what a band needs.
  int generation_cases = 0, generation_families = 0;
  int needed_cases = 0, needed_families = 0;
};

// The band of `r`, leaving out `exclude_group` (for leave-one-group-out) and, when
// `exclude_family` is set, that family.
ErrorBand band_for(const ErrorBandTable& t, const Regime& r, const std::string& exclude_group = "",
                   const std::string& exclude_family = "");

struct BandCoverage {
  int cases = 0;
  double inside = 0;             // share of cases whose measurement falls in their band
  double median_half_width = 0;  // median of (high - low) / 2 over those bands
};
// Each case's band built without its own group (or, `by_family`, without its family).
BandCoverage leave_one_out_coverage(const ErrorBandTable& t, bool by_family);

// Deterministic text: one record per line, sorted as given.
std::string bands_to_json(const ErrorBandTable& t);
// InputError (file:line:col) for a missing or malformed file.
ErrorBandTable load_bands(const std::string& path);
// accuracy/error_bands.json of the data directory, loaded once; nullptr when it is absent.
const ErrorBandTable* shipped_bands();

}  // namespace dtplan
