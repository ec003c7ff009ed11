// Units used across dtplan. Names carry their unit as a suffix:
//   _s seconds, _us microseconds, _bytes bytes, _gib 2^30 bytes, _gb 1e9 bytes,
//   _gbps GB/s = 1e9 bytes/s (never Gb/s), _tflops 1e12 FLOP/s, _flop FLOP counts.
#pragma once

namespace dtplan::units {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // bytes in a GiB
inline constexpr double kGB = 1e9;                        // bytes in a GB
inline constexpr double kGBps = 1e9;                      // bytes/s in one GB/s
inline constexpr double kTflops = 1e12;                   // FLOP/s in one TFLOP/s
inline constexpr double kUs = 1e-6;                       // seconds in a microsecond
inline constexpr double kSecondsPerDay = 86400.0;

}  // namespace dtplan::units
