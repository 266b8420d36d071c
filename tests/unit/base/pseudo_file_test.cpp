#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "gsym/base/file_io.h"
#include "userspace/base/pseudo_file.h"

using gsymprof::read_pseudo_file;

// /proc files report st_size 0: a reader that trusts the size reads nothing
// (perf_map's NSpid lookup once did, live only).
TEST_CASE("read_pseudo_file reads /proc files whose size says 0") {
  const std::string path = "/proc/" + std::to_string(::getpid()) + "/status";
  gsym::Expected<std::string> text = read_pseudo_file(path, 1 << 20);
  REQUIRE(text);
  CHECK(text->starts_with("Name:"));
  CHECK(text->find("\nPid:\t" + std::to_string(::getpid()) + "\n") != std::string::npos);
}

TEST_CASE("read_pseudo_file: a missing file is NotFound, a large one refused") {
  gsym::Expected<std::string> gone = read_pseudo_file("/proc/0/stat", 4096);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == gsym::ErrorCode::NotFound);
  CHECK(gone.error().message.starts_with("/proc/0/stat: "));
  gsym::Expected<std::string> large = read_pseudo_file("/proc/self/maps", 8);
  REQUIRE_FALSE(large);
  CHECK(large.error().message == "/proc/self/maps: larger than 8 bytes");
}
