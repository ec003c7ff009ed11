#include "core/byte_size.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace dtplan {

double parse_byte_size(std::string_view flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || !std::isfinite(v))
    throw InputError({}, std::string(flag),
                     fmt::format("'{}' is not a size (e.g. 4096, 1K, 256M, 16G)", text));
  const std::string unit = text.substr(used);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB") {
    mult = 1024.0;
  } else if (unit == "M" || unit == "MB" || unit == "MiB") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB" || unit == "GiB") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "T" || unit == "TB" || unit == "TiB") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else if (!unit.empty() && unit != "B") {
    throw InputError({}, std::string(flag),
                     fmt::format("unknown unit '{}' in '{}' (use B, K, M, G or T)", unit, text));
  }
  v *= mult;
  if (v < 1 || v > 1e15)
    throw InputError({}, std::string(flag),
                     fmt::format("'{}' is out of range (1 B to 1e15 B)", text));
  if (v != std::floor(v))
    throw InputError({}, std::string(flag),
                     fmt::format("'{}' is not a whole number of bytes", text));
  return v;
}

}  // namespace dtplan
