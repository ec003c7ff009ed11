#include "calibrate/recorded.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibrate/journal.h"
#include "core/error.h"
#include "core/input_file.h"

namespace dtplan::calibrate {

using nlohmann::json;

namespace {

std::vector<Recorded> read_nccl_tests(const json& j, const std::string& path) {
  const SourceLocation loc{path, 0, 0};
  auto fail = [&](const std::string& field, const std::string& why) -> InputError {
    return InputError(loc, field, why);
  };
  if (!j.contains("args") || !j["args"].is_array() || j["args"].empty())
    throw fail("args", "an nccl-tests report names its program in args[0]");
  std::string prog = j["args"][0].get<std::string>();
  prog = prog.substr(prog.find_last_of('/') + 1);
  static const std::vector<std::pair<std::string, CollectiveOp>> progs = {
      {"all_reduce_perf", CollectiveOp::kAllReduce},
      {"all_gather_perf", CollectiveOp::kAllGather},
      {"reduce_scatter_perf", CollectiveOp::kReduceScatter},
      {"alltoall_perf", CollectiveOp::kAllToAll},
      {"sendrecv_perf", CollectiveOp::kSendRecv}};
  const auto it = std::find_if(progs.begin(), progs.end(),
                               [&](const auto& p) { return prog.rfind(p.first, 0) == 0; });
  if (it == progs.end())
    throw fail("args[0]", fmt::format("'{}' is not an nccl-tests program dtplan models "
                                      "(all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                                      "alltoall_perf, sendrecv_perf)",
                                      prog));
  const json cfg = j.value("config", json::object());
  const json devices = cfg.value("devices", json::array());
  if (!devices.is_array() || devices.empty())
    throw fail("config.devices", "the report lists no devices (ranks)");
  // Threads and GPUs per process: integers in [1, 1024], checked before any conversion (a
  // floating number out of int range cast by nlohmann is undefined; found by fuzz_recorded).
  auto count = [&](const char* key) {
    const json v = cfg.value(key, json(1));
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024)
      throw fail(fmt::format("config.{}", key), "expected an integer from 1 to 1024");
    return static_cast<int>(v.get<int64_t>());
  };
  const int per_proc = count("nthreads") * count("ngpus");
  const int n = static_cast<int>(devices.size()) * per_proc;
  std::set<std::string> hosts;
  for (const auto& d : devices) hosts.insert(d.value("hostname", ""));
  const std::string device = devices[0].value("device_info", "");
  const std::string software =
      j.contains("nccl_version") ? fmt::format("NCCL {}", j["nccl_version"].dump()) : "";
  if (!j.contains("results") || !j["results"].is_array())
    throw fail("results", "expected the list of per-size results");
  std::vector<Recorded> out;
  size_t i = 0;
  for (const auto& r : j["results"]) {
    const std::string f = fmt::format("results[{}]", i++);
    const json* body = nullptr;
    if (r.contains("out_of_place") && r["out_of_place"].is_object()) {
      body = &r["out_of_place"];
    } else if (r.contains("in_place") && r["in_place"].is_object()) {
      body = &r["in_place"];
    } else {
      throw fail(f, "neither out_of_place nor in_place results");
    }
    // nccl-tests writes "nan" (a string) for a size it could not time; a measurement outside
    // [0.001, 1e11] us would fit to an out-of-range profile (the CSV reader's bounds).
    const char* key = body->contains("time") ? "time" : "cpu_time";
    const json& t = body->contains(key) ? body->at(key) : json();
    if (!t.is_number()) throw fail(f + "." + key, "must be a number of microseconds");
    const double us = t.get<double>();
    if (!(us >= 1e-3 && us <= 1e11))
      throw fail(f + "." + key, fmt::format("must lie in [0.001, 1e11] microseconds, got {}", us));
    if (!r.contains("size") || !r["size"].is_number_integer() || r["size"].get<int64_t>() < 1 ||
        r["size"].get<int64_t>() > int64_t{10'000'000'000'000})
      throw fail(f + ".size", "must be a whole number of bytes in [1, 1e13]");
    Recorded rec;
    Measurement& m = rec.measurement;
    m.task.kind = TaskKind::kCollective;
    m.task.op = it->second;
    m.task.group_size = n;
    m.task.scope = hosts.size() > 1 ? CommScope::kInterNode : CommScope::kIntraNode;
    m.task.bytes = r.at("size").get<int64_t>();
    m.time_s = us * 1e-6;
    m.algorithm = "nccl";
    rec.stated_busbw_gbps = body->value("bus_bw", 0.0);
    rec.device = device;
    rec.software = software;
    out.push_back(rec);
  }
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<Recorded> read_csv(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  int no = 0;
  std::vector<std::string> cols;
  std::vector<Recorded> out;
  const std::vector<std::string> want = {"kind", "precision", "m",          "n",     "k",
                                         "op",   "scope",     "group_size", "bytes", "time_us"};
  while (std::getline(in, line)) {
    ++no;
    if (line.empty() || line[0] == '#') continue;
    auto f = split_csv(line);
    if (cols.empty()) {
      cols = f;
      if (cols != want)
        throw InputError(
            SourceLocation{path, no, 1}, "",
            "expected the header kind,precision,m,n,k,op,scope,group_size,bytes,time_us");
      continue;
    }
    if (f.size() != cols.size())
      throw InputError(SourceLocation{path, no, 1}, "",
                       fmt::format("expected {} fields, found {}", cols.size(), f.size()));
    auto num = [&](size_t col) -> double {
      try {
        size_t pos = 0;
        double v = std::stod(f[col], &pos);
        if (pos == f[col].size()) return v;
      } catch (const std::exception&) {
      }
      throw InputError(SourceLocation{path, no, 1}, cols[col],
                       fmt::format("'{}' is not a number", f[col]));
    };
    // A count: a whole number in [lo, hi] (a double past 2^63 would not convert).
    auto count = [&](size_t col, double lo, double hi) -> int64_t {
      const double v = num(col);
      if (!(v >= lo && v <= hi) || v != std::floor(v))
        throw InputError(
            SourceLocation{path, no, 1}, cols[col],
            fmt::format("must be a whole number in [{:.0f}, {:.0f}], got {}", lo, hi, f[col]));
      return static_cast<int64_t>(v);
    };
    Recorded rec;
    Measurement& m = rec.measurement;
    if (f[0] == "gemm") {
      m.task.kind = TaskKind::kGemm;
      auto p = parse_precision(f[1]);
      if (!p) throw InputError(SourceLocation{path, no, 1}, "precision", "unknown precision");
      m.task.precision = *p;
      // GEMM sides up to 2^24, far past any layer's (hidden 2^20 is the model bound).
      m.task.m = count(2, 1, 1 << 24);
      m.task.n = count(3, 1, 1 << 24);
      m.task.k = count(4, 1, 1 << 24);
    } else if (f[0] == "collective") {
      m.task.kind = TaskKind::kCollective;
      if (!parse_collective_op(f[5], m.task.op))
        throw InputError(SourceLocation{path, no, 1}, "op",
                         fmt::format("unknown collective '{}'", f[5]));
      if (!parse_scope(f[6], m.task.scope))
        throw InputError(SourceLocation{path, no, 1}, "scope", "expected intra_node or inter_node");
      m.task.group_size = static_cast<int>(count(7, 2, 1 << 20));
      m.task.bytes = count(8, 1, 1e13);  // 10 TB: past any collective's buffer
    } else {
      throw InputError(SourceLocation{path, no, 1}, "kind",
                       fmt::format("expected gemm or collective, got '{}'", f[0]));
    }
    // A kernel takes at least a few nanoseconds (the launch alone is microseconds) and no
    // measurement of a sweep runs for days: [1e-3 us, 1e11 us] keeps the fits finite.
    const double us = num(9);
    if (!(us >= 1e-3 && us <= 1e11))
      throw InputError(SourceLocation{path, no, 1}, "time_us",
                       fmt::format("must lie in [0.001, 1e11] microseconds, got {}", f[9]));
    m.time_s = us * 1e-6;
    out.push_back(rec);
  }
  if (cols.empty()) throw InputError(SourceLocation{path, 0, 0}, "", "empty CSV file");
  return out;
}

}  // namespace

std::vector<Recorded> read_recorded(const std::string& path) {
  const std::string text = read_input_file(path, "--input");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    throw InputError(SourceLocation{path, 0, 0}, "--input", "the file is empty");
  if (text[first] == '{') {
    json whole = json::parse(text, nullptr, false);
    if (!whole.is_discarded() && whole.is_object() && whole.contains("results"))
      return read_nccl_tests(whole, path);
    // JSON lines: a dtplan journal (its header line is skipped).
    std::vector<Recorded> out;
    std::istringstream lines(text);
    std::string line;
    int no = 0;
    while (std::getline(lines, line)) {
      ++no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (line.find("\"dtplan_calibration_journal\"") != std::string::npos) continue;
      Recorded r;
      r.measurement = measurement_from_json_line(line, path, no);
      out.push_back(r);
    }
    return out;
  }
  return read_csv(text, path);
}

}  // namespace dtplan::calibrate
