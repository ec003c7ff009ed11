#include "core/atomic_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dtplan {

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (path.empty() || !target.has_filename())
    throw InputError({path, 0, 0}, "", "no file name given");
  if (fs::is_directory(target, ec))
    throw InputError({path, 0, 0}, "", "is a folder; give a file name");
  if (!fs::is_directory(dir, ec))
    throw InputError({path, 0, 0}, "", fmt::format("folder '{}' does not exist", dir.string()));
  fs::path tmp = dir / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError({path, 0, 0}, "", fmt::format("cannot write: {}", std::strerror(errno)));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      throw InputError({path, 0, 0}, "", "write failed (disk full?)");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();  // before remove() reuses ec
    fs::remove(tmp, ec);
    throw InputError({path, 0, 0}, "", fmt::format("cannot replace file: {}", why));
  }
}

}  // namespace dtplan
