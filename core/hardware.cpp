#include "core/hardware.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/yaml_reader.h"

namespace dtplan {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      break;
  }
  return "bf16";
}

std::optional<Precision> parse_precision(const std::string& s) {
  for (int i = 0; i < kNumPrecisions; ++i) {
    auto p = static_cast<Precision>(i);
    if (s == to_string(p)) return p;
  }
  return std::nullopt;
}

int bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kFp8:
      return 1;
    case Precision::kTf32:
    case Precision::kFp32:
      return 4;
    default:
      return 2;
  }
}

double GpuSpec::peak_flops(Precision p) const { return peak_tflops[static_cast<size_t>(p)] * 1e12; }

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllToAll:
      return "all_to_all";
    case CollectiveOp::kSendRecv:
      return "send_recv";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kAllReduce:
      break;
  }
  return "all_reduce";
}

const char* to_string(CommScope s) {
  return s == CommScope::kInterNode ? "inter_node" : "intra_node";
}

static CollectiveOp read_op(YamlMap& t) {
  const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter",
                                        "all_to_all", "send_recv",  "broadcast"};
  auto op = t.get_enum("op", ops);
  return static_cast<CollectiveOp>(std::find(ops.begin(), ops.end(), op) - ops.begin());
}

static CommScope read_scope(YamlMap& t) {
  return t.get_enum("scope", {"intra_node", "inter_node"}) == "inter_node" ? CommScope::kInterNode
                                                                           : CommScope::kIntraNode;
}

static YAML::Node list_child(YamlMap& m, std::string_view key, const std::string& file) {
  YAML::Node n = m.child(key);
  if (n.IsDefined() && !n.IsNull() && !n.IsSequence())
    throw InputError(location_of(n, file), m.field(key), "expected a list");
  return n;
}

// calibration.fits: the curves `dtplan calibrate` fitted (docs/file-formats.md).
static void read_fits(YamlMap& fits, const std::string& file, Calibration& cal) {
  YAML::Node gemm = list_child(fits, "gemm", file);
  size_t i = 0;
  if (gemm.IsSequence()) {
    for (const auto& item : gemm) {
      YamlMap g(item, file, fmt::format("calibration.fits.gemm[{}]", i++));
      GemmFit f;
      auto prec = g.get_string("precision");
      auto p = parse_precision(prec);
      if (!p) g.fail("precision", fmt::format("unknown precision '{}'", prec));
      f.precision = *p;
      f.max_fraction = g.get_double("max_fraction", 0);
      f.half_saturation_gflop = g.get_double("half_saturation_gflop", 0, true);
      f.min_gflop = g.get_double("min_gflop", 0, true);
      f.max_gflop = g.get_double("max_gflop", 0, true);
      f.r2 = g.get_double("r2", -1e9, true);
      f.max_rel_residual = g.get_double("max_rel_residual", 0, true);
      f.points = static_cast<int>(g.get_int("points", 1));
      g.finish();
      cal.gemm_fits.push_back(f);
    }
  }
  YAML::Node coll = list_child(fits, "collectives", file);
  i = 0;
  if (coll.IsSequence()) {
    for (const auto& item : coll) {
      YamlMap t(item, file, fmt::format("calibration.fits.collectives[{}]", i++));
      CollectiveFit f;
      f.op = read_op(t);
      f.scope = read_scope(t);
      f.group_size = static_cast<int>(t.get_int("group_size", 1));
      f.r2 = t.get_double("r2", -1e9, true);
      f.max_rel_residual = t.get_double("max_rel_residual", 0, true);
      f.points = static_cast<int>(t.get_int("points", 1));
      YAML::Node segs = list_child(t, "segments", file);
      if (!segs.IsSequence() || segs.size() == 0)
        t.fail("segments",
               "expected a non-empty list of {min_bytes, max_bytes, alpha_us, bw_gbps}");
      size_t j = 0;
      for (const auto& sn : segs) {
        YamlMap s(sn, file, fmt::format("{}.segments[{}]", t.field("segments").c_str(), j++));
        AlphaBetaSegment seg;
        seg.min_bytes = s.get_double("min_bytes", 0);
        seg.max_bytes = s.get_double("max_bytes", seg.min_bytes, true);
        seg.alpha_us =
            s.get_double("alpha_us", -1e12, true);  // intercept; < 0 past the first regime
        seg.bw_gbps = s.get_double("bw_gbps", 0);
        s.finish();
        f.segments.push_back(seg);
      }
      t.finish();
      cal.collective_fits.push_back(std::move(f));
    }
  }
  fits.finish();
}

double CollectiveFit::predict_s(double bytes) const {
  if (segments.empty()) return 0;
  const AlphaBetaSegment* s = &segments.front();
  for (const auto& seg : segments)
    if (bytes >= seg.min_bytes) s = &seg;
  return s->alpha_us * 1e-6 + bytes / (s->bw_gbps * 1e9);
}

static HardwareProfile profile_from_yaml(const YAML::Node& root, const std::string& file) {
  YamlMap y(root, file, "");
  HardwareProfile hw;
  hw.file = file;
  hw.name = y.get_string("name");
  hw.description = y.opt_string("description").value_or("");

  {
    YamlMap g = y.get_map("gpu");
    hw.gpu.name = g.get_string("name");
    hw.gpu.memory_gib = g.get_double_in("memory_gib", 0.1, 1e5);
    YamlMap peaks = g.get_map("peak_tflops");
    bool any = false;
    for (int i = 0; i < kNumPrecisions; ++i) {
      auto p = static_cast<Precision>(i);
      if (auto v = peaks.opt_double(to_string(p), 0)) {
        hw.gpu.peak_tflops[static_cast<size_t>(i)] = *v;
        any = true;
      }
    }
    peaks.finish();
    if (!any) g.fail("peak_tflops", "give at least one precision (bf16, fp16, fp8, tf32, fp32)");
    if (hw.gpu.peak_tflops[static_cast<size_t>(Precision::kFp16)] == 0)
      hw.gpu.peak_tflops[static_cast<size_t>(Precision::kFp16)] =
          hw.gpu.peak_tflops[static_cast<size_t>(Precision::kBf16)];
    hw.gpu.hbm_gbps = g.get_double_in("hbm_gbps", 1, 1e6);
    hw.gpu.sm_count = static_cast<int>(g.get_int("sm_count"));
    hw.gpu.fp8_non_tn_gemm = g.opt_bool("fp8_non_tn_gemm").value_or(false);
    hw.gpu.source = g.get_string("source");
    g.allow("tdp_w");
    g.finish();
  }
  {
    YamlMap n = y.get_map("node");
    hw.node.gpus_per_node = static_cast<int>(n.get_int("gpus_per_node"));
    hw.node.nvlink_domain_gpus =
        static_cast<int>(n.opt_int("nvlink_domain_gpus").value_or(hw.node.gpus_per_node));
    if (hw.node.nvlink_domain_gpus < hw.node.gpus_per_node)
      n.fail("nvlink_domain_gpus", fmt::format("must be >= gpus_per_node ({}), got {}",
                                               hw.node.gpus_per_node, hw.node.nvlink_domain_gpus));
    hw.node.nvlink_domain_job_gpus =
        static_cast<int>(n.opt_int("nvlink_domain_job_gpus").value_or(hw.node.nvlink_domain_gpus));
    if (hw.node.nvlink_domain_job_gpus > hw.node.nvlink_domain_gpus ||
        hw.node.nvlink_domain_job_gpus < hw.node.gpus_per_node ||
        hw.node.nvlink_domain_job_gpus % hw.node.gpus_per_node != 0)
      n.fail("nvlink_domain_job_gpus",
             fmt::format("must be a multiple of gpus_per_node ({}) between it and "
                         "nvlink_domain_gpus ({}), got {}",
                         hw.node.gpus_per_node, hw.node.nvlink_domain_gpus,
                         hw.node.nvlink_domain_job_gpus));
    hw.node.fabric = n.get_enum("fabric", {"nvswitch", "nvlink-mesh", "pcie"});
    hw.node.nvlink_gbps_per_direction = n.get_double_in("nvlink_gbps_per_direction", 0.01, 1e6);
    hw.node.latency_us = n.get_double("latency_us", 0, true);
    hw.node.source = n.get_string("source");
    n.finish();
  }
  {
    YamlMap s = y.get_map("scale_out");
    hw.scale_out.nics_per_node = static_cast<int>(s.get_int("nics_per_node", 0));
    hw.scale_out.nic_gbps = s.get_double_in("nic_gbps", 0, 1e5);  // 0: no scale-out network
    if (hw.scale_out.nic_gbps > 0 && hw.scale_out.nic_gbps < 0.001)
      s.fail("nic_gbps", fmt::format("must be 0 (no network) or at least 0.001, got {:g}",
                                     hw.scale_out.nic_gbps));
    hw.scale_out.latency_us = s.get_double("latency_us", 0, true);
    hw.scale_out.topology = s.get_enum("topology", {"rail-optimized-fat-tree", "fat-tree"});
    hw.scale_out.oversubscription = s.opt_double("oversubscription", 1.0, true).value_or(1.0);
    hw.scale_out.source = s.get_string("source");
    s.finish();
  }
  if (auto h = y.opt_map("host")) {
    hw.host.memory_gib = h->get_double_in("memory_gib", 0.1, 1e7);
    hw.host.pcie_gbps_per_gpu = h->get_double_in("pcie_gbps_per_gpu", 0.01, 1e4);
    hw.host.gpus_per_uplink = static_cast<int>(h->opt_int("gpus_per_uplink").value_or(1));
    if (hw.node.gpus_per_node > 0 && hw.host.gpus_per_uplink > hw.node.gpus_per_node)
      h->fail("gpus_per_uplink", fmt::format("must be at most gpus_per_node ({}), got {}",
                                             hw.node.gpus_per_node, hw.host.gpus_per_uplink));
    hw.host.source = h->get_string("source");
    h->finish();
  }
  if (auto s = y.opt_map("storage")) {
    hw.checkpoint_write_gbps_per_node =
        s->get_double_in("checkpoint_write_gbps_per_node", 0.001, 1e6);
    hw.storage_source = s->get_string("source");
    s->finish();
  }
  if (auto r = y.opt_map("reliability")) {
    hw.mtbf_per_gpu_hours = r->get_double_in("mtbf_per_gpu_hours", 1, 1e12);
    hw.reliability_source = r->get_string("source");
    r->finish();
  }
  if (auto p = y.opt_map("price")) {
    hw.usd_per_gpu_hour = p->get_double("usd_per_gpu_hour", 0);
    hw.price_source = p->get_string("source");
    p->finish();
  }
  {
    YamlMap e = y.get_map("efficiency");
    EfficiencyParams& ef = hw.efficiency;
    auto fraction = [&](const char* key) {
      double v = e.get_double(key, 0);
      if (v > 1.0) e.fail(key, fmt::format("is a fraction and must be <= 1, got {}", v));
      return v;
    };
    ef.gemm_max_fraction = fraction("gemm_max_fraction");
    ef.gemm_half_saturation_gflop = e.get_double("gemm_half_saturation_gflop", 0, true);
    auto opt_fraction = [&](const char* key, double fallback) {
      const std::optional<double> v = e.opt_double(key, 0);
      if (v && (*v <= 0 || *v > 1.0))
        e.fail(key, fmt::format("is a fraction and must be in (0, 1], got {}", *v));
      return v.value_or(fallback);
    };
    ef.gemm_max_fraction_fp8 = opt_fraction("gemm_max_fraction_fp8", ef.gemm_max_fraction);
    ef.gemm_half_saturation_gflop_fp8 =
        e.opt_double("gemm_half_saturation_gflop_fp8", 0).value_or(ef.gemm_half_saturation_gflop);
    ef.gemm_max_fraction_mxfp8 = opt_fraction("gemm_max_fraction_mxfp8", ef.gemm_max_fraction_fp8);
    ef.gemm_half_saturation_gflop_mxfp8 = e.opt_double("gemm_half_saturation_gflop_mxfp8", 0)
                                              .value_or(ef.gemm_half_saturation_gflop_fp8);
    ef.attention_fwd_max_fraction =
        opt_fraction("attention_fwd_max_fraction", ef.gemm_max_fraction);
    ef.attention_bwd_max_fraction =
        opt_fraction("attention_bwd_max_fraction", ef.gemm_max_fraction);
    ef.attention_fwd_half_seq = e.opt_double("attention_fwd_half_seq", 0).value_or(0);
    ef.attention_bwd_half_seq = e.opt_double("attention_bwd_half_seq", 0).value_or(0);
    if (auto ks = e.opt_map("attention_kernels")) {
      if (!ks->node().IsMap()) ks->fail_here("expected a map of kernel name -> curve");
      for (const auto& kv : ks->node()) {
        const std::string name = kv.first.as<std::string>();
        YamlMap k = ks->get_map(name);
        EfficiencyParams::AttentionCurve c;
        c.kernel = name;
        auto frac = [&](const char* key) {
          const double v = k.get_double(key, 0);
          if (v > 1.0) k.fail(key, fmt::format("is a fraction and must be <= 1, got {}", v));
          return v;
        };
        c.fwd_max_fraction = frac("fwd_max_fraction");
        c.fwd_half_seq = k.get_double("fwd_half_seq", 0, true);
        c.bwd_max_fraction = frac("bwd_max_fraction");
        c.bwd_half_seq = k.get_double("bwd_half_seq", 0, true);
        k.finish();
        ef.attention_kernels.push_back(c);
      }
    }
    ef.gemm_tile_m = static_cast<int>(e.get_int("gemm_tile_m"));
    ef.gemm_tile_n = static_cast<int>(e.get_int("gemm_tile_n"));
    ef.sustained_compute_fraction = opt_fraction("sustained_compute_fraction", 1.0);
    ef.memory_bw_fraction = fraction("memory_bw_fraction");
    ef.nvlink_bw_fraction = fraction("nvlink_bw_fraction");
    ef.network_bw_fraction = fraction("network_bw_fraction");
    ef.host_dispatch_us = e.get_double("host_dispatch_us", 0, true);
    ef.collective_overhead_us = e.get_double("collective_overhead_us", 0, true);
    ef.comm_compute_slowdown = e.get_double("comm_compute_slowdown", 0, true);
    if (ef.comm_compute_slowdown >= 1.0) e.fail("comm_compute_slowdown", "must be < 1");
    ef.status =
        e.opt_enum("status", {"fitted", "copied", "partial", "initial"}).value_or("initial");
    ef.source = e.get_string("source");
    e.finish();
  }
  if (auto in = y.opt_map("inference")) {
    InferenceParams& ip = hw.inference;
    auto fraction = [&](const char* key, double fallback) {
      const std::optional<double> v = in->opt_double(key, 0);
      if (v && *v > 1.0) in->fail(key, fmt::format("is a fraction and must be <= 1, got {}", *v));
      return v.value_or(fallback);
    };
    ip.decode_bw_fraction = fraction("decode_bw_fraction", ip.decode_bw_fraction);
    ip.decode_compute_fraction = fraction("decode_compute_fraction", ip.decode_compute_fraction);
    ip.prefill_compute_fraction = fraction("prefill_compute_fraction", ip.prefill_compute_fraction);
    ip.step_overhead_us = in->opt_double("step_overhead_us", 0, true).value_or(ip.step_overhead_us);
    ip.layer_overhead_us =
        in->opt_double("layer_overhead_us", 0, true).value_or(ip.layer_overhead_us);
    ip.tp_allreduce_us = in->opt_double("tp_allreduce_us", 0, true).value_or(ip.tp_allreduce_us);
    ip.eager_layer_overhead_us =
        in->opt_double("eager_layer_overhead_us", 0, true).value_or(ip.eager_layer_overhead_us);
    ip.weight_load_gbps = in->opt_double("weight_load_gbps", 0).value_or(ip.weight_load_gbps);
    ip.source = in->get_string("source");
    in->finish();
  }
  if (auto c = y.opt_map("calibration")) {
    if (auto pv = c->opt_map("provenance")) {
      auto& p = hw.calibration.provenance;
      p.source = pv->get_string("source");
      p.date = pv->opt_string("date").value_or("");
      p.device = pv->opt_string("device").value_or("");
      p.tool = pv->opt_string("tool").value_or("");
      p.software = pv->opt_string("software").value_or("");
      pv->finish();
    } else {
      c->fail("provenance",
              "a calibration section needs provenance (source, date, device, tool, software)");
    }
    YAML::Node gemm = c->child("gemm");
    if (gemm.IsDefined() && !gemm.IsNull()) {
      if (!gemm.IsSequence())
        throw InputError(location_of(gemm, file), "calibration.gemm", "expected a list");
      size_t i = 0;
      for (const auto& item : gemm) {
        YamlMap g(item, file, fmt::format("calibration.gemm[{}]", i++));
        GemmMeasurement gm;
        auto prec = g.get_string("precision");
        auto p = parse_precision(prec);
        if (!p) g.fail("precision", fmt::format("unknown precision '{}'", prec));
        gm.precision = *p;
        gm.m = g.get_int("m");
        gm.n = g.get_int("n");
        gm.k = g.get_int("k");
        gm.tflops = g.get_double("tflops", 0);
        g.finish();
        hw.calibration.gemm.push_back(gm);
      }
    }
    YAML::Node coll = c->child("collectives");
    if (coll.IsDefined() && !coll.IsNull()) {
      if (!coll.IsSequence())
        throw InputError(location_of(coll, file), "calibration.collectives", "expected a list");
      size_t i = 0;
      for (const auto& item : coll) {
        YamlMap t(item, file, fmt::format("calibration.collectives[{}]", i++));
        CollectiveTable tab;
        const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter",
                                              "all_to_all", "send_recv"};
        auto op = t.get_enum("op", ops);
        tab.op = static_cast<CollectiveOp>(std::find(ops.begin(), ops.end(), op) - ops.begin());
        tab.scope = t.get_enum("scope", {"intra_node", "inter_node"}) == "inter_node"
                        ? CommScope::kInterNode
                        : CommScope::kIntraNode;
        tab.group_size = static_cast<int>(t.get_int("group_size", 2));
        YAML::Node pts = t.child("points");
        if (!pts.IsDefined() || !pts.IsSequence() || pts.size() == 0)
          t.fail("points", "expected a non-empty list of [bytes, busbw_gbps] pairs");
        size_t j = 0;
        for (const auto& pt : pts) {
          std::string f = fmt::format("{}.points[{}]", t.field("points").c_str(), j++);
          if (!pt.IsSequence() || pt.size() != 2)
            throw InputError(location_of(pt, file), f, "expected a pair [bytes, busbw_gbps]");
          double bytes = scalar_double(pt[0], file, f);
          double bw = scalar_double(pt[1], file, f);
          if (bytes <= 0 || bw <= 0)
            throw InputError(location_of(pt, file), f, "bytes and bandwidth must be > 0");
          tab.points.emplace_back(bytes, bw);
        }
        std::sort(tab.points.begin(), tab.points.end());
        t.finish();
        hw.calibration.collectives.push_back(std::move(tab));
      }
    }
    if (auto fits = c->opt_map("fits")) read_fits(*fits, file, hw.calibration);
    c->finish();
  }
  y.finish();
  return hw;
}

HardwareProfile load_profile_file(const std::string& path) {
  return profile_from_yaml(load_yaml_file(path), path);
}

int Cluster::groups_used() const {
  int used = 0;
  for (int g = 0; g < static_cast<int>(groups.size()) && group_first_rank(g) < num_gpus; ++g)
    used = g + 1;
  return used;
}

int Cluster::group_first_rank(int g) const {
  int64_t r = 0;
  for (int k = 0; k < g && k < static_cast<int>(groups.size()); ++k)
    r += int64_t{groups[static_cast<size_t>(k)].nodes} *
         groups[static_cast<size_t>(k)].profile.node.gpus_per_node;
  return static_cast<int>(std::min<int64_t>(r, num_gpus));
}

namespace {

HardwareProfile profile_named_in(YamlMap& y, const std::string& path,
                                 std::string (*resolve_profile)(const std::string&)) {
  std::string prof = y.get_string("profile");
  // A relative path that is not found from the current directory: from the cluster file's.
  if (prof.find('/') != std::string::npos && !prof.starts_with("/")) {
    std::error_code ec;
    const auto beside = std::filesystem::path(path).parent_path() / prof;
    if (!std::filesystem::exists(prof, ec) && std::filesystem::exists(beside, ec))
      prof = beside.string();
  }
  try {
    return load_profile_file(resolve_profile(prof));
  } catch (const InputError& e) {
    if (e.location().file.empty() || e.location().line == 0) {
      // The profile name itself was not found: point at this file's `profile:` line.
      y.fail("profile", e.reason());
    }
    const SourceLocation ref = location_of(y.child("profile"), path);
    throw InputError(e.location(), e.field(),
                     fmt::format("{} (profile named at {})", e.reason(), ref.to_string()));
  }
}

}  // namespace

Cluster load_cluster_file(const std::string& path,
                          std::string (*resolve_profile)(const std::string&)) {
  YAML::Node root = load_yaml_file(path);
  YamlMap y(root, path, "");
  y.allow("name");
  y.allow("description");
  Cluster c;
  int64_t total = 0;
  if (y.node().IsMap() && y.node()["groups"].IsDefined()) {
    // Device groups: [{profile, nodes}, ...] instead of one profile and a node count.
    if (y.node()["profile"].IsDefined() || y.node()["nodes"].IsDefined())
      y.fail("groups", "give either groups (heterogeneous nodes) or profile and nodes, not both");
    const YAML::Node list = y.child("groups");
    if (!list.IsSequence() || list.size() == 0)
      y.fail("groups", "expected a list of {profile, nodes} entries");
    if (list.size() > static_cast<size_t>(kMaxDeviceGroups))
      y.fail("groups", fmt::format("at most {} device groups are modelled, {} given",
                                   kMaxDeviceGroups, list.size()));
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string field = fmt::format("groups[{}]", k);
      if (!list[k].IsMap())
        throw InputError(location_of(list[k], path), field, "expected a map {profile, nodes}");
      YamlMap g(list[k], path, field);
      g.allow("name");
      DeviceGroup d;
      d.profile = profile_named_in(g, path, resolve_profile);
      const int64_t nodes = g.get_int("nodes");
      if (nodes > 1000000) g.fail("nodes", "at most 1,000,000 nodes per group are modelled");
      d.nodes = static_cast<int>(nodes);
      g.finish();
      const int gpn = d.profile.node.gpus_per_node;
      if (!c.groups.empty() && gpn != c.groups.front().profile.node.gpus_per_node)
        g.fail("profile", fmt::format("{} has {} GPUs per node, the first group's {} has {}: the "
                                      "groups of one cluster must have the same GPUs per node",
                                      d.profile.name, gpn, c.groups.front().profile.name,
                                      c.groups.front().profile.node.gpus_per_node));
      total += nodes * gpn;
      c.groups.push_back(std::move(d));
    }
    c.profile = c.groups.front().profile;
  } else {
    c.profile = profile_named_in(y, path, resolve_profile);
    total = y.get_int("nodes") * c.profile.node.gpus_per_node;
  }
  auto gpus = y.opt_int("gpus");
  {
    ClusterServices sv = default_services(c.profile);
    read_services(y, sv);
    if (y.has("storage") || y.has("reliability") || y.has("restart") || y.has("data"))
      c.services = sv;
  }
  y.finish();
  if (total > (int64_t{1} << 30))
    y.fail(c.groups.empty() ? "nodes" : "groups", "more than 2^30 GPUs");
  if (gpus && *gpus > total)
    y.fail("gpus",
           c.groups.empty()
               ? fmt::format("{} GPUs do not fit on {} nodes of {}", *gpus,
                             total / c.profile.node.gpus_per_node, c.profile.node.gpus_per_node)
               : fmt::format("{} GPUs do not fit on the groups' {} GPUs", *gpus, total));
  c.num_gpus = static_cast<int>(gpus.value_or(total));
  c.file = path;
  return c;
}

}  // namespace dtplan
