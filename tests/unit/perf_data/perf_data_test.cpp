// Tests for userspace/perf_data: perf.data files recorded here by perf
// itself (perf record -g of a frame-pointer build, --call-graph dwarf of an
// FP-less one, the pipe form) of a small program compiled by the test, read
// into a Capture and symbolized: the exact root-to-leaf stacks; a rebuilt
// binary gives module+0x frames, never the new build's names; and damaged
// files (truncated at every offset, bytes flipped) give a one-line error or
// a clean result, never a crash.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/test_files.h"
#include "userspace/base/build_id.h"
#include "userspace/capture/capture_file.h"
#include "userspace/output/folded_output.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/session/recorded_session.h"
#include "userspace/perf_data/perf_data_format.h"
#include "userspace/perf_data/perf_data_reader.h"
#include "userspace/session/profile_file.h"
#include "userspace/process/process_image.h"
#include "userspace/process/vdso_file.h"
#include "userspace/assemble/stack_aggregator.h"
#include "userspace/symbolize/symbolize.h"

using namespace gsymprof;

namespace {

constexpr const char* kPerf = "/usr/bin/perf";

// main -> hot_caller -> inlined_step (inlined) -> hot_leaf, the hot loop.
constexpr const char* kProgram = R"(#include <stdlib.h>
#define NOINLINE __attribute__((noinline, noclone))
#define INLINE static inline __attribute__((always_inline))
volatile unsigned sink;
NOINLINE unsigned hot_leaf(unsigned n) {
  volatile unsigned acc = 0;
  for (unsigned i = 0; i < n; i++) acc += i * 2654435761u;
  return acc;
}
INLINE unsigned inlined_step(unsigned n) { return hot_leaf(n) ^ VARIANT; }
NOINLINE void hot_caller(unsigned rounds) {
  for (unsigned r = 0; r < rounds; r++) sink += inlined_step(200000);
}
int main(int argc, char** argv) {
  hot_caller(argc > 1 ? (unsigned)atoi(argv[1]) : 1000);
  return 0;
}
)";

constexpr const char* kFpStack = "__libc_start_call_main;main;hot_caller;inlined_step_[i];hot_leaf";
constexpr const char* kDwarfStack =
    "_start;__libc_start_main_impl;__libc_start_call_main;main;hot_caller;inlined_step_[i];hot_"
    "leaf";

bool can_record() {
  if (::geteuid() != 0 || ::access(kPerf, X_OK) != 0) {
    MESSAGE("skipped: perf.data recording needs root and " << kPerf);
    return false;
  }
  return true;
}

struct Workdir : test_files::TempDir {
  Workdir() : test_files::TempDir("perf_data_test") {}

  // Compiles kProgram (VARIANT selects the build) into `name`.
  std::string compile(const std::string& name, const std::string& flags, int variant = 3) {
    const std::string src = file(name + ".c"), exe = file(name);
    std::ofstream(src) << kProgram;
    const std::string cmd =
        "gcc -O1 -g " + flags + " -DVARIANT=" + std::to_string(variant) + "u -o " + exe + " " + src;
    REQUIRE(std::system(cmd.c_str()) == 0);
    return exe;
  }

  // perf record ARGS -o OUT -- EXE ROUNDS (quietly).
  std::string record(const std::string& out_name, const std::string& args, const std::string& exe,
                     int rounds = 2500) {
    const std::string out = file(out_name);
    const std::string cmd = std::string(kPerf) + " record -q " + args + " -o " + out + " -- " +
                            exe + " " + std::to_string(rounds) + " > " + file("perf.log") + " 2>&1";
    const int status = std::system(cmd.c_str());
    if (status != 0) {
      std::ifstream log(file("perf.log"));
      FAIL("perf record failed: " << std::string(std::istreambuf_iterator<char>(log), {}));
    }
    return out;
  }
};

// Folded text of `capture`, symbolized with conversions into `cache`.
std::string symbolized(const Capture& capture, const std::string& cache) {
  LocatorOptions locator_options;
  locator_options.cache_dir = cache;
  GsymLocator locator(locator_options);
  SymbolizeOptions options;
  options.local_elf_path = [](const CaptureModule& module) {
    return openable_module_path(module.path);
  };
  auto result = symbolize(capture, locator, options);
  REQUIRE(result.ok());
  return folded_text(*result);
}

// Samples per folded stack (without the comm) of the lines whose comm is `comm`.
std::map<std::string, uint64_t> stacks_of(const std::string& folded, const std::string& comm) {
  std::map<std::string, uint64_t> out;
  size_t at = 0;
  while (at < folded.size()) {
    size_t end = folded.find('\n', at);
    const std::string line = folded.substr(at, end - at);
    at = end + 1;
    const size_t space = line.rfind(' ');
    const std::string stack = line.substr(0, space);
    if (stack.rfind(comm + ";", 0) == 0)
      out[stack.substr(comm.size() + 1)] += std::stoull(line.substr(space + 1));
  }
  return out;
}

// The share of `comm`'s samples whose stack is exactly `stack`.
double share_of(const std::string& folded, const std::string& comm, const std::string& stack) {
  uint64_t total = 0, hit = 0;
  for (const auto& [s, count] : stacks_of(folded, comm)) {
    total += count;
    if (s == stack) hit += count;
  }
  INFO(folded);
  REQUIRE(total > 0);
  return static_cast<double>(hit) / static_cast<double>(total);
}

const CaptureModule* module_named(const Capture& capture, const std::string& path) {
  for (const CaptureModule& m : capture.modules)
    if (m.path == path) return &m;
  return nullptr;
}

gsym::Expected<Capture> read_bytes(std::span<const uint8_t> bytes,
                                   const PerfCaptureOptions& options) {
  auto file = PerfDataFile::parse(bytes);
  if (!file) return file.error();
  return capture_from_perf_data(*file, options);
}

// A loader that reads no file (damaged-input tests stay pure and fast).
PerfCaptureOptions no_files() {
  PerfCaptureOptions options;
  options.load_module = [](const PerfModuleFile&) -> gsym::Expected<ModuleIdentity> {
    return gsym::Error("not loaded in this test");
  };
  return options;
}

void check_one_line_error(const gsym::Error& error) {
  INFO(error.message);
  CHECK(error.message.rfind("perf.data: ", 0) == 0);
  CHECK(error.message.find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("perf.data: perf record -g of a frame-pointer build gives its exact stacks") {
  if (!can_record()) return;
  Workdir dir;
  const std::string exe = dir.compile("fp_prog", "-fno-omit-frame-pointer");
  const std::string data = dir.record("fp.data", "-F 999 -g", exe);
  auto capture = read_profile_file(data);
  REQUIRE_MESSAGE(capture.ok(), capture.error().message);
  CHECK(capture->call_graph == CallGraph::FramePointer);
  CHECK(capture->frequency_hz == 999);
  CHECK(capture->samples > 100);
  CHECK(capture->duration_ns > 100'000'000);
  CHECK(capture->lost.at("ringbuf_full") == 0);
  const CaptureModule* module = module_named(*capture, exe);
  REQUIRE(module != nullptr);
  auto build_id = read_elf_build_id(exe);
  REQUIRE(build_id.ok());
  CHECK(module->build_id == *build_id);
  CHECK(module->error.empty());

  const std::string folded = symbolized(*capture, dir.file("cache"));
  CHECK(share_of(folded, "fp_prog", kFpStack) >= 0.6);
}

TEST_CASE("perf.data: --call-graph dwarf of an FP-less build is unwound by the CFI unwinder") {
  if (!can_record()) return;
  Workdir dir;
  const std::string exe = dir.compile("dw_prog", "-fomit-frame-pointer");
  const std::string data = dir.record("dwarf.data", "-F 999 --call-graph dwarf,16384", exe, 1500);
  auto capture = read_profile_file(data);
  REQUIRE_MESSAGE(capture.ok(), capture.error().message);
  CHECK(capture->call_graph == CallGraph::Dwarf);
  CHECK(capture->samples > 50);
  const std::string folded = symbolized(*capture, dir.file("cache"));
  CHECK(share_of(folded, "dw_prog", kDwarfStack) >= 0.6);
}

TEST_CASE("perf.data: the pipe form (perf record -o -) reads like the file form") {
  if (!can_record()) return;
  Workdir dir;
  const std::string exe = dir.compile("pipe_prog", "-fno-omit-frame-pointer");
  const std::string data = dir.file("pipe.data");
  const std::string cmd = std::string(kPerf) + " record -q -F 999 -g -o - -- " + exe + " 2500 > " +
                          data + " 2> " + dir.file("perf.log");
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto bytes = test_files::read_file(data);
  auto file = PerfDataFile::parse(bytes);
  REQUIRE_MESSAGE(file.ok(), file.error().message);
  CHECK(file->pipe());
  auto capture = read_profile_file(data);
  REQUIRE_MESSAGE(capture.ok(), capture.error().message);
  const std::string folded = symbolized(*capture, dir.file("cache"));
  CHECK(share_of(folded, "pipe_prog", kFpStack) >= 0.6);
}

TEST_CASE("perf.data: a binary rebuilt after recording gives module+0x frames, not its names") {
  if (!can_record()) return;
  Workdir dir;
  const std::string exe = dir.compile("re_prog", "-fno-omit-frame-pointer");
  auto old_id = read_elf_build_id(exe);
  REQUIRE(old_id.ok());
  const std::string data = dir.record("re.data", "-F 999 -g", exe, 1500);
  dir.compile("re_prog", "-fno-omit-frame-pointer", /*variant=*/5);
  auto new_id = read_elf_build_id(exe);
  REQUIRE(new_id.ok());
  REQUIRE(*new_id != *old_id);

  auto capture = read_profile_file(data);
  REQUIRE_MESSAGE(capture.ok(), capture.error().message);
  const CaptureModule* module = module_named(*capture, exe);
  REQUIRE(module != nullptr);
  CHECK(module->build_id.empty());
  CHECK(module->error.find("build-ID mismatch (recorded " + old_id->hex()) == 0);
  const std::string folded = symbolized(*capture, dir.file("cache"));
  CHECK(folded.find("hot_leaf") == std::string::npos);
  CHECK(folded.find(";re_prog+0x") != std::string::npos);
}

TEST_CASE("perf.data: truncated or damaged files give a one-line error or a clean capture") {
  if (!can_record()) return;
  Workdir dir;
  const std::string exe = dir.compile("small_prog", "-fno-omit-frame-pointer");
  // Few samples: a small file, every offset of which is tried.
  const std::string data = dir.record("small.data", "-c 2000000 -g", exe, 200);
  const std::vector<uint8_t> bytes = test_files::read_file(data);
  REQUIRE(bytes.size() > 1000);
  const PerfCaptureOptions options = no_files();
  auto whole = read_bytes(bytes, options);
  REQUIRE_MESSAGE(whole.ok(), whole.error().message);
  CHECK(whole->samples > 0);

  size_t errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto capture = read_bytes(std::span(bytes).first(n), options);
    if (!capture) {
      check_one_line_error(capture.error());
      ++errors;
    }
  }
  CHECK(errors > 0);
  std::vector<uint8_t> damaged = bytes;
  for (size_t at = 0; at < damaged.size(); ++at) {
    damaged[at] ^= 0xff;
    auto capture = read_bytes(damaged, options);
    if (!capture) check_one_line_error(capture.error());
    damaged[at] ^= 0xff;
  }
}

TEST_CASE("perf.data: header errors name the problem and the offset") {
  std::vector<uint8_t> header(104, 0);
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(header.data() + at, &v, 8); };
  auto error_of = [&]() {
    auto file = PerfDataFile::parse(header);
    REQUIRE(!file.ok());
    return file.error().message;
  };
  CHECK(error_of() == "perf.data: no PERFILE2 magic at offset 0x0");
  put64(0, perf_data::kMagicByteSwapped);
  CHECK(error_of() ==
        "perf.data: big-endian file (only little-endian files are read) at offset 0x0");
  put64(0, perf_data::kMagic);
  put64(8, 99);
  CHECK(error_of() == "perf.data: unknown header size 99 at offset 0x8");
  put64(8, perf_data::kFileHeaderSize);
  put64(16, 136);                         // attr_size
  put64(24, 104), put64(32, 136 * 1000);  // attrs section far past the end
  CHECK(error_of() ==
        "perf.data: attrs section (0x21340 bytes) ends past the end of the file at offset 0x68");
  CHECK(!looks_like_perf_data(std::span(header).first(7)));
  CHECK(looks_like_perf_data(header));
}

TEST_CASE("perf.data: read_profile_file reads capture files too") {
  Workdir dir;
  Capture capture;
  capture.call_graph = CallGraph::FramePointer;
  REQUIRE(write_capture_file(capture, dir.file("c.json")).ok());
  auto back = read_profile_file(dir.file("c.json"));
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(back->call_graph == CallGraph::FramePointer);
  // The magic decides: a perf.data error, not a JSON one.
  std::vector<uint8_t> junk_bytes(16, 0);
  std::memcpy(junk_bytes.data(), "PERFILE2", 8);
  junk_bytes[8] = 99;
  test_files::write_file(dir.file("junk"), junk_bytes);
  auto junk = read_profile_file(dir.file("junk"));
  REQUIRE(!junk.ok());
  CHECK(junk.error().message ==
        dir.file("junk") + ": perf.data: unknown header size 99 at offset 0x8");
}

namespace {

// A perf.data built byte by byte: one cpu-clock event sampling IP, TID,
// TIME and CALLCHAIN, with sample_id_all trailers (TID, TIME) on the others.
class SyntheticPerfData {
 public:
  static constexpr uint64_t kSampleType =
      PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;

  static constexpr uint32_t kReadExec = 5;  // PROT_READ|PROT_EXEC
  void mmap2(uint32_t pid, uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff,
             const std::string& path, uint64_t ino, uint32_t prot = kReadExec) {
    std::vector<uint8_t> p;
    put32(p, pid), put32(p, pid), put64(p, addr), put64(p, len), put64(p, pgoff);
    put32(p, 8), put32(p, 1), put64(p, ino), put64(p, 0);  // maj, min, ino, generation
    put32(p, prot), put32(p, 2);                           // MAP_PRIVATE
    put_name(p, path);
    record(PERF_RECORD_MMAP2, 0, p, pid, time);
  }
  void comm(uint32_t pid, uint64_t time, const std::string& name, bool exec) {
    std::vector<uint8_t> p;
    put32(p, pid), put32(p, pid);
    put_name(p, name);
    record(PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0, p, pid, time);
  }
  void fork(uint32_t pid, uint32_t parent, uint64_t time) {
    std::vector<uint8_t> p;
    put32(p, pid), put32(p, parent), put32(p, pid), put32(p, parent), put64(p, time);
    record(PERF_RECORD_FORK, 0, p, pid, time);
  }
  void lost(uint64_t count, uint64_t time) {
    std::vector<uint8_t> p;
    put64(p, 0), put64(p, count);
    record(PERF_RECORD_LOST, 0, p, 0, time);
  }
  void sample(uint32_t pid, uint64_t time, const std::vector<uint64_t>& callchain) {
    std::vector<uint8_t> p;
    put64(p, 0), put32(p, pid), put32(p, pid), put64(p, time), put64(p, callchain.size());
    for (uint64_t entry : callchain) put64(p, entry);
    header(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, p.size());
    data_.insert(data_.end(), p.begin(), p.end());
  }

  std::vector<uint8_t> file() const { return file_with(data_); }

  // As perf record -z writes it: the records from the `plain`-th byte on
  // as one zstd stream, flushed at every `chunk` bytes of input into a
  // COMPRESSED record (COMPRESSED2 with `v2`), so records straddle them.
  std::vector<uint8_t> compressed_file(size_t plain, size_t chunk, bool v2 = false) const {
    std::vector<uint8_t> data(data_.begin(), data_.begin() + static_cast<ptrdiff_t>(plain));
    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    for (size_t at = plain; at < data_.size(); at += chunk) {
      ZSTD_inBuffer in{data_.data() + at, std::min(chunk, data_.size() - at), 0};
      std::vector<uint8_t> out(ZSTD_compressBound(in.size) + 64);
      ZSTD_outBuffer o{out.data(), out.size(), 0};
      REQUIRE(ZSTD_compressStream2(cctx.get(), &o, &in, ZSTD_e_flush) == 0);
      out.resize(o.pos);
      compressed_record(data, out, v2);
    }
    return file_with(data);
  }

  // A COMPRESSED record holding `zstd_bytes` as they are.
  static void compressed_record(std::vector<uint8_t>& data, const std::vector<uint8_t>& zstd_bytes,
                                bool v2 = false) {
    const size_t padded = (zstd_bytes.size() + 7) / 8 * 8;
    const uint32_t type = v2 ? perf_data::kRecordCompressed2 : perf_data::kRecordCompressed;
    const uint16_t misc = 0, size = static_cast<uint16_t>(8 + (v2 ? 8 + padded : zstd_bytes.size()));
    put32(data, type);
    data.insert(data.end(), reinterpret_cast<const uint8_t*>(&misc),
                reinterpret_cast<const uint8_t*>(&misc) + 2);
    data.insert(data.end(), reinterpret_cast<const uint8_t*>(&size),
                reinterpret_cast<const uint8_t*>(&size) + 2);
    if (v2) put64(data, zstd_bytes.size());
    data.insert(data.end(), zstd_bytes.begin(), zstd_bytes.end());
    if (v2) data.resize(data.size() + padded - zstd_bytes.size(), 0);
  }

  size_t data_size() const { return data_.size(); }

  std::vector<uint8_t> file_with(const std::vector<uint8_t>& data) const {
    constexpr uint64_t kAttrSize = 128, kAttrsOffset = perf_data::kFileHeaderSize;
    const uint64_t data_offset = kAttrsOffset + kAttrSize + 16;
    std::vector<uint8_t> f;
    put64(f, perf_data::kMagic), put64(f, perf_data::kFileHeaderSize), put64(f, kAttrSize + 16);
    put64(f, kAttrsOffset), put64(f, kAttrSize + 16);  // attrs
    put64(f, data_offset), put64(f, data.size());      // data
    f.resize(perf_data::kFileHeaderSize, 0);           // event_types, no features
    std::vector<uint8_t> attr(kAttrSize, 0);
    auto set64 = [&](size_t at, uint64_t v) { std::memcpy(attr.data() + at, &v, 8); };
    const uint32_t type = PERF_TYPE_SOFTWARE, size = kAttrSize;
    std::memcpy(attr.data(), &type, 4), std::memcpy(attr.data() + 4, &size, 4);
    set64(perf_data::attr_offset::kSamplePeriod, 999);
    set64(perf_data::attr_offset::kSampleType, kSampleType);
    set64(perf_data::attr_offset::kFlags,
          perf_data::kAttrFlagFreq | perf_data::kAttrFlagSampleIdAll);
    f.insert(f.end(), attr.begin(), attr.end());
    put64(f, 0), put64(f, 0);  // no ids
    f.insert(f.end(), data.begin(), data.end());
    return f;
  }

 private:
  static void put32(std::vector<uint8_t>& v, uint32_t x) {
    v.insert(v.end(), reinterpret_cast<uint8_t*>(&x), reinterpret_cast<uint8_t*>(&x) + 4);
  }
  static void put64(std::vector<uint8_t>& v, uint64_t x) {
    v.insert(v.end(), reinterpret_cast<uint8_t*>(&x), reinterpret_cast<uint8_t*>(&x) + 8);
  }
  static void put_name(std::vector<uint8_t>& v, const std::string& name) {
    v.insert(v.end(), name.begin(), name.end());
    v.resize(v.size() + 8 - name.size() % 8, 0);  // NUL-terminated, 8-aligned
  }
  void header(uint32_t type, uint16_t misc, size_t payload) {
    put32(data_, type);
    const uint16_t size = static_cast<uint16_t>(8 + payload);
    data_.insert(data_.end(), reinterpret_cast<const uint8_t*>(&misc),
                 reinterpret_cast<const uint8_t*>(&misc) + 2);
    data_.insert(data_.end(), reinterpret_cast<const uint8_t*>(&size),
                 reinterpret_cast<const uint8_t*>(&size) + 2);
  }
  void record(uint32_t type, uint16_t misc, std::vector<uint8_t> payload, uint32_t pid,
              uint64_t time) {
    put32(payload, pid), put32(payload, pid), put64(payload, time);  // sample_id_all trailer
    header(type, misc, payload.size());
    data_.insert(data_.end(), payload.begin(), payload.end());
  }

  std::vector<uint8_t> data_;
};

// Every module file has one executable PT_LOAD at file offset = vaddr = 0x1000.
PerfCaptureOptions synthetic_modules() {
  PerfCaptureOptions options;
  options.load_module = [](const PerfModuleFile& file) -> gsym::Expected<ModuleIdentity> {
    ModuleIdentity identity;
    const uint8_t id[] = {0xaa, static_cast<uint8_t>(file.path.back())};
    identity.build_id = BuildId(id);
    identity.segments.push_back({0x1000, 0x1000, 0x1000, 0x1000, true});
    return identity;
  };
  return options;
}

// "path+0xADDR" per frame (or the reason), leaf first, of the stacks of `pid`.
std::vector<std::string> frames_of(const Capture& capture, uint32_t pid) {
  std::vector<std::string> out;
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.pid != pid) continue;
    std::string text = stack.comm + ":";
    for (const CaptureFrame& f : stack.frames) {
      char address[32];
      std::snprintf(address, sizeof(address), "0x%llx", static_cast<unsigned long long>(f.address));
      text += " " +
              (f.kernel           ? std::string("kernel")
               : f.module >= 0 ? capture.modules[static_cast<size_t>(f.module)].path
                               : std::string(unresolved_reason_name(f.reason))) +
              "@" + address;
    }
    out.push_back(text + " x" + std::to_string(stack.count));
  }
  return out;
}

}  // namespace

TEST_CASE("perf.data: records replay in time order: fork copies, exec clears, mmap splits") {
  SyntheticPerfData perf;
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  const uint64_t kernel = static_cast<uint64_t>(PERF_CONTEXT_KERNEL);
  perf.comm(10, 1, "a", false);
  perf.sample(10, 3, {user, 0x11010, 0x11020});  // in the file before the mmap it needs
  perf.mmap2(10, 2, 0x11000, 0x1000, 0x1000, "/bin/a", 7);
  perf.fork(11, 10, 4);
  perf.comm(10, 5, "b", true);  // exec: /bin/a is gone from pid 10
  perf.mmap2(10, 6, 0x21000, 0x1000, 0x1000, "/bin/b", 8);
  perf.sample(10, 7, {user, 0x11010});
  perf.sample(10, 7, {user, 0x21010});
  perf.sample(11, 7, {user, 0x11010});  // the child kept its parent's mapping
  // A mapping over the middle of /bin/a: both ends of the old one stay.
  perf.mmap2(11, 8, 0x11800, 0x100, 0x1000, "/bin/b", 8);
  perf.sample(11, 9, {user, 0x11810});
  perf.sample(11, 9, {user, 0x11900});
  perf.sample(11, 9, {kernel, 0xffffffff81000000ull, user, 0x11100});
  perf.sample(11, 9, {kernel, 0xffffffff81000000ull});  // no user frame at all
  perf.lost(5, 10);

  const std::vector<uint8_t> bytes = perf.file();
  PerfCaptureOptions options = synthetic_modules();
  BuildId named_with;
  options.name_kernel_frames = [&](Capture& c, const BuildId& recorded) {
    named_with = recorded;
    c.kernel.error = "not named in this test";
  };
  auto capture = read_bytes(bytes, options);
  REQUIRE_MESSAGE(capture.ok(), capture.error().message);
  CHECK(capture->frequency_hz == 999);
  CHECK(capture->call_graph == CallGraph::FramePointer);
  CHECK(capture->samples == 8);  // the kernel-only sample is kept
  CHECK(capture->duration_ns == 6);
  CHECK(capture->lost.at("ringbuf_full") == 5);
  CHECK(capture->lost.count("kernel_frames_dropped") == 0);
  CHECK(capture->lost.at("no_user_stack") == 0);
  CHECK(named_with.empty());  // the synthetic file lists no kernel build ID
  CHECK(capture->kernel.error == "not named in this test");
  // Frame 0 exact, return addresses - 1; unslid = file offset (vaddr = offset).
  CHECK(frames_of(*capture, 10) == std::vector<std::string>{
                                       "a: /bin/a@0x1010 /bin/a@0x101f x1",
                                       "b: no-mapping@0x11010 x1",
                                       "b: /bin/b@0x1010 x1",
                                   });
  // The mapping at time 8 replaced part of one that samples pinned: the
  // samples after it use a new version of the image (and of /bin/a's capture
  // module), as live profiles do; the order of those modules is not the point.
  std::vector<std::string> child = frames_of(*capture, 11);
  std::sort(child.begin(), child.end());
  CHECK(child == std::vector<std::string>{
                     "a: /bin/a@0x1010 x1",
                     "a: /bin/a@0x1900 x1",
                     "a: /bin/b@0x1010 x1",
                     "a: kernel@0xffffffff81000000 /bin/a@0x1100 x1",
                     "a: kernel@0xffffffff81000000 x1",
                 });
}

namespace {

// The live rules, for the same process: its /proc maps text (none: the
// process is gone) through the live process model and the aggregator.
std::vector<std::string> live_frames_of(const std::map<uint32_t, std::string>& proc_maps, uint32_t pid,
                                        const std::string& comm, std::vector<uint64_t> ips) {
  ProcSource source;
  source.read_maps = [&](uint32_t p) -> gsym::Expected<std::string> {
    auto it = proc_maps.find(p);
    if (it == proc_maps.end()) return gsym::Error("/proc/" + std::to_string(p) + "/maps: gone");
    return it->second;
  };
  source.load_module = [](uint32_t, const MapEntry& entry) {
    PerfModuleFile file;
    file.path = entry.path;
    return synthetic_modules().load_module(file);
  };
  ProcessTable table(source);
  StackAggregator aggregator(table);
  aggregator.add({pid, pid, comm, ips, false, {}});
  Capture capture;
  aggregator.build(capture);
  return frames_of(capture, pid);
}

}  // namespace

// A recording's frames are classified by the live rules (issue 26). One of
// a process whose maps perf never recorded (it exited before perf read
// /proc) is process-gone, as when a live profile cannot read them.
TEST_CASE("perf.data: a frame of a process without maps gets the live reason") {
  SyntheticPerfData perf;
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  perf.comm(20, 1, "app", false);
  perf.mmap2(20, 2, 0x11000, 0x1000, 0x1000, "/bin/a", 7);
  perf.sample(20, 3, {user, 0x11010});
  perf.comm(21, 4, "gone", false);
  perf.sample(21, 5, {user, 0x11010});
  const std::vector<uint8_t> bytes = perf.file();
  auto recorded = read_bytes(bytes, synthetic_modules());
  REQUIRE_MESSAGE(recorded.ok(), recorded.error().message);

  const std::map<uint32_t, std::string> proc_maps = {{20, "11000-12000 r-xp 00001000 08:01 7 /bin/a\n"}};
  const std::vector<std::string> live_app = live_frames_of(proc_maps, 20, "app", {0x11010});
  const std::vector<std::string> live_gone = live_frames_of(proc_maps, 21, "gone", {0x11010});
  CHECK(live_app == std::vector<std::string>{"app: /bin/a@0x1010 x1"});
  CHECK(live_gone == std::vector<std::string>{"gone: process-gone@0x11010 x1"});
  CHECK(frames_of(*recorded, 20) == live_app);
  CHECK(frames_of(*recorded, 21) == live_gone);
}

// A frame in a file mapped without execute permission (perf record --data,
// or a data pointer an FP walk took for a return address) is
// not-executable, as a live profile's /proc maps classify it, not a
// no-mapping.
TEST_CASE("perf.data: a frame in a non-executable mapping gets the live reason") {
  SyntheticPerfData perf;
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  constexpr uint32_t kReadOnly = 1;  // PROT_READ
  perf.comm(20, 1, "app", false);
  perf.mmap2(20, 2, 0x11000, 0x1000, 0x1000, "/bin/a", 7);
  perf.mmap2(20, 3, 0x31000, 0x1000, 0x1000, "/data/blob", 9, kReadOnly);
  perf.sample(20, 4, {user, 0x11010, 0x31010});
  const std::vector<uint8_t> bytes = perf.file();
  auto recorded = read_bytes(bytes, synthetic_modules());
  REQUIRE_MESSAGE(recorded.ok(), recorded.error().message);

  const std::map<uint32_t, std::string> proc_maps = {
      {20, "11000-12000 r-xp 00001000 08:01 7 /bin/a\n31000-32000 r--p 00001000 08:01 9 /data/blob\n"}};
  const std::vector<std::string> live = live_frames_of(proc_maps, 20, "app", {0x11010, 0x31010});
  CHECK(live == std::vector<std::string>{"app: /bin/a@0x1010 not-executable@0x31010 x1"});
  CHECK(frames_of(*recorded, 20) == live);
}

namespace {

// Records for the compression tests; `plain` is where the first two end
// (perf writes its synthesized records uncompressed, then compressed ones).
SyntheticPerfData replay_records(size_t* plain = nullptr) {
  SyntheticPerfData perf;
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  perf.comm(10, 1, "a", false);
  perf.mmap2(10, 2, 0x11000, 0x1000, 0x1000, "/bin/a", 7);
  if (plain) *plain = perf.data_size();
  perf.fork(11, 10, 4);
  for (uint64_t t = 5; t < 200; ++t) perf.sample(10 + t % 2, t, {user, 0x11010 + t % 7, 0x11020});
  perf.lost(5, 300);
  return perf;
}

std::vector<uint8_t> zstd_of(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out(ZSTD_compressBound(bytes.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 1);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE("perf.data: perf record -z files (COMPRESSED, COMPRESSED2) read as the plain file") {
  size_t first = 0;
  const SyntheticPerfData perf = replay_records(&first);
  auto plain = read_bytes(perf.file(), synthetic_modules());
  REQUIRE_MESSAGE(plain.ok(), plain.error().message);
  REQUIRE(plain->samples == 195);
  const std::string expected = capture_to_json(*plain);
  // The first records plain (as perf writes its synthesized ones), the rest
  // in chunks that cut records in two, and all in one record.
  for (size_t chunk : {size_t{37}, size_t{1000}, perf.data_size()}) {
    for (bool v2 : {false, true}) {
      CAPTURE(chunk);
      CAPTURE(v2);
      const std::vector<uint8_t> bytes = perf.compressed_file(first, chunk, v2);
      auto file = PerfDataFile::parse(bytes);
      REQUIRE_MESSAGE(file.ok(), file.error().message);
      CHECK(file->decompressed_bytes() == perf.data_size() - first);
      auto capture = capture_from_perf_data(*file, synthetic_modules());
      REQUIRE_MESSAGE(capture.ok(), capture.error().message);
      CHECK(capture_to_json(*capture) == expected);
    }
  }
}

TEST_CASE("perf.data: damaged compressed records give a one-line error, never a crash") {
  size_t first = 0;
  const SyntheticPerfData perf = replay_records(&first);
  auto error_of = [](const std::vector<uint8_t>& bytes) {
    auto capture = read_bytes(bytes, synthetic_modules());
    REQUIRE(!capture.ok());
    check_one_line_error(capture.error());
    return capture.error().message;
  };
  // Not zstd at all.
  std::vector<uint8_t> data;
  SyntheticPerfData::compressed_record(data, std::vector<uint8_t>(64, 0x5a));
  CHECK(error_of(perf.file_with(data)).starts_with("perf.data: zstd: Unknown frame descriptor at offset 0x"));

  // A record cut at the end of the compressed data.
  const std::vector<uint8_t> whole = perf.file();
  std::vector<uint8_t> cut(whole.end() - static_cast<ptrdiff_t>(perf.data_size()), whole.end() - 5);
  data.clear();
  SyntheticPerfData::compressed_record(data, zstd_of(cut));
  CHECK(error_of(perf.file_with(data))
            .starts_with("perf.data: compressed data ends inside a record at offset 0x"));
  CHECK(error_of(perf.file_with(data)).ends_with(" of the decompressed data"));

  // A record whose size is below 8, inside the compressed data: the offset
  // is said to be the decompressed data's.
  std::vector<uint8_t> bad = {1, 0, 0, 0, 0, 0, 4, 0};
  data.clear();
  SyntheticPerfData::compressed_record(data, zstd_of(bad));
  CHECK(error_of(perf.file_with(data)) ==
        "perf.data: record size 4 is below 8 at offset 0x0 of the decompressed data (COMPRESSED "
        "record at offset 0xf8)");

  // A compressed record inside compressed data.
  std::vector<uint8_t> inner;
  SyntheticPerfData::compressed_record(inner, zstd_of(bad));
  data.clear();
  SyntheticPerfData::compressed_record(data, zstd_of(inner));
  CHECK(error_of(perf.file_with(data)) ==
        "perf.data: compressed record inside compressed data at offset 0x0 of the decompressed "
        "data (COMPRESSED record at offset 0xf8)");

  // COMPRESSED2 whose data size runs past its record.
  data.clear();
  SyntheticPerfData::compressed_record(data, zstd_of(bad), /*v2=*/true);
  const uint64_t huge = 1000;
  std::memcpy(data.data() + 8, &huge, 8);
  CHECK(error_of(perf.file_with(data)) ==
        "perf.data: COMPRESSED2 data size runs past its record at offset 0xf8");

  // A bomb: 64 MiB of zeros from a few KiB of zstd: refused at the
  // bound (256x the compressed bytes, at least 16 MiB), not decompressed whole.
  std::vector<uint8_t> zeros(size_t{64} << 20, 0);
  data.clear();
  SyntheticPerfData::compressed_record(data, zstd_of(zeros));
  REQUIRE(data.size() < 8192);
  CHECK(error_of(perf.file_with(data)) ==
        "perf.data: compressed records decompress to more than 16777216 bytes (256x their size, "
        "at least 16777216) at offset 0xf8");

  // Every truncation and every flipped byte of a compressed file.
  const std::vector<uint8_t> bytes = perf.compressed_file(first, 300);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto capture = read_bytes(std::span(bytes).first(n), synthetic_modules());
    if (!capture) check_one_line_error(capture.error());
  }
  std::vector<uint8_t> damaged = bytes;
  for (size_t at = 0; at < damaged.size(); ++at) {
    damaged[at] ^= 0xff;
    auto capture = read_bytes(damaged, synthetic_modules());
    if (!capture) check_one_line_error(capture.error());
    damaged[at] ^= 0xff;
  }
}
