#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/error.h"

namespace dtplan {

namespace {

namespace fs = std::filesystem;

// Temporaries in flight, for the signal handlers: fixed slots of plain characters, so the
// handler touches no allocator (unlink and rmdir are async-signal-safe).
constexpr size_t kSlots = 64, kPathMax = 4096;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 a file, 3 a folder
  char path[kPathMax];
};
std::array<Slot, kSlots> g_slots;

int track(const std::string& path, int kind) {
  if (path.size() >= kPathMax) return -1;
  for (size_t i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(kind);
      return static_cast<int>(i);
    }
  }
  return -1;  // more than kSlots at once: not tracked (the error paths still clean up)
}

void untrack(int slot) {
  if (slot >= 0) g_slots[static_cast<size_t>(slot)].state.store(0);
}

extern "C" void on_signal(int sig) {
  // Files first, then the (by then empty) staging folders.
  for (auto& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
  for (auto& s : g_slots)
    if (s.state.load() == 3) ::rmdir(s.path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

mode_t umasked(unsigned mode) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(mode) & ~mask;
}

// Writes `content` to a new exclusive temporary in `dir` named after `name`; returns its path
// (tracked in `slot`). Throws InputError on `report` (the user's path).
std::string write_temp(const fs::path& dir, const std::string& name, const std::string& content,
                       unsigned mode, const std::string& report, int& slot) {
  std::string tmpl = (dir / fmt::format(".{}.tmp.XXXXXX", name)).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw InputError({report, 0, 0}, "", fmt::format("cannot write: {}", std::strerror(errno)));
  slot = track(tmpl, 2);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    untrack(slot);
    slot = -1;
    return InputError({report, 0, 0}, "", why);
  };
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw fail(fmt::format("write failed: {}", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, umasked(mode)) != 0 || ::fsync(fd) != 0)
    throw fail(fmt::format("write failed: {}", std::strerror(errno)));
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    untrack(slot);
    slot = -1;
    throw InputError({report, 0, 0}, "", fmt::format("write failed: {}", why));
  }
  return tmpl;
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void install_cleanup_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_signal);
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, unsigned mode)
    : path_(path), mode_(mode) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (path.empty() || !target.has_filename())
    throw InputError({path, 0, 0}, "", "no file name given");
  if (fs::is_directory(target, ec))
    throw InputError({path, 0, 0}, "", "is a folder; give a file name");
  if (!fs::is_directory(dir, ec))
    throw InputError({path, 0, 0}, "", fmt::format("folder '{}' does not exist", dir.string()));
  dir_ = dir.string();
  buffer_.reserve(1 << 20);  // before the temporary exists: nothing to leak if it throws
  // The template mkstemp(3) fills in: its six X's become a unique random suffix.
  tmp_ = (dir / fmt::format(".{}.tmp.XXXXXX", target.filename().string())).string();
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0)
    throw InputError({path, 0, 0}, "", fmt::format("cannot write: {}", std::strerror(errno)));
  tmp_exists_ = true;
  slot_ = track(tmp_, 2);
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  if (tmp_exists_) ::unlink(tmp_.c_str());
  fd_ = -1;
  tmp_exists_ = false;
  untrack(slot_);
  slot_ = -1;
}

void AtomicFileWriter::write_out(std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      discard();
      throw InputError({path_, 0, 0}, "", fmt::format("write failed: {}", why));
    }
    done += static_cast<size_t>(n);
  }
  written_ += data.size();
}

void AtomicFileWriter::flush_buffer() {
  write_out(buffer_);
  buffer_.clear();
}

void AtomicFileWriter::write(std::string_view data) {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter: write after commit or failure");
  if (buffer_.size() + data.size() > (1u << 20)) flush_buffer();
  if (data.size() > (1u << 20)) {
    write_out(data);  // a large piece goes straight to the file
    return;
  }
  buffer_.append(data);
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter: commit after commit or failure");
  flush_buffer();
  // The descriptor is closed whatever fails first; the first failure is the one reported.
  int err = ::fchmod(fd_, umasked(mode_)) != 0 || ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  if (err != 0) {
    discard();
    throw InputError({path_, 0, 0}, "", fmt::format("write failed: {}", std::strerror(err)));
  }
  // rename(2) replaces a symlink at `path` itself, never the file it points to.
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    discard();
    throw InputError({path_, 0, 0}, "", fmt::format("cannot replace file: {}", why));
  }
  tmp_exists_ = false;
  untrack(slot_);
  slot_ = -1;
  fsync_dir(dir_);
}

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode) {
  AtomicFileWriter out(path, mode);
  out.write(content);
  out.commit();
}

std::string write_files_atomic(const std::string& dir, const std::vector<OutputFile>& files) {
  fs::path out(dir);
  while (!out.empty() && !out.has_filename()) out = out.parent_path();  // "run/" -> "run"
  if (out.empty()) throw InputError({dir, 0, 0}, "", "no folder name given");
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(out, ec));
  if (exists && !fs::is_directory(fs::symlink_status(out, ec)))
    throw InputError({dir, 0, 0}, "", "exists and is not a folder");
  fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) throw InputError({dir, 0, 0}, "", fmt::format("cannot create: {}", ec.message()));
  }
  // What the old folder holds besides the set: regular files are carried over (hard links, the
  // same data); anything else means the set cannot be swapped in one step.
  std::vector<std::string> carried;
  bool swappable = true;
  if (exists) {
    for (const auto& e : fs::directory_iterator(out, ec)) {
      const std::string name = e.path().filename().string();
      bool ours = false;
      for (const auto& f : files) ours |= f.name == name;
      if (ours) continue;
      if (e.symlink_status(ec).type() == fs::file_type::regular)
        carried.push_back(name);
      else
        swappable = false;
    }
    if (ec) throw InputError({dir, 0, 0}, "", fmt::format("cannot list: {}", ec.message()));
  }
  if (!swappable) {
    for (const auto& f : files)
      write_file_atomic((out / f.name).string(), f.content, f.executable ? 0777 : 0666);
    return fmt::format(
        "{} holds folders or links besides the launch files, so each file was "
        "replaced on its own (not the set in one step)",
        dir);
  }
  std::string stage_tmpl =
      (parent / fmt::format(".{}.stage.XXXXXX", out.filename().string())).string();
  if (!::mkdtemp(stage_tmpl.data()))
    throw InputError({dir, 0, 0}, "", fmt::format("cannot create: {}", std::strerror(errno)));
  const fs::path stage(stage_tmpl);
  const int stage_slot = track(stage_tmpl, 3);
  std::vector<int> slots;
  auto cleanup = [&] {
    for (const auto& e : fs::directory_iterator(stage, ec)) ::unlink(e.path().c_str());
    for (int s : slots) untrack(s);
    ::rmdir(stage.c_str());
    untrack(stage_slot);
  };
  try {
    for (const auto& f : files) {
      int slot = -1;
      const std::string tmp =
          write_temp(stage, f.name, f.content, f.executable ? 0777 : 0666, dir, slot);
      slots.push_back(slot);
      if (::rename(tmp.c_str(), (stage / f.name).c_str()) != 0)
        throw InputError({dir, 0, 0}, "", fmt::format("cannot write: {}", std::strerror(errno)));
      // The name changed: the signal handler must now remove the final one.
      untrack(slot);
      slots.back() = track((stage / f.name).string(), 2);
    }
    for (const auto& name : carried) {
      if (::link((out / name).c_str(), (stage / name).c_str()) != 0)
        throw InputError(
            {(out / name).string(), 0, 0}, "",
            fmt::format("cannot keep beside the new launch files: {}", std::strerror(errno)));
      slots.push_back(track((stage / name).string(), 2));  // a second name, safe to remove
    }
    fsync_dir(stage);
    if (!exists) {
      if (::rename(stage.c_str(), out.c_str()) != 0)
        throw InputError({dir, 0, 0}, "", fmt::format("cannot create: {}", std::strerror(errno)));
    } else if (::renameat2(AT_FDCWD, stage.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
      throw InputError(
          {dir, 0, 0}, "",
          fmt::format("cannot replace the folder in one step: {}", std::strerror(errno)));
    }
  } catch (...) {
    cleanup();
    throw;
  }
  for (int s : slots) untrack(s);
  untrack(stage_slot);
  if (exists) {
    // `stage` now names the old folder: its files are the old set and links to the kept ones.
    for (const auto& e : fs::directory_iterator(stage, ec)) ::unlink(e.path().c_str());
    ::rmdir(stage.c_str());
  }
  fsync_dir(parent);
  return "";
}

}  // namespace dtplan
