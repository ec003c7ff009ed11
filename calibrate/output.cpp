#include "calibrate/output.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/yaml_reader.h"

namespace dtplan::calibrate {

static YAML::Node flow_map() {
  YAML::Node n(YAML::NodeType::Map);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

static double round_sig(double v, int digits = 6) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double p =
      std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * p) / p;
}

std::string calibrated_profile_yaml(const std::string& base_path, const HardwareProfile& base,
                                    const CalibrationResult& r) {
  YAML::Node root = YAML::Clone(load_yaml_file(base_path));
  root["name"] = base.name + "-calibrated";
  root["description"] = fmt::format("{} (calibrated by dtplan calibrate --backend {} on {}, {})",
                                    base.description.empty() ? base.name : base.description,
                                    r.backend, r.date, r.env.device);
  if (!r.gemm_fits.empty()) {
    const GemmFit& g = r.gemm_fits.front();
    YAML::Node e = root["efficiency"];
    e["gemm_max_fraction"] = round_sig(g.max_fraction);
    e["gemm_half_saturation_gflop"] = round_sig(g.half_saturation_gflop);
    e["source"] = fmt::format(
        "gemm_max_fraction and gemm_half_saturation_gflop fitted by dtplan calibrate on {} from "
        "{} {} GEMM shapes (R^2 on log time {:.3f}, max residual {:.1f}%); other values from {}",
        r.date, g.points, to_string(g.precision), g.r2, 100 * g.max_rel_residual,
        base.efficiency.source.empty() ? "the base profile" : base.efficiency.source);
  }
  YAML::Node cal(YAML::NodeType::Map);
  YAML::Node prov = flow_map();
  prov["source"] =
      fmt::format("measured with {} on {} rank(s), {} host(s)",
                  r.env.tool.empty() ? "dtplan calibrate --backend " + r.backend : r.env.tool,
                  r.ranks, r.hosts);
  prov["date"] = r.date;
  prov["device"] = r.env.device;
  prov["tool"] = r.env.tool;
  prov["software"] = r.env.software;
  cal["provenance"] = prov;
  YAML::Node gemm(YAML::NodeType::Sequence);
  YAML::Node colls(YAML::NodeType::Sequence);
  std::map<std::tuple<int, int, int>, std::vector<std::pair<double, double>>> tables;
  for (const auto& m : r.measurements) {
    if (m.task.kind == TaskKind::kGemm) {
      YAML::Node g = flow_map();
      g["precision"] = to_string(m.task.precision);
      g["m"] = m.task.m;
      g["n"] = m.task.n;
      g["k"] = m.task.k;
      g["tflops"] = round_sig(m.tflops());
      gemm.push_back(g);
    } else if (m.task.group_size > 1) {
      // Tables hold bus bandwidth; a group of one (send to self) has no bus.
      tables[{static_cast<int>(m.task.op), static_cast<int>(m.task.scope), m.task.group_size}]
          .push_back({static_cast<double>(m.task.bytes), round_sig(m.busbw_gbps())});
    }
  }
  for (auto& [key, pts] : tables) {
    std::sort(pts.begin(), pts.end());
    YAML::Node t(YAML::NodeType::Map);
    t["op"] = to_string(static_cast<CollectiveOp>(std::get<0>(key)));
    t["scope"] = to_string(static_cast<CommScope>(std::get<1>(key)));
    t["group_size"] = std::get<2>(key);
    YAML::Node points(YAML::NodeType::Sequence);
    for (const auto& [b, bw] : pts) {
      YAML::Node p(YAML::NodeType::Sequence);
      p.SetStyle(YAML::EmitterStyle::Flow);
      p.push_back(static_cast<int64_t>(b));
      p.push_back(bw);
      points.push_back(p);
    }
    t["points"] = points;
    colls.push_back(t);
  }
  if (gemm.size() > 0) cal["gemm"] = gemm;
  if (colls.size() > 0) cal["collectives"] = colls;
  YAML::Node fits(YAML::NodeType::Map);
  YAML::Node gf(YAML::NodeType::Sequence);
  for (const auto& g : r.gemm_fits) {
    YAML::Node n = flow_map();
    n["precision"] = to_string(g.precision);
    n["max_fraction"] = round_sig(g.max_fraction);
    n["half_saturation_gflop"] = round_sig(g.half_saturation_gflop);
    n["min_gflop"] = round_sig(g.min_gflop);
    n["max_gflop"] = round_sig(g.max_gflop);
    n["r2"] = round_sig(g.r2, 4);
    n["max_rel_residual"] = round_sig(g.max_rel_residual, 4);
    n["points"] = g.points;
    gf.push_back(n);
  }
  YAML::Node cf(YAML::NodeType::Sequence);
  for (const auto& c : r.collective_fits) {
    YAML::Node n(YAML::NodeType::Map);
    n["op"] = to_string(c.op);
    n["scope"] = to_string(c.scope);
    n["group_size"] = c.group_size;
    n["r2"] = round_sig(c.r2, 4);
    n["max_rel_residual"] = round_sig(c.max_rel_residual, 4);
    n["points"] = c.points;
    YAML::Node segs(YAML::NodeType::Sequence);
    for (const auto& s : c.segments) {
      YAML::Node sn = flow_map();
      sn["min_bytes"] = s.min_bytes;
      sn["max_bytes"] = s.max_bytes;
      sn["alpha_us"] = round_sig(s.alpha_us);
      sn["bw_gbps"] = round_sig(s.bw_gbps);
      segs.push_back(sn);
    }
    n["segments"] = segs;
    cf.push_back(n);
  }
  if (gf.size() > 0) fits["gemm"] = gf;
  if (cf.size() > 0) fits["collectives"] = cf;
  if (fits.size() > 0) cal["fits"] = fits;
  root["calibration"] = cal;
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetDoublePrecision(8);
  out << root;
  return fmt::format(
      "# Calibrated hardware profile written by dtplan calibrate ({}).\n"
      "# Base profile: {}. Measured tables replace the model where they cover a shape or size;\n"
      "# see docs/calibration.md.\n{}\n",
      r.date, base_path, out.c_str());
}

bool weak_fit(const GemmFit& g) { return g.r2 < 0.9 || g.max_rel_residual > 0.25; }

std::string calibration_summary_markdown(const HardwareProfile& base, const CalibrationResult& r,
                                         const std::string& profile_path) {
  std::string md = fmt::format("# Calibration of {} ({})\n\n", r.env.device, r.date);
  md += fmt::format(
      "- Backend: `{}`; {} rank(s) on {} host(s); software: {}\n- Base profile: `{}`; "
      "calibrated profile: `{}`\n- Measurements: {}\n\n",
      r.backend, r.ranks, r.hosts, r.env.software.empty() ? "n/a" : r.env.software, base.name,
      profile_path, r.measurements.size());
  // GEMM: best measured vs datasheet peak per precision.
  std::map<Precision, const Measurement*> best;
  for (const auto& m : r.measurements)
    if (m.task.kind == TaskKind::kGemm &&
        (!best[m.task.precision] || m.tflops() > best[m.task.precision]->tflops()))
      best[m.task.precision] = &m;
  if (!best.empty()) {
    md += "## GEMM: measured vs datasheet peak\n\n";
    md +=
        "| Precision | Best measured (TFLOP/s) | Shape (M x N x K) | Datasheet peak (TFLOP/s) | "
        "Share of peak |\n|---|---:|---|---:|---:|\n";
    for (const auto& [p, m] : best) {
      const double peak = base.gpu.peak_flops(p) / 1e12;
      md += fmt::format("| {} | {:.2f} | {} x {} x {} | {} | {} |\n", to_string(p), m->tflops(),
                        m->task.m, m->task.n, m->task.k,
                        peak > 0 ? fmt::format("{:.1f}", peak) : "n/a",
                        peak > 0 ? fmt::format("{:.1f}%", 100 * m->tflops() / peak) : "n/a");
    }
    md += fmt::format("\nDatasheet peaks: {}\n\n",
                      base.gpu.source.empty() ? "profile" : base.gpu.source);
  }
  if (!r.gemm_fits.empty()) {
    md +=
        "## GEMM efficiency fit\n\nModel: `eff = max_fraction x tile x wave x F/(F + "
        "half_saturation)` (docs/performance-model.md); the first row sets the profile's "
        "parameters, the others show how well they carry over.\n\n";
    md +=
        "| Precision | max_fraction | half_saturation (GFLOP) | Range (GFLOP) | Points | R^2 (log "
        "t) | "
        "Max residual |\n|---|---:|---:|---|---:|---:|---:|\n";
    for (const auto& g : r.gemm_fits)
      md += fmt::format("| {} | {:.3f} | {:.3g} | {:.3g} - {:.3g} | {} | {:.4f} | {:.1f}% |\n",
                        to_string(g.precision), g.max_fraction, g.half_saturation_gflop,
                        g.min_gflop, g.max_gflop, g.points, g.r2, 100 * g.max_rel_residual);
    md += "\n";
    for (const auto& g : r.gemm_fits)
      if (weak_fit(g))
        md += fmt::format(
            "**Weak fit ({}):** R^2 {:.2f}, largest residual {:.0f}%. The efficiency model "
            "(tiles, waves, saturation) does not describe this device well; the measured table "
            "still gives exact times for the shapes it covers.\n\n",
            to_string(g.precision), g.r2, 100 * g.max_rel_residual);
  }
  if (!r.collective_fits.empty()) {
    md +=
        "## Collectives: alpha-beta fits\n\nEach regime: `t = alpha + bytes / bw` over its "
        "size range (bytes as nccl-tests reports them). Peak busbw compares with the link: "
        "NVLink per direction inside a node, the NIC across nodes.\n\n";
    md +=
        "| Collective | Scope | Ranks | Regimes (bytes: alpha us, bw GB/s) | Peak busbw (GB/s) | "
        "Link (GB/s) | Points | R^2 (log t) | Max residual |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---:|\n";
    for (const auto& c : r.collective_fits) {
      std::string regs;
      for (const auto& s : c.segments)
        regs += fmt::format("{}{:.0f}-{:.0f}: {:.2f}, {:.3g}", regs.empty() ? "" : "; ",
                            s.min_bytes, s.max_bytes, s.alpha_us, s.bw_gbps);
      double peak = 0;
      for (const auto& m : r.measurements)
        if (m.task.kind == TaskKind::kCollective && m.task.op == c.op && m.task.scope == c.scope &&
            m.task.group_size == c.group_size)
          peak = std::max(peak, m.busbw_gbps());
      const double link = c.scope == CommScope::kIntraNode ? base.node.nvlink_gbps_per_direction
                                                           : base.scale_out.nic_gbps;
      md += fmt::format("| {} | {} | {} | {} | {:.2f} | {:.0f} | {} | {:.4f} | {:.1f}% |\n",
                        to_string(c.op), to_string(c.scope), c.group_size, regs, peak, link,
                        c.points, c.r2, 100 * c.max_rel_residual);
    }
    md += "\n";
  }
  md +=
      "Estimates that need a GEMM or collective outside these ranges are flagged by "
      "`dtplan estimate` (\"outside the calibrated range\").\n";
  return md;
}

}  // namespace dtplan::calibrate
