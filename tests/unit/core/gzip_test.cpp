// gzip() against zlib's own inflate (an independent decoder): the RFC 1952 magic, and the bytes
// back exactly, for empty, small, binary and large inputs.
#include "core/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

namespace dtplan {
namespace {

std::string gunzip(const std::string& z) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);  // gzip only
  std::string out;
  char buf[1 << 14];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  zs.avail_in = static_cast<uInt>(z.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

// The streaming compressor (simulate --trace FILE.json.gz) gives a stream zlib's inflate
// decodes back to the pieces, whatever their sizes.
TEST(Gzip, StreamRoundTripsThroughZlibInflate) {
  std::string whole, z;
  GzipStream gz([&](std::string_view piece) { z += piece; });
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string piece(rng() % 4000, '\0');
    for (char& c : piece) c = static_cast<char>("abcdefgh{}:,\"\n"[rng() % 14]);
    gz.write(piece);
    whole += piece;
  }
  gz.finish();
  EXPECT_EQ(gunzip(z), whole);
  EXPECT_LT(z.size(), whole.size());
  std::string empty;
  GzipStream none([&](std::string_view piece) { empty += piece; });
  none.finish();
  EXPECT_EQ(gunzip(empty), "");
}

TEST(Gzip, RoundTripsThroughZlibInflate) {
  std::mt19937 rng(7);
  std::string binary(100000, '\0');
  for (char& c : binary) c = static_cast<char>(rng());
  std::string json;
  for (int i = 0; i < 200000; ++i) json += "{\"ph\":\"X\",\"name\":\"F1.0\",\"ts\":1.5},\n";
  for (const std::string& in : {std::string(), std::string("x"), binary, json}) {
    const std::string z = gzip(in);
    ASSERT_GE(z.size(), 18u);  // header (10) + trailer (8)
    EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(z[1]), 0x8b);
    EXPECT_EQ(gunzip(z), in);
  }
  EXPECT_LT(gzip(json).size(), json.size() / 20);  // repetitive text compresses
}

}  // namespace
}  // namespace dtplan
