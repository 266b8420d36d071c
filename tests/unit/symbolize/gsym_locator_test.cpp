#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/test_files.h"
#include "gsym/builder/builder.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/gsym_prefetcher.h"

using namespace gsymprof;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("gsym_locator_test") {}
};

std::vector<uint8_t> gsym_bytes(const std::vector<uint8_t>& build_id, const std::string& function) {
  gsym::Builder builder;
  builder.set_build_id(build_id);
  gsym::Function fn;
  fn.range = {0x1000, 0x1100};
  fn.name = function;
  REQUIRE(builder.add_function(fn).ok());
  auto bytes = builder.encode();
  REQUIRE(bytes.ok());
  return *bytes;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// The name of the function covering 0x1000 in `reader`.
std::string name_at_0x1000(const gsym::Reader* reader) {
  REQUIRE(reader != nullptr);
  auto found = reader->lookup(0x1000);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  return std::string((*found)->frames.back().name);
}

const std::vector<uint8_t> kIdA = {0x0a, 0x0a};
const std::vector<uint8_t> kIdB = {0x0b, 0x0b};
const std::vector<uint8_t> kIdC = {0x0c, 0x0c};

// Compiles a C fixture with an explicit build ID ("none" for no note).
void compile_fixture(const std::string& out, const std::string& build_id, const std::string& source,
                     const std::string& flags = "") {
  std::string src = out + ".c";
  std::ofstream(src) << source;
  std::string cmd = "cc -O1 -g " + flags + " -Wl,--build-id=" + build_id + " -o " + out + " " +
                    src + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

constexpr const char* kFixtureSource =
    "int fixture_function(int x) { return x * 3 + 1; }\n"
    "int main(int argc, char** argv) { (void)argv; return fixture_function(argc); }\n";

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("locator: --gsym-dir files are indexed by header build ID, any name") {
  TempDir dir, dir2;
  write_bytes(dir / "whatever.gsym", gsym_bytes(kIdA, "a_in_dir1"));
  write_bytes(dir / "zz.gsym", gsym_bytes(kIdA, "a_duplicate"));
  write_bytes(dir / "x.gsym", gsym_bytes(kIdB, "b_in_dir1"));
  write_bytes(dir / "noid.gsym", gsym_bytes({}, "no_id"));
  std::ofstream(dir / "junk.gsym") << "not a gsym";
  write_bytes(dir / "c.gsym.txt", gsym_bytes(kIdC, "wrong_suffix"));
  fs::create_directory(dir / "sub");
  write_bytes(dir / "sub/c.gsym", gsym_bytes(kIdC, "not_recursive"));
  write_bytes(dir2 / "a.gsym", gsym_bytes(kIdA, "a_in_dir2"));

  LocatorOptions options;
  options.convert_missing = false;
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_dir(dir.path).ok());
  REQUIRE(locator.add_gsym_dir(dir2.path).ok());

  ModuleReport report;
  report.path = "/usr/bin/a";
  const gsym::Reader* a = locator.locate(BuildId(kIdA), "", report);
  CHECK(name_at_0x1000(a) == "a_in_dir1");
  CHECK(report.origin == GsymOrigin::GsymDir);
  CHECK(report.gsym_path == dir / "whatever.gsym");
  CHECK(report.reason == "");
  CHECK(describe(report) == "/usr/bin/a (build ID 0a0a): gsym-dir " + dir / "whatever.gsym");
  // Memoized: the same reader again.
  ModuleReport again;
  CHECK(locator.locate(BuildId(kIdA), "/elsewhere", again) == a);

  CHECK(name_at_0x1000(locator.locate(BuildId(kIdB), "", report)) == "b_in_dir1");
  CHECK(locator.locate(BuildId(kIdC), "", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 0c0c");

  std::vector<std::string> expected_notes = {
      "skipped " + dir / "junk.gsym" + ": " + gsym::Reader::parse(std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>("not a gsym"), 10)).error().to_string(),
      "skipped " + dir / "noid.gsym" + ": no build ID in its header",
      "skipped " + dir / "zz.gsym" + ": same build ID as " + dir / "whatever.gsym",
      "skipped " + dir2 / "a.gsym" + ": same build ID as " + dir / "whatever.gsym",
  };
  CHECK(locator.notes() == expected_notes);
}

TEST_CASE("locator: a missing --gsym-dir is an error naming it") {
  GsymLocator locator;
  gsym::Status status = locator.add_gsym_dir("/nonexistent/gsyms");
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "/nonexistent/gsyms: cannot open GSYM directory: No such file or directory");
}

TEST_CASE("locator: cache files are used only when their header build ID matches") {
  TempDir cache, dir;
  write_bytes(cache / "0a0a.c5.gsym", gsym_bytes(kIdA, "a_cached"));
  write_bytes(cache / "0b0b.c5.gsym", gsym_bytes(kIdC, "c_posing_as_b"));  // renamed file
  write_bytes(dir / "elsewhere.gsym", gsym_bytes(kIdC, "c_real"));
  fs::create_symlink(cache / "0a0a.c5.gsym", cache / "0d0d.c5.gsym");
  write_bytes(dir / "pref.gsym", gsym_bytes({0x0e}, "e_from_dir"));
  write_bytes(cache / "0e.c5.gsym", gsym_bytes({0x0e}, "e_from_cache"));

  LocatorOptions options;
  options.cache_dir = cache.path;
  options.convert_missing = false;
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_dir(dir.path).ok());
  ModuleReport report;
  CHECK(name_at_0x1000(locator.locate(BuildId(kIdA), "", report)) == "a_cached");
  CHECK(report.origin == GsymOrigin::Cache);
  CHECK(report.gsym_path == cache / "0a0a.c5.gsym");

  CHECK(locator.locate(BuildId(kIdB), "", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 0b0b");
  CHECK(locator.locate(*BuildId::from_hex("0d0d"), "", report) == nullptr);
  // The C file under B's name did not shadow the real one.
  CHECK(name_at_0x1000(locator.locate(BuildId(kIdC), "", report)) == "c_real");
  // --gsym-dir comes before the cache.
  CHECK(name_at_0x1000(locator.locate(*BuildId::from_hex("0e"), "", report)) == "e_from_dir");
  std::vector<std::string> expected_notes = {
      "skipped " + cache / "0b0b.c5.gsym" + ": build-ID mismatch (file has 0c0c)",
      "skipped " + cache / "0d0d.c5.gsym" + ": is a symlink (not followed)",
  };
  CHECK(locator.notes() == expected_notes);
}

TEST_CASE("locator: in-memory GSYMs") {
  GsymLocator locator;
  CHECK(locator.add_gsym_bytes(gsym_bytes(kIdA, "mem_a"), "a").ok());
  gsym::Status no_id = locator.add_gsym_bytes(gsym_bytes({}, "x"), "noid");
  REQUIRE_FALSE(no_id.ok());
  CHECK(no_id.error().message == "noid: no build ID in its header");
  CHECK_FALSE(locator.add_gsym_bytes({1, 2, 3}, "junk").ok());
  ModuleReport report;
  CHECK(name_at_0x1000(locator.locate(BuildId(kIdA), "", report)) == "mem_a");
  CHECK(report.origin == GsymOrigin::Memory);
  CHECK(locator.locate(BuildId(), "/bin/true", report) == nullptr);
  CHECK(report.reason == "no build ID");
}

TEST_CASE("locator: local files are converted only when their build ID matches") {
  TempDir tmp;
  compile_fixture(tmp / "other", "0x11223344", kFixtureSource);
  compile_fixture(tmp / "noid", "none", kFixtureSource);
  std::ofstream(tmp / "text") << "hello\n";
  LocatorOptions options;
  options.cache_dir = tmp / "cache";
  GsymLocator locator(options);
  ModuleReport report;
  BuildId id = *BuildId::from_hex("99887766");
  CHECK(locator.locate(id, tmp / "missing", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 99887766; file missing");
  CHECK(locator.locate(id, tmp / "other", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 99887766; build-ID mismatch (file has 11223344)");
  CHECK(locator.locate(id, tmp / "noid", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 99887766; build-ID mismatch (file has none)");
  CHECK(locator.locate(id, tmp / "text", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID 99887766; " + tmp / "text" + ": not an ELF file");
  CHECK(locator.conversions_attempted() == 0);
  CHECK_FALSE(fs::exists(tmp / "cache"));
}

TEST_CASE("locator: conversion result cached atomically, 0600 in a 0700 dir, reused") {
  TempDir tmp;
  compile_fixture(tmp / "app", "0xfeedface", kFixtureSource);
  BuildId id = *BuildId::from_hex("feedface");
  std::string cache = tmp / "cache/gsymprof";
  mode_t old_umask = ::umask(077);  // the cache must not depend on the umask
  {
    LocatorOptions options;
    options.cache_dir = cache;
    options.convert.threads = 1;
    GsymLocator locator(options);
    ModuleReport report;
    const gsym::Reader* reader = locator.locate(id, tmp / "app", report);
    REQUIRE(reader != nullptr);
    CHECK(report.origin == GsymOrigin::Converted);
    CHECK(report.gsym_path == cache + "/feedface.c5.gsym");
    CHECK(report.note == "");
    CHECK(BuildId(reader->build_id()) == id);
    CHECK(locator.conversions_attempted() == 1);
    ModuleReport again;
    CHECK(locator.locate(id, tmp / "app", again) == reader);
    CHECK(locator.conversions_attempted() == 1);
  }
  ::umask(old_umask);
  CHECK(mode_of(tmp / "cache") == 0755);  // like /var/cache
  CHECK(mode_of(cache) == 0700);          // holds symbols of root-only programs
  CHECK(mode_of(cache + "/feedface.c5.gsym") == 0600);
  CHECK(names_in(cache) == std::vector<std::string>{"feedface.c5.gsym"});  // no temp files left

  LocatorOptions options;
  options.cache_dir = cache;
  options.convert_missing = false;
  GsymLocator second(options);
  ModuleReport report;
  REQUIRE(second.locate(id, tmp / "app", report) != nullptr);
  CHECK(report.origin == GsymOrigin::Cache);
  CHECK(second.conversions_attempted() == 0);
}

TEST_CASE("locator: failed conversions are not retried") {
  TempDir tmp;
  // A shared object without any function: nothing to convert.
  compile_fixture(tmp / "empty.so", "0xe0e0e0e0", "", "-shared -nostdlib");
  LocatorOptions options;
  options.cache_dir = tmp / "cache";
  GsymLocator locator(options);
  BuildId id = *BuildId::from_hex("e0e0e0e0");
  ModuleReport first, second;
  CHECK(locator.locate(id, tmp / "empty.so", first) == nullptr);
  // No symbols, no DWARF, no debug file: a stripped file, not a failure.
  CHECK(first.reason == "no GSYM for build ID e0e0e0e0; stripped: no function symbols, no DWARF, no debug file found");
  CHECK(first.problem == ModuleProblem::Stripped);
  CHECK(locator.locate(id, tmp / "empty.so", second) == nullptr);
  CHECK(second == first);
  CHECK(locator.conversions_attempted() == 1);
  CHECK_FALSE(fs::exists(tmp / "cache/e0e0e0e0.c5.gsym"));
  // Remembered in the cache, with the converter version: the next run does
  // not retry either.
  CHECK(fs::exists(tmp / "cache/e0e0e0e0.c5.failed"));
  GsymLocator next_run(options);
  ModuleReport third;
  CHECK(next_run.locate(id, tmp / "empty.so", third) == nullptr);
  CHECK(third.reason.starts_with(first.reason));
  CHECK(third.reason.find("e0e0e0e0.c5.failed; delete it to retry") != std::string::npos);
  CHECK(next_run.conversions_attempted() == 0);

  // A debug file for the build ID appearing later (a -dbgsym package
  // installed) makes the next run try again.
  fs::create_directories(tmp / "debug/.build-id/e0");
  std::ofstream(tmp / "debug/.build-id/e0/e0e0e0.debug") << "not yet an ELF";
  options.convert.debug_directories = {tmp / "debug"};
  GsymLocator after_install(options);
  ModuleReport fourth;
  CHECK(after_install.locate(id, tmp / "empty.so", fourth) == nullptr);
  CHECK(after_install.conversions_attempted() == 1);
}

TEST_CASE("locator: a remembered failure keeps its kind; one without a kind is converted again") {
  TempDir tmp;
  compile_fixture(tmp / "empty.so", "0xe1e1e1e1", "", "-shared -nostdlib");
  LocatorOptions options;
  options.cache_dir = tmp / "cache";
  const BuildId id = *BuildId::from_hex("e1e1e1e1");
  const std::string failed = tmp / "cache/e1e1e1e1.c5.failed";
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  {
    GsymLocator first(options);
    ModuleReport report;
    CHECK(first.locate(id, tmp / "empty.so", report) == nullptr);
    CHECK(report.problem == ModuleProblem::Stripped);
  }
  // The error as it was said, then its code.
  const std::string written = slurp(failed);
  CHECK(written.starts_with(tmp / "empty.so: no functions found ("));
  CHECK(written.ends_with(")\nkind: no-functions\n"));

  // A file as written before kinds were kept (the message alone) is not
  // trusted: converted again once, and rewritten with its kind.
  std::ofstream(failed, std::ios::trunc) << written.substr(0, written.find('\n') + 1);
  GsymLocator second(options);
  ModuleReport again;
  CHECK(second.locate(id, tmp / "empty.so", again) == nullptr);
  CHECK(second.conversions_attempted() == 1);
  CHECK(again.problem == ModuleProblem::Stripped);
  CHECK(slurp(failed) == written);

  // Another kind is a failed conversion, said as remembered.
  std::ofstream(failed, std::ios::trunc) << "an earlier error\nkind: malformed\n";
  GsymLocator third(options);
  ModuleReport remembered;
  CHECK(third.locate(id, tmp / "empty.so", remembered) == nullptr);
  CHECK(third.conversions_attempted() == 0);
  CHECK(remembered.reason == "no GSYM for build ID e1e1e1e1; conversion failed: an earlier error (remembered in " +
                                 tmp / "cache/e1e1e1e1.c5.failed; delete it to retry)");
  CHECK(remembered.problem == ModuleProblem::Other);
}

TEST_CASE("locator: a missing local file is a miss of its own kind") {
  TempDir tmp;
  LocatorOptions options;
  options.cache_dir = tmp / "cache";  // never made: reading an absent cache is no problem
  options.use_debuginfod = false;
  GsymLocator locator(options);
  ModuleReport report;
  CHECK(locator.locate(*BuildId::from_hex("e2e2e2e2"), tmp / "gone.so", report) == nullptr);
  CHECK(report.reason == "no GSYM for build ID e2e2e2e2; file missing");
  CHECK(report.problem == ModuleProblem::FileMissing);
  CHECK(locator.notes().empty());
  CHECK_FALSE(fs::exists(tmp / "cache"));
}

TEST_CASE("locator: an unsafe cache directory is not written, the conversion still serves") {
  TempDir tmp;
  compile_fixture(tmp / "app", "0xabcd0102", kFixtureSource);
  BuildId id = *BuildId::from_hex("abcd0102");
  fs::create_directory(tmp / "real");
  fs::create_directory_symlink(tmp / "real", tmp / "link");

  LocatorOptions options;
  options.cache_dir = tmp / "link";
  GsymLocator locator(options);
  ModuleReport report;
  REQUIRE(locator.locate(id, tmp / "app", report) != nullptr);
  CHECK(report.origin == GsymOrigin::Converted);
  CHECK(report.gsym_path == "");
  CHECK(report.note == "not cached: " + tmp / "link" + ": link is a symlink or not a directory");
  CHECK(names_in(tmp / "real").empty());

  ::chmod((tmp / "real").c_str(), 0777);
  options.cache_dir = tmp / "real";
  GsymLocator open_to_all(options);
  REQUIRE(open_to_all.locate(id, tmp / "app", report) != nullptr);
  CHECK(report.note == "not cached: " + tmp / "real" + ": writable by group or others");

  if (::geteuid() == 0) {
    ::chmod((tmp / "real").c_str(), 0755);
    REQUIRE(::chown((tmp / "real").c_str(), 65534, 65534) == 0);
    GsymLocator foreign(options);
    REQUIRE(foreign.locate(id, tmp / "app", report) != nullptr);
    CHECK(report.note == "not cached: " + tmp / "real" + ": owned by uid 65534, not by uid 0");
  }
  CHECK(names_in(tmp / "real").empty());
}

TEST_CASE("prefetcher: converts in the background what symbolize then finds memoized") {
  TempDir tmp;
  compile_fixture(tmp / "app", "0xfeedbeef", kFixtureSource);
  compile_fixture(tmp / "other", "0xbeefbeef", kFixtureSource);
  BuildId id = *BuildId::from_hex("feedbeef"), other = *BuildId::from_hex("beefbeef");
  LocatorOptions options;
  options.cache_dir = tmp / "cache";
  GsymLocator locator(options);
  PrefetchStats stats;
  {
    GsymPrefetcher prefetcher(locator);
    prefetcher.add(id, tmp / "app", "/usr/bin/app");
    prefetcher.add(id, tmp / "app", "/usr/bin/app");  // one build ID, located once
    prefetcher.add(BuildId(), tmp / "other", "/x");    // no build ID: nothing to locate
    stats = prefetcher.finish(/*drain_queue=*/true);
    prefetcher.add(other, tmp / "other", "/y");  // after finish(): ignored
  }
  CHECK(stats.located == 1);
  CHECK(stats.dropped == 0);
  CHECK(locator.conversions_attempted() == 1);
  ModuleReport report;
  report.path = "/usr/bin/app";
  const gsym::Reader* reader = locator.locate(id, tmp / "app", report);
  REQUIRE(reader != nullptr);
  CHECK(report.origin == GsymOrigin::Converted);
  CHECK(locator.conversions_attempted() == 1);  // the worker's outcome, memoized
  CHECK(fs::exists(tmp / ("cache/feedbeef." + std::string(gsym::kConverterVersion) + ".gsym")));
}

TEST_CASE("locator: modules converted from symbol tables alone say so, fresh and cached") {
  TempDir tmp;
  compile_fixture(tmp / "lib.so", "0x5b5b5b5b", "int exported(int x) { return x + 1; }\n", "-shared -s");
  compile_fixture(tmp / "dbg.so", "0x6b6b6b6b", "int exported(int x) { return x + 1; }\n", "-shared");
  LocatorOptions options;
  options.cache_dir = tmp / "cache";
  for (int run = 0; run < 2; ++run) {  // converted, then a cache hit
    GsymLocator locator(options);
    ModuleReport stripped, full;
    REQUIRE(locator.locate(*BuildId::from_hex("5b5b5b5b"), tmp / "lib.so", stripped) != nullptr);
    REQUIRE(locator.locate(*BuildId::from_hex("6b6b6b6b"), tmp / "dbg.so", full) != nullptr);
    CHECK(stripped.origin == (run == 0 ? GsymOrigin::Converted : GsymOrigin::Cache));
    CHECK(stripped.symbols_only);
    CHECK_FALSE(full.symbols_only);
    CHECK(stripped.problem == ModuleProblem::None);
  }
}

TEST_CASE("prefetcher: finish() drops the queue, which symbolize converts later") {
  TempDir tmp;
  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator locator(options);
  GsymPrefetcher prefetcher(locator);
  for (uint8_t i = 1; i <= 50; ++i) prefetcher.add(BuildId(std::vector<uint8_t>{i, i}), tmp / "missing", "/m");
  PrefetchStats stats = prefetcher.finish();
  CHECK(stats.located + stats.dropped == 50);
  CHECK(prefetcher.finish().located == stats.located);  // idempotent
}
