// gsym/base/file_io: opening files anyone may have planted, and outputs that are
// never written through someone else's path.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/unit/test_files.h"
#include "gsym/base/file_io.h"

namespace fs = std::filesystem;

namespace {

struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("file_io_test") {}
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A pid that is certainly not running: a child that exited and was reaped.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("file_io: only regular files open, and a FIFO never blocks") {
  TempDir tmp;
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
  auto fifo = gsym::open_regular_file(tmp / "fifo");  // would block without O_NONBLOCK
  REQUIRE_FALSE(fifo.ok());
  CHECK(fifo.error().message == tmp / "fifo" + ": not a regular file");
  CHECK(gsym::open_regular_file(tmp.path).error().message == tmp.path + ": is a directory");
  CHECK(gsym::open_regular_file("/dev/zero").error().message == "/dev/zero: not a regular file");
  CHECK(gsym::open_regular_file(tmp / "none").error().message ==
        tmp / "none" + ": cannot open: No such file or directory");

  spit(tmp / "file", "abc");
  fs::create_symlink(tmp / "file", tmp / "link");
  auto followed = gsym::open_regular_file(tmp / "link");
  REQUIRE(followed.ok());
  CHECK((::fcntl(followed->fd.get(), F_GETFL) & O_NONBLOCK) == 0);  // reads block again
  CHECK(gsym::open_regular_file(tmp / "link", gsym::Symlinks::RefuseFinal).error().message ==
        tmp / "link" + ": is a symlink (not followed)");
}

TEST_CASE("file_io: errors are coded where they start, whatever their text") {
  TempDir tmp;
  using gsym::ErrorCode;
  gsym::Error missing = gsym::open_regular_file(tmp / "none").error();
  CHECK(missing.code == ErrorCode::NotFound);
  CHECK(missing.sys_errno == ENOENT);
  spit(tmp / "file", "abc");
  CHECK(gsym::open_regular_file(tmp / "file/below").error().code == ErrorCode::NotFound);  // ENOTDIR
  CHECK(missing.code == gsym::ErrorCode::NotFound);
  CHECK(gsym::open_regular_file(tmp.path).error().code == ErrorCode::Refused);
  CHECK(gsym::open_regular_file("/dev/zero").error().code == ErrorCode::Refused);
  fs::create_symlink(tmp / "file", tmp / "link");
  gsym::Error link = gsym::open_regular_file(tmp / "link", gsym::Symlinks::RefuseFinal).error();
  CHECK(link.code == ErrorCode::Refused);
  CHECK(link.sys_errno == ELOOP);
  gsym::Error large = gsym::read_file_bytes(tmp / "file", 2).error();
  CHECK(large.code == ErrorCode::Refused);
  CHECK(large.message == tmp / "file" + ": file too large (3 bytes, limit 2)");
  // A label-less read names nothing: the caller does.
  auto opened = gsym::open_regular_file(tmp / "file");
  REQUIRE(opened.ok());
  CHECK(gsym::read_descriptor(opened->fd.get(), 2, "").error().message == "file too large (3 bytes, limit 2)");
  gsym::Error unwritable = gsym::write_file_atomically(tmp / "no/such/dir/out", std::string_view("x")).error();
  CHECK(unwritable.code == ErrorCode::NotFound);
  CHECK(unwritable.message.starts_with(tmp / "no/such/dir/out: "));
  if (::geteuid() != 0) {  // root opens any file
    spit(tmp / "private", "x");
    ::chmod((tmp / "private").c_str(), 0);
    gsym::Error denied = gsym::open_regular_file(tmp / "private").error();
    CHECK(denied.code == ErrorCode::Io);
    CHECK(denied.sys_errno == EACCES);
  }
}

TEST_CASE("error: codes, their names, prefixes and offsets") {
  using gsym::Error;
  using gsym::ErrorCode;
  CHECK(Error("plain").code == ErrorCode::Unspecified);
  CHECK(Error("at a byte", 0x1c).code == ErrorCode::Malformed);  // an offset means malformed input
  CHECK(Error("at a byte", 0x1c).to_string() == "at a byte at offset 0x1c");
  CHECK(Error("no offset", Error::kNoOffset).code == ErrorCode::Unspecified);
  CHECK(Error(ErrorCode::Unsupported, "version 9", 4).code == ErrorCode::Unsupported);
  CHECK(Error::from_errno(ENOENT, "x").code == ErrorCode::NotFound);
  CHECK(Error::from_errno(ENOTDIR, "x").code == ErrorCode::NotFound);
  CHECK(Error::from_errno(EIO, "x").code == ErrorCode::Io);
  Error inner = Error::from_errno(EACCES, "denied");
  inner.offset = 8;
  Error outer = inner.prefixed("file: ");
  CHECK(outer.message == "file: denied");
  CHECK(outer.code == ErrorCode::Io);
  CHECK(outer.sys_errno == EACCES);
  CHECK(outer.offset == 8);
  for (ErrorCode code : {ErrorCode::Unspecified, ErrorCode::NotFound, ErrorCode::Io, ErrorCode::Refused,
                         ErrorCode::Malformed, ErrorCode::Unsupported, ErrorCode::NoFunctions})
    CHECK(gsym::error_code_from_name(gsym::to_string(code)) == code);
  CHECK(gsym::to_string(ErrorCode::NoFunctions) == "no-functions");
  CHECK_FALSE(gsym::error_code_from_name("absent").has_value());
}

TEST_CASE("file_io: paths inside another root stay inside it") {
  TempDir tmp;
  fs::create_directories(tmp / "root/usr/lib");
  spit(tmp / "root/usr/lib/libx.so", "inside");
  // An absolute symlink means the root's own /usr/lib, not the host's.
  fs::create_symlink("/usr/lib/libx.so", tmp / "root/usr/lib/liby.so");
  fs::create_symlink("/../../../etc/passwd", tmp / "root/usr/lib/escape");
  gsym::FileDescriptor root(::open((tmp / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(root.valid());
  auto y = gsym::open_regular_file_in_root(root.get(), "/usr/lib/liby.so", "liby");
  REQUIRE(y.ok());
  auto bytes = gsym::read_descriptor(y->fd.get(), 100, "liby");
  REQUIRE(bytes.ok());
  CHECK(std::string(bytes->begin(), bytes->end()) == "inside");
  // ".." at the root stays at the root: there is no /etc/passwd inside.
  CHECK_FALSE(gsym::open_regular_file_in_root(root.get(), "/usr/lib/escape", "escape").ok());
}

TEST_CASE("file_io: whole-file reads have a limit") {
  TempDir tmp;
  spit(tmp / "f", std::string(100, 'x'));
  CHECK(gsym::read_file_text(tmp / "f", 100).ok());
  CHECK(gsym::read_file_text(tmp / "f", 99).error().message ==
        tmp / "f" + ": file too large (100 bytes, limit 99)");
}

TEST_CASE("file_io: an output copied from a descriptor is all of it, from offset 0, atomically") {
  TempDir tmp;
  // A memfd, as a child conversion leaves its GSYM, read to its end already.
  gsym::FileDescriptor source(::memfd_create("source", MFD_CLOEXEC));
  REQUIRE(source.valid());
  const std::string text(3 << 20, 'g');  // beyond one copy's pipe-sized chunks
  REQUIRE(::write(source.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  spit(tmp / "out", "older");
  gsym::FileDescriptor dir(::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(gsym::write_file_atomically_at(dir.get(), tmp.path, "out", source.get(), 0600).ok());
  CHECK(slurp(tmp / "out") == text);
  CHECK(names_in(tmp.path) == std::vector<std::string>{"out"});  // no temporaries
  struct stat st {};
  REQUIRE(::stat((tmp / "out").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("file_io: an output replaces a symlink instead of writing through it") {
  TempDir tmp;
  spit(tmp / "victim", "precious");
  fs::create_symlink(tmp / "victim", tmp / "out");
  REQUIRE(gsym::write_file_atomically(tmp / "out", std::string_view("folded\n")).ok());
  CHECK(slurp(tmp / "victim") == "precious");
  CHECK(fs::is_regular_file(fs::symlink_status(tmp / "out")));
  CHECK(slurp(tmp / "out") == "folded\n");
  CHECK(names_in(tmp.path) == std::vector<std::string>{"out", "victim"});  // no temporaries
}

TEST_CASE("file_io: outputs refuse devices, FIFOs and directories; special names still work") {
  TempDir tmp;
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
  fs::create_directory(tmp / "dir");
  CHECK(gsym::write_file_atomically(tmp / "fifo", std::string_view("x")).error().message ==
        tmp / "fifo" + ": not a regular file (refusing to replace it)");
  CHECK(gsym::write_file_atomically(tmp / "dir", std::string_view("x")).error().message ==
        tmp / "dir" + ": is a directory");
  CHECK(gsym::write_file_atomically("/dev/full", std::string_view("x")).error().message ==
        "/dev/full: not a regular file (refusing to replace it)");
  CHECK(gsym::write_file_atomically("/dev/null", std::string_view("x")).ok());
  CHECK(fs::is_character_file("/dev/null"));

  // /dev/fd/N and /proc/self/fd/N: the open descriptor itself.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  REQUIRE(gsym::write_file_atomically("/dev/fd/" + std::to_string(pipe_fds[1]), std::string_view("ab")).ok());
  REQUIRE(gsym::write_file_atomically("/proc/self/fd/" + std::to_string(pipe_fds[1]),
                                      std::string_view("c")).ok());
  char buffer[8] = {};
  CHECK(::read(pipe_fds[0], buffer, sizeof buffer) == 3);
  CHECK(std::string(buffer) == "abc");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  CHECK(names_in(tmp.path) == std::vector<std::string>{"dir", "fifo"});
}

TEST_CASE("file_io: outputs are created with the mode asked, cut by the umask") {
  TempDir tmp;
  const mode_t old = ::umask(022);
  REQUIRE(gsym::write_file_atomically(tmp / "a", std::string_view("x")).ok());
  REQUIRE(gsym::write_file_atomically(tmp / "b", std::string_view("x"), 0600).ok());
  ::umask(old);
  struct stat st {};
  REQUIRE(::stat((tmp / "a").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  REQUIRE(::stat((tmp / "b").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("file_io: temporaries a killed run left behind are removed, live ones kept") {
  TempDir tmp;
  const std::string stale = ".out.gsymprof-tmp." + std::to_string(dead_pid()) + ".0";
  const std::string live = ".out.gsymprof-tmp." + std::to_string(::getppid()) + ".0";
  const std::string other = ".other.gsymprof-tmp." + std::to_string(dead_pid()) + ".0";
  spit(tmp / stale, "half");
  spit(tmp / live, "half");
  spit(tmp / other, "half");
  REQUIRE(gsym::write_file_atomically(tmp / "out", std::string_view("x")).ok());
  CHECK(names_in(tmp.path) == std::vector<std::string>{other, live, "out"});
}

TEST_CASE("file_io: another user's symlink in the output directory is not followed") {
  if (::geteuid() != 0) return;  // needs lchown
  TempDir tmp;
  fs::create_directory(tmp / "target");
  fs::create_directory_symlink(tmp / "target", tmp / "mine");
  fs::create_directory_symlink(tmp / "target", tmp / "theirs");
  REQUIRE(::lchown((tmp / "theirs").c_str(), 65534, 65534) == 0);
  CHECK(gsym::write_file_atomically(tmp / "mine/a", std::string_view("x")).ok());
  auto refused = gsym::write_file_atomically(tmp / "theirs/b", std::string_view("x"));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        tmp / "theirs/b: theirs is a symlink owned by uid 65534 (not followed for output)");
  CHECK(names_in(tmp / "target") == std::vector<std::string>{"a"});
}

TEST_CASE("file_io: who could have written a file") {
  struct stat st {};
  st.st_uid = 0;
  st.st_mode = S_IFREG | 0644;
  CHECK(gsym::writable_only_by_us(st));
  st.st_mode = S_IFREG | 0664;
  CHECK_FALSE(gsym::writable_only_by_us(st));
  st.st_mode = S_IFREG | 0646;
  CHECK_FALSE(gsym::writable_only_by_us(st));
  st.st_mode = S_IFREG | 0755;
  st.st_uid = ::geteuid() == 0 ? 1000 : ::geteuid() + 1;
  CHECK_FALSE(gsym::writable_only_by_us(st));
  st.st_uid = ::geteuid();
  CHECK(gsym::writable_only_by_us(st));
}
