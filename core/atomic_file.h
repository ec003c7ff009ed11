// Writes a whole file so that readers see either the old file or the complete new one:
// the content goes to a temporary file in the same folder, which is then renamed over `path`.
#pragma once

#include <string>

namespace dtplan {

// Throws InputError naming the path and the reason (folder missing, permission, disk full).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace dtplan
