// Writing outputs so that readers see either the old file (or set of files) or the complete new
// one, and nothing is left behind:
// - a file goes to a temporary file created exclusively (mkstemp: a random name, O_EXCL, so a
//   planted file or symlink cannot redirect it) in the same folder, is flushed to disk, and is
//   renamed over the target;
// - a set of files (launch) is written into a staging folder beside the output folder, which is
//   then renamed into place, or exchanged with the old folder in one step (renameat2
//   RENAME_EXCHANGE), so a kill at any moment leaves the old set or the new set;
// - temporaries are removed on every error path and, through install_cleanup_handlers(), on
//   SIGINT, SIGTERM and SIGHUP.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtplan {

// Throws InputError naming the path and the reason (folder missing, permission, disk full).
// `mode` as for open(2), less the umask.
void write_file_atomic(const std::string& path, const std::string& content, unsigned mode = 0666);

// A file written in pieces (a large trace), with write_file_atomic's guarantees: nothing at
// `path` changes until commit(); an object destroyed without commit() (an error, an
// exception) removes its temporary. Writes are buffered (1 MiB). Errors throw InputError
// naming the path.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path, unsigned mode = 0666);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(std::string_view data);
  void commit();
  uint64_t bytes_written() const { return written_ + buffer_.size(); }

 private:
  void flush_buffer();
  void write_out(std::string_view data);
  void discard() noexcept;
  std::string path_, dir_, tmp_;
  unsigned mode_;
  int fd_ = -1, slot_ = -1;
  bool tmp_exists_ = false;
  std::string buffer_;
  uint64_t written_ = 0;
};

struct OutputFile {
  std::string name;  // a plain file name inside the folder
  std::string content;
  bool executable = false;
};

// Writes `files` into folder `dir` as one set (see above). Files already in `dir` that the set
// does not name are kept. When `dir` holds something other than regular files (a logs/ folder
// from a run), the set cannot be swapped in one step: each file is then replaced atomically on
// its own, and the return value says so ("" when the set was written as one).
std::string write_files_atomic(const std::string& dir, const std::vector<OutputFile>& files);

// Installs handlers that remove the temporaries in flight, then let the signal end the process.
void install_cleanup_handlers();

}  // namespace dtplan
