#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gsym/base/file_io.h"
#include "tests/unit/test_files.h"
#include "userspace/symbolize/child_conversion.h"
#include "userspace/symbolize/gsym_locator.h"

using namespace gsymprof;

namespace {

struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("child_conversion_test") {}
};

void compile(const std::string& out, const std::string& source, const std::string& flags = "") {
  std::ofstream(out + ".c") << source;
  const std::string command = "cc -O1 -g " + flags + " -Wl,--build-id=0xc0ffee01 -o " + out + " " + out + ".c 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
}

constexpr const char* kSource =
    "static inline int inner(int x) { return x * 7; }\n"
    "int outer(int x) { return inner(x) + 1; }\n"
    "int main(int argc, char** argv) { (void)argv; return outer(argc); }\n";

gsym::FileDescriptor open_read_only(const std::string& path) {
  gsym::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd.valid());
  return fd;
}

// A child program that does not convert: a shell script.
std::string script(const TempDir& tmp, const std::string& name, const std::string& body) {
  const std::string path = tmp / name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
  return path;
}

// The agent's locator (conversions in a child, however small the input;
// no lookup indexes), caching in `cache_dir` ("" = nothing on disk).
LocatorOptions child_locator_options(const std::string& cache_dir) {
  LocatorOptions options;
  options.cache_dir = cache_dir;
  options.convert.threads = 1;
  options.convert_in_child = true;
  options.child_min_input_bytes = 0;
  options.lookup_indexes = false;
  return options;
}

// The reader answers a lookup of its first function's start.
void check_first_function_answers(const gsym::Reader& reader) {
  auto found = reader.lookup(reader.function_start(0));
  REQUIRE(found.ok());
  CHECK(found->has_value());
}

}  // namespace

TEST_CASE("child conversion: the same GSYM and statistics as in process, input by descriptor") {
  TempDir tmp;
  compile(tmp / "app", kSource);
  gsym::ConvertOptions options;
  options.threads = 1;
  options.plt_names = options.code_labels = options.entry_name = options.signal_frames = true;
  options.known_as = tmp / "app";
  gsym::ConvertStats in_process_stats, child_stats;
  auto in_process = gsym::convert_elf(tmp / "app", options, &in_process_stats);
  REQUIRE(in_process.ok());
  gsym::FileDescriptor fd = open_read_only(tmp / "app");
  // The path is gone: the child reads the descriptor it was given.
  REQUIRE(::unlink((tmp / "app").c_str()) == 0);
  auto in_child = convert_elf_in_child(fd.get(), options, &child_stats);
  REQUIRE(in_child.ok());
  CHECK(in_child->size == in_process->size());
  auto child_bytes = in_child->read();  // left in the child's memfd until read
  REQUIRE(child_bytes.ok());
  CHECK(*child_bytes == *in_process);
  CHECK(child_stats.compile_units == in_process_stats.compile_units);
  CHECK(child_stats.compile_units == 1);
  CHECK(child_stats.inputs_writable_only_by_us == in_process_stats.inputs_writable_only_by_us);
  CHECK(child_stats.debug_file_used == "");
}

TEST_CASE("child conversion: a failed conversion's error, with its kind, as in process") {
  TempDir tmp;
  compile(tmp / "empty.so", "", "-shared -nostdlib");
  gsym::ConvertOptions options;
  options.known_as = tmp / "empty.so";
  options.debug_directories.clear();
  gsym::FileDescriptor fd = open_read_only(tmp / "empty.so");
  auto in_process = gsym::convert_elf(tmp / "empty.so", options, nullptr);
  auto in_child = convert_elf_in_child(fd.get(), options, nullptr);
  REQUIRE_FALSE(in_process.ok());
  REQUIRE_FALSE(in_child.ok());
  CHECK(in_child.error().code == gsym::ErrorCode::NoFunctions);
  CHECK(in_child.error().message == in_process.error().message);
}

TEST_CASE("child conversion: a child that hangs is killed at the timeout, one that dies is an error") {
  TempDir tmp;
  compile(tmp / "app", kSource);
  gsym::FileDescriptor fd = open_read_only(tmp / "app");
  gsym::ConvertOptions options;
  options.known_as = tmp / "app";
  ChildConversionOptions child;
  child.timeout = std::chrono::milliseconds(300);

  child.program = script(tmp, "hang", "exec sleep 30");
  const auto start = std::chrono::steady_clock::now();
  auto hung = convert_elf_in_child(fd.get(), options, nullptr, child);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE_FALSE(hung.ok());
  CHECK(hung.error().message == "conversion timed out after 300 ms (killed)");

  child.program = script(tmp, "crash", "kill -SEGV $$");
  auto crashed = convert_elf_in_child(fd.get(), options, nullptr, child);
  REQUIRE_FALSE(crashed.ok());
  CHECK(crashed.error().message.starts_with(tmp / "app" + ": conversion process killed by signal 11"));

  child.program = script(tmp, "fails", "exit 3");
  auto failed = convert_elf_in_child(fd.get(), options, nullptr, child);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message == tmp / "app" + ": conversion process exited with status 3");

  // Exits 0 without a report: nothing to believe.
  child.program = script(tmp, "silent", "exit 0");
  auto silent = convert_elf_in_child(fd.get(), options, nullptr, child);
  REQUIRE_FALSE(silent.ok());
  CHECK(silent.error().message == tmp / "app" + ": conversion process: no report");
}

TEST_CASE("locator: the agent's options convert in a child, cache, and serve it mapped from the cache") {
  TempDir tmp;
  compile(tmp / "app", kSource);
  GsymLocator locator(child_locator_options(tmp / "cache"));
  ModuleReport report;
  const BuildId id = *BuildId::from_hex("c0ffee01");
  const gsym::Reader* reader = locator.locate(id, tmp / "app", report);
  REQUIRE(reader != nullptr);
  CHECK(report.origin == GsymOrigin::Converted);
  CHECK(report.gsym_path == tmp / "cache/c0ffee01.c5.gsym");
  CHECK(BuildId(reader->build_id()) == id);
  // Served from the cache file, not a heap copy of the child's output, and
  // without a lookup index: no heap at all.
  CHECK(locator.reader_memory_bytes() == 0);
  check_first_function_answers(*reader);
}

TEST_CASE("locator: a child's GSYM not cached is read into memory and served from there") {
  TempDir tmp;
  compile(tmp / "app", kSource);
  GsymLocator locator(child_locator_options(""));  // nothing on disk: kept in memory
  ModuleReport report;
  const BuildId id = *BuildId::from_hex("c0ffee01");
  const gsym::Reader* reader = locator.locate(id, tmp / "app", report);
  REQUIRE(reader != nullptr);
  CHECK(report.origin == GsymOrigin::Converted);
  CHECK(report.gsym_path == "");
  CHECK(locator.reader_memory_bytes() == reader->bytes().size());  // the bytes, held
  check_first_function_answers(*reader);
}

TEST_CASE("locator: an input small on disk but large decompressed converts in a child") {
  TempDir tmp;
  compile(tmp / "plain", kSource);
  const std::string compress = "objcopy --compress-debug-sections=zlib " + tmp / "plain" + " " + tmp / "app";
  REQUIRE(std::system(compress.c_str()) == 0);
  struct stat compressed {};
  REQUIRE(::stat((tmp / "app").c_str(), &compressed) == 0);
  LocatorOptions options;
  options.cache_dir = "";
  options.convert_in_child = true;
  // Above the file's size, below it with its debug sections inflated.
  options.child_min_input_bytes = static_cast<uint64_t>(compressed.st_size) + 1;
  // A child that only fails: its error says the conversion went to it.
  options.child.program = script(tmp, "fails", "exit 3");
  GsymLocator locator(options);
  ModuleReport report;
  CHECK(locator.locate(*BuildId::from_hex("c0ffee01"), tmp / "app", report) == nullptr);
  CHECK(report.reason.find("conversion process exited with status 3") != std::string::npos);

  // The same threshold past the whole inflated size: in process, converted.
  options.child_min_input_bytes = uint64_t{1} << 30;
  GsymLocator in_process(options);
  ModuleReport converted;
  CHECK(in_process.locate(*BuildId::from_hex("c0ffee01"), tmp / "app", converted) != nullptr);
  CHECK(converted.origin == GsymOrigin::Converted);
}
