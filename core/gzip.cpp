#include "core/gzip.h"

#include <zlib.h>

#include <algorithm>
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

struct GzipStream::State {
  z_stream zs{};
  std::string out = std::string(1 << 16, '\0');
  bool finished = false;
};

GzipStream::GzipStream(std::function<void(std::string_view)> sink)
    : s_(std::make_unique<State>()), sink_(std::move(sink)) {
  if (deflateInit2(&s_->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
}

GzipStream::~GzipStream() { deflateEnd(&s_->zs); }

void GzipStream::pump(int flush) {
  for (;;) {
    s_->zs.next_out = reinterpret_cast<Bytef*>(s_->out.data());
    s_->zs.avail_out = static_cast<uInt>(s_->out.size());
    const int rc = deflate(&s_->zs, flush);
    if (rc == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
    const size_t n = s_->out.size() - s_->zs.avail_out;
    if (n > 0) sink_(std::string_view(s_->out.data(), n));
    if (flush == Z_FINISH ? rc == Z_STREAM_END : s_->zs.avail_out != 0) return;
  }
}

void GzipStream::write(std::string_view data) {
  if (s_->finished) throw std::logic_error("GzipStream: write after finish");
  while (!data.empty()) {
    const size_t piece = std::min<size_t>(data.size(), 1u << 30);
    s_->zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    s_->zs.avail_in = static_cast<uInt>(piece);
    pump(Z_NO_FLUSH);
    data.remove_prefix(piece);
  }
}

void GzipStream::finish() {
  if (s_->finished) return;
  s_->zs.avail_in = 0;
  pump(Z_FINISH);
  s_->finished = true;
}

}  // namespace dtplan
