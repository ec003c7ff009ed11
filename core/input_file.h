// Reading an input file whole, safely: it must be a regular file (a FIFO would block, a device
// such as /dev/zero grow forever) of at most max_input_bytes(), which `--max-input-mib` raises.
#pragma once

#include <cstdint>
#include <string>

namespace dtplan {

// The largest input file dtplan reads, in bytes (default 256 MiB; `--max-input-mib`).
int64_t max_input_bytes();
void set_max_input_bytes(int64_t bytes);

// The file's bytes. Throws InputError on `path` (and `field`, the flag that named it, if any)
// when it is missing, not a regular file, larger than max_input_bytes() or unreadable.
std::string read_input_file(const std::string& path, const std::string& field = "");

}  // namespace dtplan
