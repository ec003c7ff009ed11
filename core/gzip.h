// gzip (RFC 1952) of a byte string, through zlib: for outputs a viewer opens compressed
// (simulate --trace FILE.json.gz: Perfetto's trace processor reads gzip'd traces,
// google/perfetto src/trace_processor/importers/archive/gzip_trace_parser.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dtplan {

// Throws std::runtime_error if zlib fails (out of memory).
std::string gzip(const std::string& data);

// The same, in pieces: compressed bytes go to `sink` as they come (a large trace streamed to
// disk). finish() writes the trailer; a stream destroyed before it leaves the output incomplete.
class GzipStream {
 public:
  explicit GzipStream(std::function<void(std::string_view)> sink);
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;
  void write(std::string_view data);
  void finish();

 private:
  void pump(int flush);
  struct State;
  std::unique_ptr<State> s_;
  std::function<void(std::string_view)> sink_;
};

}  // namespace dtplan
