// gzip (RFC 1952) of a byte string, through zlib: for outputs a viewer opens compressed
// (simulate --trace FILE.json.gz: Perfetto's trace processor reads gzip'd traces,
// google/perfetto src/trace_processor/importers/archive/gzip_trace_parser.cc).
#pragma once

#include <string>

namespace dtplan {

// Throws std::runtime_error if zlib fails (out of memory).
std::string gzip(const std::string& data);

}  // namespace dtplan
