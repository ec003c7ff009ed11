// Recorded measurements the `replay` backend reads (docs/calibration.md):
//  - a dtplan journal (JSON lines, as `dtplan calibrate` writes);
//  - a CSV with the header `kind,precision,m,n,k,op,scope,group_size,bytes,time_us`
//    (fields that do not apply left empty);
//  - an nccl-tests `-J` JSON report: the collective from the program name in `args`, the group
//    size from `config.devices` x threads x GPUs, the scope from the distinct host names, the
//    out-of-place time per size (in-place when out-of-place is null).
#pragma once

#include <string>
#include <vector>

#include "calibrate/task.h"

namespace dtplan::calibrate {

struct Recorded {
  Measurement measurement;
  double stated_busbw_gbps = 0;  // nccl-tests' own bus_bw (0 when the file has none)
  std::string device;            // when the file names it
  std::string software;
};

// Reads any of the formats above (chosen by content). Throws InputError naming file:line.
std::vector<Recorded> read_recorded(const std::string& path);

}  // namespace dtplan::calibrate
