// The measurement journal: one JSON object per line, appended and flushed to disk (fsync) as
// each measurement completes, so a run killed at any point loses nothing it had measured and
// `--resume` carries on where it stopped. The first line records what run wrote it; a resume
// with a different backend or sweep is refused. A line torn by a kill mid-write is cut off.
// Re-measurements (the driver's second look at points its fit misses) carry
// "remeasured":true; the faster measurement of a task is the one kept.
//
// Line format (docs/calibration.md):
//   {"dtplan_calibration_journal":1,"run":"backend=cpu quick=1 ..."}
//   {"kind":"gemm","precision":"bf16","m":4096,"n":4096,"k":4096,"time_s":1.1e-3,"tflops":124.9}
//   {"kind":"collective","op":"all_reduce","scope":"intra_node","group_size":8,
//    "bytes":1048576,"time_s":2.1e-5,"algbw_gbps":49.9,"busbw_gbps":87.4,"algorithm":"ring"}
#pragma once

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "calibrate/task.h"

namespace dtplan::calibrate {

std::string to_json_line(const Measurement& m);
// Throws InputError naming file:line when the line is not a measurement.
Measurement measurement_from_json_line(const std::string& line, const std::string& file,
                                       int line_no);

class Journal {
 public:
  // resume = false: `path` must not exist (the error names --resume). resume = true: reads the
  // measurements already there; a missing file starts a new journal.
  Journal(const std::string& path, const std::string& run_signature, bool resume);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  const std::vector<Measurement>& existing() const { return existing_; }
  bool has(const std::string& key) const { return keys_.count(key) != 0; }
  // Written, flushed and fsynced before it returns. A re-measurement of a task already in the
  // journal is marked so; reading keeps the faster of the two.
  void append(const Measurement& m, bool remeasured = false);
  size_t torn_bytes() const { return torn_bytes_; }  // cut from a torn last line on resume
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::vector<Measurement> existing_;
  std::set<std::string> keys_;
  size_t torn_bytes_ = 0;
};

}  // namespace dtplan::calibrate
