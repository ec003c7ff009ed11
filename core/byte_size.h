// Message and buffer sizes as users type them: "4096", "350e9", "1K", "256M", "16G", "1T",
// "64MiB" (K, M, G, T are powers of 1024, as nccl-tests' -b/-e read them; an optional B).
#pragma once

#include <string>
#include <string_view>

namespace dtplan {

// Whole bytes in [1, 1e15]; throws InputError naming `flag` (a number that is not finite, an
// unknown unit, a fraction of a byte, out of range).
double parse_byte_size(std::string_view flag, const std::string& text);

}  // namespace dtplan
