#include "core/input_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dtplan {

namespace {

std::atomic<int64_t> g_max_input_bytes{int64_t{256} << 20};

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

int64_t max_input_bytes() { return g_max_input_bytes.load(std::memory_order_relaxed); }
void set_max_input_bytes(int64_t bytes) {
  g_max_input_bytes.store(bytes, std::memory_order_relaxed);
}

std::string read_input_file(const std::string& path, const std::string& field) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError({path, 0, 0}, field,
                     errno == ENOENT ? std::string("file not found")
                                     : fmt::format("cannot be read: {}", std::strerror(errno)));
  // Checked before open(): opening a FIFO for reading blocks until a writer appears.
  if (!S_ISREG(st.st_mode))
    throw InputError({path, 0, 0}, field,
                     fmt::format("is {}, expected a regular file", kind_of(st.st_mode)));
  const int64_t limit = max_input_bytes();
  auto too_large = [&](int64_t size) {
    return InputError(
        {path, 0, 0}, field,
        fmt::format("is {:.1f} MiB, above the {:.0f} MiB input limit "
                    "(--max-input-mib raises it)",
                    static_cast<double>(size) / (1 << 20), static_cast<double>(limit) / (1 << 20)));
  };
  if (st.st_size > limit) throw too_large(st.st_size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw InputError({path, 0, 0}, field, fmt::format("cannot be read: {}", std::strerror(errno)));
  // The file might have been swapped between stat() and open(): check what was opened.
  struct stat ost {};
  if (::fstat(fd, &ost) != 0 || !S_ISREG(ost.st_mode)) {
    ::close(fd);
    throw InputError({path, 0, 0}, field, "is not a regular file");
  }
  std::string text;
  text.reserve(static_cast<size_t>(ost.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw InputError({path, 0, 0}, field, fmt::format("cannot be read: {}", why));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > limit) {  // grew while being read
      ::close(fd);
      throw too_large(static_cast<int64_t>(text.size()));
    }
  }
  ::close(fd);
  return text;
}

}  // namespace dtplan
