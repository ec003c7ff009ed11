#include "core/gzip.h"

#include <zlib.h>

#include <stdexcept>

namespace dtplan {

std::string gzip(const std::string& data) {
  if (data.size() > 0xffffffffu) throw std::runtime_error("gzip: more than 4 GiB in one piece");
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's (zlib.h, deflateInit2).
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t written = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  out.resize(written);
  return out;
}

}  // namespace dtplan
