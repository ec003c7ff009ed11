#include "calibrate/journal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"

namespace dtplan::calibrate {

using nlohmann::json;

std::string to_json_line(const Measurement& m) {
  json j;
  const Task& t = m.task;
  if (t.kind == TaskKind::kGemm) {
    j = {{"kind", "gemm"},
         {"precision", to_string(t.precision)},
         {"m", t.m},
         {"n", t.n},
         {"k", t.k},
         {"time_s", m.time_s},
         {"tflops", m.tflops()}};
  } else {
    j = {{"kind", "collective"},
         {"op", to_string(t.op)},
         {"scope", to_string(t.scope)},
         {"group_size", t.group_size},
         {"bytes", t.bytes},
         {"time_s", m.time_s},
         {"algbw_gbps", m.algbw_gbps()},
         {"busbw_gbps", m.busbw_gbps()},
         {"algorithm", m.algorithm}};
  }
  return j.dump();
}

Measurement measurement_from_json_line(const std::string& line, const std::string& file,
                                       int line_no) {
  const SourceLocation loc{file, line_no, 1};
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw InputError(loc, "", fmt::format("not a JSON measurement: {}", e.what()));
  }
  auto need = [&](const char* key) -> const json& {
    if (!j.is_object() || !j.contains(key))
      throw InputError(loc, key, "missing in this measurement");
    return j.at(key);
  };
  // Counts must be JSON integers: nlohmann casts a floating value to an integer field, undefined
  // out of range (found by fuzz_recorded, issue #21).
  auto count = [&](const char* key) -> int64_t {
    const json& v = need(key);
    if (!v.is_number_integer()) throw InputError(loc, key, "must be an integer");
    return v.get<int64_t>();
  };
  Measurement m;
  try {
    const std::string kind = need("kind").get<std::string>();
    if (kind == "gemm") {
      m.task.kind = TaskKind::kGemm;
      auto p = parse_precision(need("precision").get<std::string>());
      if (!p) throw InputError(loc, "precision", "unknown precision");
      m.task.precision = *p;
      m.task.m = count("m");
      m.task.n = count("n");
      m.task.k = count("k");
    } else if (kind == "collective") {
      m.task.kind = TaskKind::kCollective;
      if (!parse_collective_op(need("op").get<std::string>(), m.task.op))
        throw InputError(loc, "op", "unknown collective");
      if (!parse_scope(need("scope").get<std::string>(), m.task.scope))
        throw InputError(loc, "scope", "expected intra_node or inter_node");
      const int64_t group = count("group_size");
      if (group < 1 || group > (int64_t{1} << 24))
        throw InputError(loc, "group_size", "must be between 1 and 2^24 ranks");
      m.task.group_size = static_cast<int>(group);
      m.task.bytes = count("bytes");
      if (j.contains("algorithm")) m.algorithm = j.at("algorithm").get<std::string>();
    } else {
      throw InputError(loc, "kind", fmt::format("expected gemm or collective, got '{}'", kind));
    }
    m.time_s = need("time_s").get<double>();
  } catch (const json::exception& e) {
    throw InputError(loc, "", fmt::format("wrong type in measurement: {}", e.what()));
  }
  if (!(m.time_s > 0) || !std::isfinite(m.time_s))
    throw InputError(loc, "time_s", "must be a finite number > 0");
  if (m.task.kind == TaskKind::kGemm && (m.task.m < 1 || m.task.n < 1 || m.task.k < 1))
    throw InputError(loc,
                     m.task.m < 1   ? "m"
                     : m.task.n < 1 ? "n"
                                    : "k",
                     "GEMM dimensions must be >= 1");
  if (m.task.kind == TaskKind::kCollective && (m.task.group_size < 1 || m.task.bytes < 1))
    throw InputError(loc, m.task.group_size < 1 ? "group_size" : "bytes", "must be >= 1");
  // The rate written beside the time (tflops, algbw_gbps) restates it: a line whose numbers
  // disagree was changed after it was written (issue #21: a corrupted number used to be taken
  // silently). The writer prints both with full precision (nlohmann's round-trip doubles).
  auto agrees = [](double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); };
  const char* rate = m.task.kind == TaskKind::kGemm ? "tflops" : "algbw_gbps";
  if (j.contains(rate)) {
    const json& r = j.at(rate);
    const double stated = r.is_number() ? r.get<double>() : -1;
    const double implied = m.task.kind == TaskKind::kGemm ? m.tflops() : m.algbw_gbps();
    if (!agrees(stated, implied))
      throw InputError(
          loc, rate,
          fmt::format("{} is {} but the line's sizes and time_s give {}: the measurement was "
                      "changed after it was written; remove the line and rerun with --resume "
                      "to measure it again",
                      rate, r.dump(), implied));
  }
  return m;
}

Journal::Journal(const std::string& path, const std::string& run_signature, bool resume)
    : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (exists && !resume)
    throw InputError(SourceLocation{path, 0, 0}, "--resume",
                     "a calibration journal already exists here: pass --resume to continue that "
                     "run, or remove the file to start over");
  if (exists) {
    const std::string text = read_input_file(path, "--resume");
    // Everything after the last newline is a torn line from a kill mid-write: cut it off.
    const size_t end = text.rfind('\n');
    const size_t keep = end == std::string::npos ? 0 : end + 1;
    torn_bytes_ = text.size() - keep;
    std::istringstream lines(text.substr(0, keep));
    std::string line;
    int no = 0;
    while (std::getline(lines, line)) {
      ++no;
      if (no == 1) {
        json h;
        try {
          h = json::parse(line);
        } catch (const json::exception&) {
        }
        if (!h.is_object() || !h.contains("dtplan_calibration_journal"))
          throw InputError(SourceLocation{path, 1, 1}, "",
                           "not a dtplan calibration journal (first line is not its header)");
        // (A header whose "run" is not a string is not this run's; found by fuzz_journal.)
        const std::string was =
            h.contains("run") && h["run"].is_string() ? h["run"].get<std::string>() : "";
        if (was != run_signature)
          throw InputError(SourceLocation{path, 1, 1}, "--resume",
                           fmt::format("this journal was written by a different run ({}); this "
                                       "run is ({}): use the same flags, or another --journal",
                                       was, run_signature));
        continue;
      }
      Measurement m = measurement_from_json_line(line, path, no);
      if (keys_.insert(m.task.key()).second) {
        existing_.push_back(std::move(m));
      } else if (line.find("\"remeasured\":true") != std::string::npos) {
        // A second measurement of the same task: contention only adds time, keep the faster.
        for (auto& e : existing_)
          if (e.task.key() == m.task.key() && m.time_s < e.time_s) e = m;
      }
    }
    // Only once the journal is known to be this run's: cut the torn tail.
    if (torn_bytes_ > 0) fs::resize_file(path, keep, ec);
  }
  f_ = std::fopen(path.c_str(), "ab");
  if (!f_)
    throw InputError(SourceLocation{path, 0, 0}, "--journal",
                     fmt::format("cannot open for appending: {}", std::strerror(errno)));
  if (!exists || std::ftell(f_) == 0) {
    const std::string header =
        json{{"dtplan_calibration_journal", 1}, {"run", run_signature}}.dump() + "\n";
    std::fputs(header.c_str(), f_);
    std::fflush(f_);
    ::fsync(::fileno(f_));
  }
}

Journal::~Journal() {
  if (f_) std::fclose(f_);
}

void Journal::append(const Measurement& m, bool remeasured) {
  std::string line = to_json_line(m);
  if (remeasured) line.insert(line.size() - 1, ",\"remeasured\":true");
  line += "\n";
  if (std::fputs(line.c_str(), f_) < 0 || std::fflush(f_) != 0)
    throw InputError(SourceLocation{path_, 0, 0}, "--journal",
                     fmt::format("write failed: {}", std::strerror(errno)));
  ::fsync(::fileno(f_));
  keys_.insert(m.task.key());
}

}  // namespace dtplan::calibrate
