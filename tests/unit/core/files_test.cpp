// Input files (core/input_file.h) and atomic outputs (core/atomic_file.h), issue #21: a FIFO or a
// device is refused without blocking or growing, a file over the limit is refused, outputs
// replace a symlink rather than write through it, leave no temporaries, keep the user's mode
// bits, and a set of files replaces the old set in one step.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"

namespace dtplan {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("dtplan_files_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string reason_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Only the named entries, nothing hidden (no temporaries left behind).
std::vector<std::string> entries(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(InputFile, RefusesWhatIsNotARegularFile) {
  const fs::path d = fresh_dir("input");
  const fs::path fifo = d / "pipe.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Returns at once: a FIFO with no writer would block open() for reading.
  EXPECT_NE(reason_of([&] { read_input_file(fifo.string()); }).find("is a FIFO"),
            std::string::npos);
  EXPECT_NE(reason_of([] {
              read_input_file("/dev/zero", "--model");
            }).find("--model: is a character device"),
            std::string::npos);
  EXPECT_NE(reason_of([&] { read_input_file(d.string()); }).find("is a folder"), std::string::npos);
  EXPECT_NE(
      reason_of([&] { read_input_file((d / "missing.yaml").string()); }).find("file not found"),
      std::string::npos);
}

TEST(InputFile, RefusesAFileOverTheLimit) {
  const fs::path d = fresh_dir("limit");
  const fs::path big = d / "big.json";
  std::ofstream(big) << std::string(3 << 20, ' ');  // 3 MiB
  const int64_t old = max_input_bytes();
  set_max_input_bytes(int64_t{2} << 20);
  const std::string why = reason_of([&] { read_input_file(big.string(), "--from"); });
  set_max_input_bytes(old);
  EXPECT_NE(why.find("--from: is 3.0 MiB, above the 2 MiB input limit (--max-input-mib"),
            std::string::npos)
      << why;
  EXPECT_EQ(read_input_file(big.string()).size(), size_t{3} << 20);
}

TEST(AtomicFile, ReplacesASymlinkInsteadOfWritingThroughIt) {
  const fs::path d = fresh_dir("symlink");
  const fs::path victim = d / "victim.txt";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, d / "out.md");
  write_file_atomic((d / "out.md").string(), "report");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(d / "out.md"));
  EXPECT_EQ(slurp(d / "out.md"), "report");
  EXPECT_EQ(entries(d), (std::vector<std::string>{"out.md", "victim.txt"}));
}

TEST(AtomicFile, ModeFollowsTheUmask) {
  const fs::path d = fresh_dir("mode");
  const mode_t old = ::umask(022);
  write_file_atomic((d / "a.txt").string(), "x");
  write_file_atomic((d / "b.sh").string(), "x", 0777);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat((d / "a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat((d / "b.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

TEST(AtomicFile, ErrorsLeaveNothingBehind) {
  const fs::path d = fresh_dir("errors");
  EXPECT_NE(reason_of([&] {
              write_file_atomic((d / "no/such/folder/x").string(), "x");
            }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(reason_of([&] { write_file_atomic(d.string(), "x"); }).find("is a folder"),
            std::string::npos);
  EXPECT_TRUE(entries(d).empty());
}

// A file written in pieces (simulate's streamed trace): the old content stays until commit(),
// pieces larger and smaller than the 1 MiB buffer arrive in order, and an unfinished writer
// (an exception on the way) leaves the old file and no temporary.
TEST(AtomicFileWriter, WritesInPiecesAndCommitsOnce) {
  const fs::path d = fresh_dir("writer");
  const std::string path = (d / "trace.json").string();
  write_file_atomic(path, "old");
  std::string expected;
  {
    AtomicFileWriter w(path);
    for (int i = 0; i < 5000; ++i) {
      const std::string piece = std::to_string(i) + ",";
      w.write(piece);
      expected += piece;
    }
    const std::string big(3u << 20, 'x');  // over the buffer: written through
    w.write(big);
    expected += big;
    w.write("end");
    expected += "end";
    EXPECT_EQ(slurp(path), "old");  // nothing replaced before commit()
    EXPECT_EQ(w.bytes_written(), expected.size());
    w.commit();
  }
  EXPECT_EQ(slurp(path), expected);
  EXPECT_EQ(entries(d), std::vector<std::string>{"trace.json"});
  try {
    AtomicFileWriter w(path);
    w.write(std::string(2u << 20, 'y'));
    throw std::runtime_error("the trace writer failed half-way");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(slurp(path), expected);
  EXPECT_EQ(entries(d), std::vector<std::string>{"trace.json"});
}

TEST(AtomicFileSet, NewFolderAndReplacementInOneStep) {
  const fs::path d = fresh_dir("set");
  const fs::path out = d / "run";
  EXPECT_EQ(write_files_atomic(out.string(), {{"a.txt", "old a", false}, {"b.sh", "old b", true}}),
            "");
  EXPECT_EQ(entries(out), (std::vector<std::string>{"a.txt", "b.sh"}));
  std::ofstream(out / "notes.txt") << "mine";  // a user's file in the folder is kept
  EXPECT_EQ(write_files_atomic(out.string(), {{"a.txt", "new a", false}, {"b.sh", "new b", true}}),
            "");
  EXPECT_EQ(slurp(out / "a.txt"), "new a");
  EXPECT_EQ(slurp(out / "b.sh"), "new b");
  EXPECT_EQ(slurp(out / "notes.txt"), "mine");
  EXPECT_EQ(::access((out / "b.sh").c_str(), X_OK), 0);
  // Nothing else: no staging folder beside it, no temporaries inside.
  EXPECT_EQ(entries(d), (std::vector<std::string>{"run"}));
  EXPECT_EQ(entries(out), (std::vector<std::string>{"a.txt", "b.sh", "notes.txt"}));
}

TEST(AtomicFileSet, AFolderInsideFallsBackToFileByFile) {
  const fs::path d = fresh_dir("fallback");
  const fs::path out = d / "run";
  fs::create_directories(out / "logs");
  std::ofstream(out / "logs" / "job.out") << "log";
  const std::string how = write_files_atomic(out.string(), {{"a.txt", "a", false}});
  EXPECT_NE(how.find("each file was replaced on its own"), std::string::npos) << how;
  EXPECT_EQ(slurp(out / "a.txt"), "a");
  EXPECT_EQ(slurp(out / "logs" / "job.out"), "log");
  EXPECT_EQ(entries(out), (std::vector<std::string>{"a.txt", "logs"}));
  EXPECT_NE(reason_of([&] {
              write_files_atomic((out / "a.txt").string(), {{"x", "x", false}});
            }).find("exists and is not a folder"),
            std::string::npos);
}

}  // namespace
}  // namespace dtplan
