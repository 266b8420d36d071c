// Reader tests: the exact bytes of gsym/FORMAT.md §12, hand-built records for
// every LLVM lookup rule and every hard limit, hostile input (truncation at
// every byte, bad headers, sections outside the file), big-endian copies,
// zero allocations in steady state, and lookups from several threads.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <list>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/reader/reader.h"

// Counting global allocation functions: the steady-state lookup test asserts
// that this counter does not move. They are malloc/free underneath, which GCC
// flags as mismatched once it inlines them into callers.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<uint64_t> g_allocations{0};
void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort uses them), so every form pairs
// with a matching delete under AddressSanitizer.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace {

using Bytes = std::vector<uint8_t>;

// gsym/FORMAT.md §12: tiny.gsym as written by llvm-gsymutil 22.
const Bytes kTiny = {
    0x4d, 0x59, 0x53, 0x47, 0x01, 0x00, 0x02, 0x14, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x58, 0x00, 0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x57, 0x02, 0xbc, 0x11,
    0xb8, 0x9e, 0xaf, 0x04, 0x3b, 0xbe, 0x93, 0x5b, 0x77, 0x1e, 0x94, 0x00, 0x43, 0x63, 0x38, 0xa4,
    0x00, 0x10, 0x10, 0x10, 0x84, 0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00,
    0x2f, 0x68, 0x6f, 0x6d, 0x65, 0x2f, 0x75, 0x73, 0x65, 0x72, 0x2f, 0x64, 0x65, 0x6d, 0x6f, 0x00,
    0x74, 0x69, 0x6e, 0x79, 0x2e, 0x63, 0x00, 0x66, 0x00, 0x73, 0x71, 0x2e, 0x68, 0x00, 0x73, 0x71,
    0x00, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x0c, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x01, 0x02, 0x02, 0x00, 0x01, 0x01, 0x0f, 0x1c, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x15, 0x00, 0x00, 0x00, 0x01, 0x00, 0x0c, 0x01, 0x1f, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x03, 0x00, 0x26, 0x00, 0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x04, 0x27, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

gsym::Reader parse_ok(const Bytes& bytes) {
  static std::list<Bytes> keep;  // parse() borrows: every input must outlive its Reader
  keep.push_back(bytes);
  auto r = gsym::Reader::parse(keep.back());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().to_string()));
  return std::move(*r);
}

std::string parse_error(const Bytes& bytes) {
  auto r = gsym::Reader::parse(bytes);
  return r.ok() ? "<parsed>" : r.error().message;
}

// One lookup rendered like llvm-gsymutil --address.
std::string render(const gsym::Reader& r, uint64_t addr, gsym::LookupOptions opts = {}) {
  gsym::LookupScratch scratch;
  auto found = r.lookup_into(addr, opts, scratch);
  if (!found) return "error: " + found.error().message;
  if (!*found) return "not found";
  std::string out;
  for (size_t i = 0; i < scratch.frames.size(); ++i) {
    const gsym::LookupFrame& f = scratch.frames[i];
    if (i) out += " | ";
    out += std::string(f.name);
    if (f.offset) out += " + " + std::to_string(f.offset);
    if (!f.directory.empty() || !f.basename.empty())
      out += " @ " + std::string(f.directory) + "/" + std::string(f.basename) + ":" +
             std::to_string(f.line);
    if (f.inlined) out += " [inlined]";
  }
  return out;
}

// --- hand-built files -------------------------------------------------------

void put_u32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_uleb(Bytes& b, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v) byte |= 0x80;
    b.push_back(byte);
  } while (v);
}
void put_sleb(Bytes& b, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
    if (more) byte |= 0x80;
    b.push_back(byte);
  }
}

// String table of the hand-built files.
constexpr char kStrtab[] = "\0f\0sq\0dir\0a.c\0leaf\0";  // f=1 sq=3 dir=6 a.c=10 leaf=14
constexpr uint32_t kF = 1, kSq = 3, kDir = 6, kAc = 10, kLeaf = 14;

struct Info {
  uint32_t type;
  Bytes payload;
};

Bytes record(uint32_t size, uint32_t name, const std::vector<Info>& infos) {
  Bytes b;
  put_u32(b, size);
  put_u32(b, name);
  for (const Info& i : infos) {
    put_u32(b, i.type);
    put_u32(b, static_cast<uint32_t>(i.payload.size()));
    b.insert(b.end(), i.payload.begin(), i.payload.end());
  }
  put_u32(b, 0);
  put_u32(b, 0);
  return b;
}

// A version 1 file: base 0x1000, 2-byte address offsets, files {0,0} and
// {dir, a.c}, then the given (offset from base, record) functions.
Bytes make_gsym(const std::vector<std::pair<uint16_t, Bytes>>& funcs) {
  Bytes b;
  put_u32(b, 0x4753594D);
  b.push_back(1);
  b.push_back(0);
  b.push_back(2);  // addr off size
  b.push_back(0);  // uuid size
  put_u64(b, 0x1000);
  put_u32(b, static_cast<uint32_t>(funcs.size()));
  const size_t strtab_field = b.size();
  put_u32(b, 0);
  put_u32(b, sizeof kStrtab - 1);
  b.resize(48, 0);
  for (const auto& f : funcs) {
    b.push_back(static_cast<uint8_t>(f.first));
    b.push_back(static_cast<uint8_t>(f.first >> 8));
  }
  while (b.size() % 4) b.push_back(0);
  const size_t info_table = b.size();
  b.resize(b.size() + 4 * funcs.size(), 0);
  put_u32(b, 2);
  put_u32(b, 0), put_u32(b, 0);
  put_u32(b, kDir), put_u32(b, kAc);
  const uint32_t strtab = static_cast<uint32_t>(b.size());
  for (int i = 0; i < 4; ++i) b[strtab_field + i] = static_cast<uint8_t>(strtab >> (8 * i));
  b.insert(b.end(), kStrtab, kStrtab + sizeof kStrtab - 1);
  for (size_t i = 0; i < funcs.size(); ++i) {
    while (b.size() % 4) b.push_back(0);
    const uint32_t off = static_cast<uint32_t>(b.size());
    for (int k = 0; k < 4; ++k) b[info_table + 4 * i + k] = static_cast<uint8_t>(off >> (8 * k));
    b.insert(b.end(), funcs[i].second.begin(), funcs[i].second.end());
  }
  return b;
}

// Line table: min/max delta, first line, then raw opcodes.
Bytes line_table(int64_t min, int64_t max, uint64_t first, const Bytes& ops) {
  Bytes b;
  put_sleb(b, min);
  put_sleb(b, max);
  put_uleb(b, first);
  b.insert(b.end(), ops.begin(), ops.end());
  return b;
}

// One inline node (ranges relative to `base`); children appended by caller.
void inline_node(Bytes& b, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, bool children,
                 uint32_t name, uint64_t call_file, uint64_t call_line) {
  put_uleb(b, ranges.size());
  for (auto [off, size] : ranges) put_uleb(b, off), put_uleb(b, size);
  b.push_back(children ? 1 : 0);
  put_u32(b, name);
  put_uleb(b, call_file);
  put_uleb(b, call_line);
}

// --- byte swapping an LLVM-written file into the other byte order ----------

struct Swapper {
  Bytes& d;
  void sw(size_t off, size_t n) { std::reverse(d.begin() + off, d.begin() + off + n); }
  uint32_t u32(size_t off) const {
    uint32_t v;
    std::memcpy(&v, d.data() + off, 4);
    return v;
  }
  uint64_t uleb(size_t& o) const {
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
      const uint8_t b = d[o++];
      v |= uint64_t(b & 0x7f) << s;
      if (!(b & 0x80)) return v;
    }
  }
  bool inline_node(size_t& o) {
    const uint64_t n = uleb(o);
    if (n == 0) return false;
    for (uint64_t i = 0; i < 2 * n; ++i) uleb(o);
    const bool kids = d[o++];
    sw(o, 4);
    o += 4;
    uleb(o), uleb(o);
    if (kids)
      while (inline_node(o)) {
      }
    return true;
  }
  void record(size_t o) {
    sw(o, 4), sw(o + 4, 4);
    o += 8;
    while (true) {
      const uint32_t type = u32(o), len = u32(o + 4);
      sw(o, 4), sw(o + 4, 4);
      o += 8;
      const size_t p = o;
      if (type == 0) return;
      if (type == 2) {
        size_t q = p;
        inline_node(q);
      } else if (type == 3) {
        const uint32_t count = u32(p);
        sw(p, 4);
        size_t q = p + 4;
        for (uint32_t i = 0; i < count; ++i) {
          const uint32_t size = u32(q);
          sw(q, 4);
          record(q + 4);
          q += 4 + size;
        }
      } else if (type == 4) {
        const uint32_t count = u32(p);
        sw(p, 4);
        size_t q = p + 4;
        for (uint32_t i = 0; i < count; ++i) {
          sw(q, 8);
          q += 9;
          const uint32_t nr = u32(q);
          sw(q, 4);
          q += 4;
          for (uint32_t k = 0; k < nr; ++k, q += 4) sw(q, 4);
        }
      }
      o = p + len;
    }
  }
  void run() {
    const uint8_t aos = d[6];
    const uint32_t n = u32(16);
    sw(0, 4), sw(4, 2), sw(8, 8), sw(16, 4), sw(20, 4), sw(24, 4);
    for (uint32_t i = 0; i < n; ++i) sw(48 + i * aos, aos);
    const size_t info = (48 + n * aos + 3) & ~size_t{3};
    std::vector<uint32_t> offsets;
    for (uint32_t i = 0; i < n; ++i) offsets.push_back(u32(info + 4 * i)), sw(info + 4 * i, 4);
    const size_t ft = info + 4 * n;
    const uint32_t nf = u32(ft);
    sw(ft, 4);
    for (uint32_t i = 0; i < 2 * nf; ++i) sw(ft + 4 + 4 * i, 4);
    for (uint32_t off : offsets) record(off);
  }
};

Bytes byte_swapped(Bytes d) {
  Swapper{d}.run();
  return d;
}

// Every address of every function plus a margin, rendered.
std::vector<std::string> render_all(const gsym::Reader& r) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r.function_count(); ++i) {
    const uint64_t start = r.function_start(i);
    for (uint64_t a = start ? start - 1 : 0; a < start + 80; ++a)
      for (int bits = 0; bits < 4; ++bits) {
        gsym::LookupOptions o;
        o.line_information = bits & 1;
        o.inline_frames = bits & 2;
        out.push_back(render(r, a, o));
      }
  }
  return out;
}

// An LLVM-written GSYM of a small gcc -O2 program, or empty when gcc or
// llvm-gsymutil is missing.
Bytes llvm_written_fixture() {
  static Bytes cached = [] {
    const char* gsymutil = "/usr/lib/llvm-22/bin/llvm-gsymutil";
    if (std::system("command -v gcc >/dev/null 2>&1") != 0 ||
        std::system((std::string("test -x ") + gsymutil).c_str()) != 0)
      return Bytes();
    char dir[] = "/tmp/gsym_reader_test.XXXXXX";
    if (!mkdtemp(dir)) return Bytes();
    const std::string d = dir;
    {
      std::ofstream(d + "/h.h") << "static inline int leaf(int x) { return x * x + 1; }\n"
                                   "static inline int mid(int x) { int s = 0; for (int i = 0; i < x; ++i) s += leaf(i ^ x); return s; }\n";
      std::ofstream(d + "/p.c") << "#include \"h.h\"\n"
                                   "__attribute__((noinline)) int top(int n) { return mid(n) + mid(n + 2) * 3; }\n"
                                   "int main(int argc, char** argv) { (void)argv; return top(argc); }\n";
    }
    const std::string cmd = "cd " + d + " && gcc -O2 -g -o p p.c && " + gsymutil +
                            " --convert p -o p.gsym --num-threads=1 >/dev/null 2>&1";
    Bytes bytes;
    if (std::system(cmd.c_str()) == 0) {
      std::ifstream in(d + "/p.gsym", std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::system(("rm -rf " + d).c_str());
    return bytes;
  }();
  return cached;
}

}  // namespace

TEST_CASE("reader: gsym/FORMAT.md §12 bytes: header, lookups, decode, verify") {
  gsym::Reader r = parse_ok(kTiny);
  const gsym::Header& h = r.header();
  CHECK(h.version == 1);
  CHECK(h.addr_off_size == 2);
  CHECK(h.base_address == 0x400000);
  CHECK(h.num_addresses == 2);
  CHECK(h.strtab_offset == 0x58);
  CHECK(h.strtab_size == 41);
  CHECK(h.endian == gsym::Endian::Little);
  REQUIRE(r.build_id().size() == 20);
  CHECK(r.build_id()[0] == 0x57);
  CHECK(r.build_id()[19] == 0xa4);
  CHECK(r.function_count() == 2);
  CHECK(r.function_start(0) == 0x401000);
  CHECK(r.function_start(1) == 0x401010);
  CHECK(r.file_count() == 3);
  CHECK(r.string(0x21) == "sq.h");
  CHECK(r.string(0x1000) == "");
  auto f2 = r.file(2);
  REQUIRE(f2.ok());
  CHECK(f2->first == "/home/user/demo");
  CHECK(f2->second == "sq.h");
  CHECK(r.file(3).error().message == "failed to extract file[3]");

  CHECK(render(r, 0x401001) ==
        "sq + 1 @ /home/user/demo/sq.h:3 [inlined] | f + 1 @ /home/user/demo/tiny.c:5");
  CHECK(render(r, 0x401005) == "f + 5 @ /home/user/demo/tiny.c:6");
  CHECK(render(r, 0x40100c) == "not found");
  CHECK(render(r, 0x401022) == "_start + 18 @ /home/user/demo/tiny.c:11");
  CHECK(render(r, 0x401023) == "not found");
  CHECK(render(r, 0x3fffff) == "not found");
  CHECK(render(r, 0x401001, {false, true}) == "sq + 1 [inlined] | f + 1");
  CHECK(render(r, 0x401001, {true, false}) == "f + 1 @ /home/user/demo/sq.h:3");
  CHECK(r.find_function(0x40100b) == 0);
  CHECK(r.find_function(0x40100c) == -1);

  auto res = r.lookup(0x401001);
  REQUIRE(res.ok());
  REQUIRE(res->has_value());
  CHECK((*res)->function == gsym::AddressRange{0x401000, 0x40100c});
  CHECK((*res)->frames.size() == 2);
  CHECK((*res)->frames[0].inlined);
  CHECK(!(*res)->frames[1].inlined);

  auto fn = r.decode_function(0);
  REQUIRE(fn.ok());
  gsym::Function expected;
  expected.range = {0x401000, 0x40100c};
  expected.name = "f";
  expected.lines = {{0x401000, 2, 3}, {0x401003, 1, 6}, {0x40100b, 1, 7}};
  gsym::InlineNode sq;
  sq.ranges = {{0x401000, 0x401003}};
  sq.name = "sq";
  sq.call_file = 1;
  sq.call_line = 5;
  gsym::InlineNode root;
  root.ranges = {{0x401000, 0x40100c}};
  root.name = "f";
  root.children = {sq};
  expected.inline_tree = root;
  CHECK(*fn == expected);

  auto files = r.decode_files();
  REQUIRE(files.ok());
  CHECK(*files == std::vector<gsym::FileEntry>{{"", ""},
                                               {"/home/user/demo", "tiny.c"},
                                               {"/home/user/demo", "sq.h"}});
  auto report = r.verify();
  REQUIRE(report.ok());
  CHECK(report->functions == 2);
  CHECK(report->line_rows == 5);
  CHECK(report->inline_nodes == 2);
  CHECK(report->files == 3);
  CHECK(report->strings == 7);
  CHECK(report->merged_functions == 0);
  CHECK(report->call_sites == 0);
}

TEST_CASE("reader: bad headers") {
  Bytes b = kTiny;
  b[0] = 'X';
  CHECK(parse_error(b) == "not a GSYM file");
  b = kTiny;
  b[4] = 3;
  CHECK(parse_error(b) == "unsupported GSYM version 3");
  CHECK(parse_error(Bytes(b.begin(), b.begin() + 20)) == "unsupported GSYM version 3");
  // Version 1 bytes read as version 2: byte 7 (UUIDSize 20) is then the
  // string table encoding (gsym_v2_test.cpp has the real version 2 cases).
  b = kTiny;
  b[4] = 2;
  CHECK(parse_error(b) == "unsupported string table encoding 20");
  b = kTiny;
  b[6] = 3;
  CHECK(parse_error(b) == "invalid address offset size 3");
  b = kTiny;
  b[7] = 21;
  CHECK(parse_error(b) == "invalid UUID size 21");
  CHECK(parse_error(Bytes{}) == "not enough data for a GSYM header");
  CHECK(parse_error(Bytes(kTiny.begin(), kTiny.begin() + 47)) ==
        "not enough data for a GSYM header");
}

TEST_CASE("reader: sections and offsets outside the file, huge counts") {
  Bytes b = kTiny;
  b[16] = b[17] = b[18] = b[19] = 0xff;  // NumAddresses
  CHECK(parse_error(b) == "address table (4294967295 entries) extends past the end of the file");
  b = kTiny;
  b[16] = 0x30;  // 48 entries: address table fits, info table does not
  CHECK(parse_error(b) == "address info table (48 entries) extends past the end of the file");
  b = kTiny;
  b[0x3c] = 0xff, b[0x3d] = 0xff;  // file count
  CHECK(parse_error(b) == "file table (65535 entries) extends past the end of the file");
  b = kTiny;
  b[0x14] = 0xe0;  // strtab offset 0xe0 + 41 > 230
  CHECK(parse_error(b) == "string table [0xe0, 0x109) extends past the end of the file");
  b = kTiny;
  b[0x38] = 0xe0;  // second record at 0xe0: fewer than 8 bytes left
  CHECK(parse_error(b) == "function info 1 offset 0xe0 is past the end of the file");
}

TEST_CASE("reader: truncated at every byte never crashes and never verifies") {
  for (size_t n = 0; n < kTiny.size(); ++n) {
    Bytes prefix(kTiny.begin(), kTiny.begin() + n);
    auto r = gsym::Reader::parse(prefix);
    if (!r) continue;
    // Only the last record can be cut while the layout still parses.
    CHECK_MESSAGE(!r->verify().ok(), "prefix " << n << " verified");
    for (uint64_t a = 0x401000; a < 0x401024; ++a) (void)render(*r, a);
    (void)r->decode_function(0);
    (void)r->decode_function(1);
  }
  // Every truncation of the whole record area past the layout: parse ok, the
  // cut record reports "FunctionInfo data is truncated" or a line-table EOF.
  Bytes cut(kTiny.begin(), kTiny.begin() + 0xe2);
  gsym::Reader r = parse_ok(cut);
  CHECK(render(r, 0x401010) == "error: FunctionInfo data is truncated");
  CHECK(render(r, 0x401001) ==
        "sq + 1 @ /home/user/demo/sq.h:3 [inlined] | f + 1 @ /home/user/demo/tiny.c:5");
}

TEST_CASE("reader: line-table rules of LLVM 22") {
  // Rows: +0 line 10, +4 line 11, +4 line 12 (same address: last wins), +8 file 0.
  Bytes ops = {0x02, 0x04};                      // AdvancePC 4 -> row (0x1004, 10)
  ops.insert(ops.end(), {0x03, 0x01, 0x02, 0x00});  // line 11, row at 0x1004
  ops.insert(ops.end(), {0x03, 0x01, 0x02, 0x00});  // line 12, row at 0x1004
  ops.insert(ops.end(), {0x01, 0x00, 0x02, 0x04});  // file 0, row at 0x1008
  ops.insert(ops.end(), {0x01, 0x01, 0x02, 0x04});  // file 1, row at 0x100c
  ops.push_back(0x00);
  Bytes b = make_gsym({{0, record(0x20, kF, {{1, line_table(0, 0, 10, ops)}})}});
  gsym::Reader r = parse_ok(b);
  CHECK(render(r, 0x1000) == "error: address 0x1000 is not in the line table");
  CHECK(render(r, 0x1003) == "error: address 0x1003 is not in the line table");
  CHECK(render(r, 0x1004) == "f + 4 @ dir/a.c:12");
  CHECK(render(r, 0x1007) == "f + 7 @ dir/a.c:12");
  CHECK(render(r, 0x1008) == "error: address 0x1008 is not in the line table");
  CHECK(render(r, 0x100c) == "f + 12 @ dir/a.c:12");
  CHECK(render(r, 0x101f) == "f + 31 @ dir/a.c:12");
  CHECK(render(r, 0x1020) == "not found");
  CHECK(render(r, 0x1000, {false, true}) == "f");  // names only: the table is not read
  auto fn = r.decode_function(0);
  REQUIRE(fn.ok());
  CHECK(fn->lines == std::vector<gsym::LineEntry>{
                         {0x1004, 1, 10}, {0x1004, 1, 11}, {0x1004, 1, 12}, {0x1008, 0, 12},
                         {0x100c, 1, 12}});
  CHECK(r.verify().ok());

  // Special opcodes: MinDelta -1, MaxDelta 2 (range 4).
  // op 4+5 -> line += -1 + 1 = 0, addr += 1; op 4+14 -> line += -1+2 = 1, addr += 3.
  Bytes spec = {9, 18, 0};
  gsym::Reader r2 = parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(-1, 2, 7, spec)}})}}));
  CHECK(render(r2, 0x1001) == "f + 1 @ dir/a.c:7");
  CHECK(render(r2, 0x1004) == "f + 4 @ dir/a.c:8");

  // File index beyond the file table.
  Bytes bad_file = {0x01, 0x07, 0x02, 0x00, 0x00};
  gsym::Reader r3 =
      parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(0, 0, 1, bad_file)}})}}));
  CHECK(render(r3, 0x1000) == "error: failed to extract file[7]");
  CHECK(r3.verify().error().message.find("file index 7 is past the file table") !=
        std::string::npos);

  // Special-opcode range < 1.
  gsym::Reader r4 = parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(3, 1, 1, {4, 0})}})}}));
  CHECK(render(r4, 0x1000).find("line table MaxDelta 1 < MinDelta 3") != std::string::npos);
  CHECK(!r4.decode_function(0).ok());

  // Overlong and overflowing LEB128.
  Bytes overlong = {0x02, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00};
  gsym::Reader r5 = parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(0, 0, 1, overlong)}})}}));
  CHECK(render(r5, 0x1000).find("LEB128 value longer than 10 bytes") != std::string::npos);
  CHECK(!r5.verify().ok());
  Bytes overflow = {0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00};
  gsym::Reader r6 = parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(0, 0, 1, overflow)}})}}));
  CHECK(render(r6, 0x1000).find("LEB128") != std::string::npos);
  // A 10-byte non-minimal encoding of 4 is accepted.
  Bytes nonminimal = {0x02, 0x84, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00};
  gsym::Reader r7 = parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(0, 0, 1, nonminimal)}})}}));
  CHECK(render(r7, 0x1004) == "f + 4 @ dir/a.c:1");

  // Table without EndSequence: rows before the cut still answer (LLVM stops
  // at the first row past the address), the rest is an error.
  gsym::Reader r8 =
      parse_ok(make_gsym({{0, record(0x10, kF, {{1, line_table(0, 0, 1, {0x02, 0x00, 0x02, 0x04})}})}}));
  CHECK(render(r8, 0x1001) == "f + 1 @ dir/a.c:1");
  CHECK(render(r8, 0x1004).find("line table: EOF found before EndSequence") != std::string::npos);
}

TEST_CASE("reader: no line table, unknown records, name offsets") {
  Bytes inl;
  inline_node(inl, {{0, 0x10}}, true, kF, 0, 0);
  inline_node(inl, {{0, 4}}, false, kSq, 1, 9);
  inl.push_back(0);
  // Inline info without a line table is ignored (LLVM); unknown type 9 skipped.
  gsym::Reader r = parse_ok(make_gsym({{0, record(0x10, kF, {{9, {1, 2, 3}}, {2, inl}})},
                                       {0x20, record(0x10, 0x999, {})}}));
  CHECK(render(r, 0x1002) == "f + 2");
  CHECK(r.decode_function(0).error().message == "unsupported InfoType 9");
  // A name offset past the table reads as "" (LLVM), verify reports it.
  CHECK(render(r, 0x1021) == " + 1");
  gsym::Reader r2 = parse_ok(make_gsym({{0, record(0x10, 0x999, {})}}));
  auto v = r2.verify();
  REQUIRE(!v.ok());
  CHECK(v.error().message ==
        "function[0] at 0x1000: string offset 0x999 is past the string table (size 0x13)");
  // Name 0 is invalid.
  gsym::Reader r3 = parse_ok(make_gsym({{0, record(0x10, 0, {})}}));
  CHECK(render(r3, 0x1000) == "error: invalid FunctionInfo Name value 0x00000000");
}

TEST_CASE("reader: inline walk: nesting, sibling choice, call file 0, multiple ranges") {
  Bytes lines = line_table(0, 0, 5, {0x02, 0x00, 0x00});  // one row: a.c:5 at +0
  Bytes inl;
  inline_node(inl, {{0, 0x40}}, true, kF, 0, 0);
  inline_node(inl, {{0, 4}, {0x20, 4}}, false, kSq, 1, 20);       // sq: [0,4) and [0x20,0x24)
  inline_node(inl, {{8, 0x10}}, true, kSq, 1, 21);                // sq: [8,0x18)
  inline_node(inl, {{2, 4}}, false, kLeaf, 1, 30);                // leaf: [0xa,0xe) from 8
  inline_node(inl, {{6, 4}}, false, kLeaf, 0, 31);                // leaf: [0xe,0x12), call file 0
  inl.push_back(0);
  inl.push_back(0);
  gsym::Reader r = parse_ok(make_gsym({{0, record(0x40, kF, {{1, lines}, {2, inl}})}}));
  CHECK(render(r, 0x1001) == "sq + 1 @ dir/a.c:5 [inlined] | f + 1 @ dir/a.c:20");
  CHECK(render(r, 0x1022) == "sq + 34 @ dir/a.c:5 [inlined] | f + 34 @ dir/a.c:20");
  CHECK(render(r, 0x100b) ==
        "leaf + 1 @ dir/a.c:5 [inlined] | sq + 3 @ dir/a.c:30 [inlined] | f + 11 @ dir/a.c:21");
  // Call file 0: the leaf frame disappears.
  CHECK(render(r, 0x100f) == "sq + 7 @ dir/a.c:5 [inlined] | f + 15 @ dir/a.c:21");
  CHECK(render(r, 0x1030) == "f + 48 @ dir/a.c:5");
  CHECK(render(r, 0x100b, {true, false}) == "f + 11 @ dir/a.c:5");
  auto v = r.verify();
  REQUIRE(v.ok());
  CHECK(v->inline_nodes == 5);

  // Inline call file beyond the table.
  Bytes bad;
  inline_node(bad, {{0, 0x40}}, true, kF, 0, 0);
  inline_node(bad, {{0, 4}}, false, kSq, 5, 1);
  bad.push_back(0);
  gsym::Reader r2 = parse_ok(make_gsym({{0, record(0x40, kF, {{1, lines}, {2, bad}})}}));
  CHECK(render(r2, 0x1001) == "error: failed to extract file[5]");
  CHECK(render(r2, 0x1010) == "f + 16 @ dir/a.c:5");
}

TEST_CASE("reader: inline nesting beyond the depth limit is an error") {
  Bytes lines = line_table(0, 0, 5, {0x02, 0x00, 0x00});
  // A root over [0x1000, 0x1020) holding a chain of `depth` nested nodes over
  // [0x1000, 0x1010), each called from a.c (so each adds a frame).
  for (size_t depth : {gsym::kMaxInlineDepth - 1, gsym::kMaxInlineDepth, size_t{5000}}) {
    Bytes inl;
    inline_node(inl, {{0, 0x20}}, true, kF, 0, 0);
    for (size_t i = 0; i < depth; ++i) inline_node(inl, {{0, 0x10}}, i + 1 < depth, kSq, 1, i);
    for (size_t i = 0; i < depth; ++i) inl.push_back(0);
    gsym::Reader r = parse_ok(make_gsym({{0, record(0x20, kF, {{1, lines}, {2, inl}})}}));
    gsym::LookupScratch scratch;
    auto found = r.lookup_into(0x1001, {}, scratch);
    if (depth < gsym::kMaxInlineDepth) {
      REQUIRE(found.ok());
      CHECK(scratch.frames.size() == depth + 1);
      CHECK(r.verify().ok());
      CHECK(render(r, 0x1011) == "f + 17 @ dir/a.c:5");
    } else {
      REQUIRE(!found.ok());
      CHECK(found.error().message == "InlineInfo nested deeper than 256");
      CHECK(r.decode_function(0).error().message == "InlineInfo nested deeper than 256");
      CHECK(!r.verify().ok());
    }
  }
  // Skipping a subtree (address outside it) stops at the limit too.
  Bytes inl;
  inline_node(inl, {{0, 0x20}}, true, kF, 0, 0);
  for (size_t i = 0; i < 5000; ++i) inline_node(inl, {{0, 0x10}}, i + 1 < 5000, kSq, 1, i);
  for (size_t i = 0; i < 5000; ++i) inl.push_back(0);
  gsym::Reader r = parse_ok(make_gsym({{0, record(0x20, kF, {{1, lines}, {2, inl}})}}));
  CHECK(render(r, 0x1011) == "error: InlineInfo nested deeper than 256");
}

TEST_CASE("reader: merged functions and call sites decode; lookup ignores them") {
  Bytes nested = record(0x10, kSq, {{1, line_table(0, 0, 3, {0x02, 0x00, 0x00})}});
  Bytes merged;
  put_u32(merged, 1);
  put_u32(merged, static_cast<uint32_t>(nested.size()));
  merged.insert(merged.end(), nested.begin(), nested.end());
  Bytes calls;
  put_u32(calls, 1);
  put_u64(calls, 4);
  calls.push_back(3);
  put_u32(calls, 2);
  put_u32(calls, kLeaf);
  put_u32(calls, kSq);
  gsym::Reader r = parse_ok(make_gsym(
      {{0, record(0x10, kF, {{1, line_table(0, 0, 7, {0x02, 0x00, 0x00})}, {3, merged}, {4, calls}})}}));
  CHECK(render(r, 0x1004) == "f + 4 @ dir/a.c:7");
  auto fn = r.decode_function(0);
  REQUIRE(fn.ok());
  REQUIRE(fn->merged.size() == 1);
  CHECK(fn->merged[0].name == "sq");
  CHECK(fn->merged[0].range == gsym::AddressRange{0x1000, 0x1010});
  CHECK(fn->merged[0].lines == std::vector<gsym::LineEntry>{{0x1000, 1, 3}});
  REQUIRE(fn->call_sites.size() == 1);
  CHECK(fn->call_sites[0].return_offset == 4);
  CHECK(fn->call_sites[0].flags == 3);
  CHECK(fn->call_sites[0].match_regex == std::vector<std::string>{"leaf", "sq"});
  auto v = r.verify();
  REQUIRE(v.ok());
  CHECK(v->merged_functions == 1);
  CHECK(v->call_sites == 1);
  CHECK(v->line_rows == 2);

  // Huge counts with little data are refused before allocating.
  Bytes huge;
  put_u32(huge, 0xffffffff);
  gsym::Reader r2 = parse_ok(make_gsym({{0, record(0x10, kF, {{4, huge}})}}));
  CHECK(r2.decode_function(0).error().message == "CallSiteInfo count 4294967295 exceeds the data");
  gsym::Reader r3 = parse_ok(make_gsym({{0, record(0x10, kF, {{3, huge}})}}));
  CHECK(r3.decode_function(0).error().message ==
        "MergedFunctionsInfo count 4294967295 exceeds the data");
}

TEST_CASE("reader: zero-size functions and equal starts follow LLVM") {
  // Two records at 0x1000 (sizes 8 and 0x20), a zero-size one at 0x1040.
  gsym::Reader r = parse_ok(make_gsym({{0, record(8, kF, {})},
                                       {0, record(0x20, kSq, {})},
                                       {0x40, record(0, kLeaf, {})}}));
  CHECK(render(r, 0x1000) == "f");
  CHECK(render(r, 0x1008) == "sq + 8");
  CHECK(render(r, 0x1020) == "not found");
  CHECK(render(r, 0x1040) == "leaf");
  CHECK(render(r, 0x10ff) == "leaf + 191");
  CHECK(render(r, 0xfff) == "not found");
}

TEST_CASE("reader: big-endian copies give identical answers") {
  Bytes be = byte_swapped(kTiny);
  REQUIRE(be[0] == 'G');
  gsym::Reader little = parse_ok(kTiny);
  gsym::Reader big = parse_ok(be);
  CHECK(big.header().endian == gsym::Endian::Big);
  CHECK(big.header().base_address == 0x400000);
  CHECK(render_all(big) == render_all(little));
  CHECK(*big.decode_function(0) == *little.decode_function(0));
  CHECK(big.verify().ok());

  Bytes llvm = llvm_written_fixture();
  if (llvm.empty()) {
    MESSAGE("gcc or llvm-gsymutil missing: LLVM-written part skipped");
    return;
  }
  gsym::Reader l2 = parse_ok(llvm);
  gsym::Reader b2 = parse_ok(byte_swapped(llvm));
  CHECK(render_all(b2) == render_all(l2));
  for (size_t i = 0; i < l2.function_count(); ++i)
    CHECK(*b2.decode_function(i) == *l2.decode_function(i));
  auto v1 = l2.verify(), v2 = b2.verify();
  REQUIRE(v1.ok());
  REQUIRE(v2.ok());
  CHECK(v1->inline_nodes == v2->inline_nodes);
  CHECK(v1->inline_nodes > 2);
}

TEST_CASE("reader: builder round trip, both byte orders") {
  gsym::Builder builder;
  const uint32_t file = builder.add_file({"/src", "x.c"});
  const uint32_t header = builder.add_file({"/src", "x.h"});
  gsym::Function fn;
  fn.range = {0x2000, 0x2100};
  fn.name = "outer";
  fn.lines = {{0x2000, file, 10}, {0x2010, header, 3}, {0x2050, header, 900}, {0x20f0, file, 2}};
  gsym::InlineNode n3{{{0x2012, 0x2014}}, "d3", header, 7, {}};
  gsym::InlineNode n2{{{0x2011, 0x2016}, {0x2030, 0x2040}}, "d2", header, 5, {n3}};
  gsym::InlineNode n1{{{0x2010, 0x2020}, {0x2030, 0x2060}}, "d1", file, 11, {n2}};
  fn.inline_tree = gsym::InlineNode{{{0x2000, 0x2100}}, "outer", 0, 0, {n1}};
  REQUIRE(builder.add_function(fn).ok());
  auto bytes = builder.encode();
  REQUIRE(bytes.ok());
  gsym::Reader r = parse_ok(*bytes);
  auto decoded = r.decode_function(0);
  REQUIRE(decoded.ok());
  CHECK(*decoded == fn);
  CHECK(render(r, 0x2013) ==
        "d3 + 1 @ /src/x.h:3 [inlined] | d2 + 2 @ /src/x.h:7 [inlined] | "
        "d1 + 3 @ /src/x.h:5 [inlined] | outer + 19 @ /src/x.c:11");
  CHECK(render(r, 0x2035) ==
        "d2 + 36 @ /src/x.h:3 [inlined] | d1 + 37 @ /src/x.h:5 [inlined] | outer + 53 @ /src/x.c:11");
  gsym::Reader big = parse_ok(byte_swapped(*bytes));
  CHECK(render_all(big) == render_all(r));
}

// The same content re-encoded as GSYM version 2.
Bytes as_version2(const gsym::Reader& r) {
  gsym::BuilderOptions options;
  options.version = gsym::kVersion2;
  options.endian = r.header().endian;
  options.base_address = r.header().base_address;
  options.build_id.assign(r.build_id().begin(), r.build_id().end());
  options.deduplicate = false;
  gsym::Builder b(options);
  auto files = r.decode_files();
  REQUIRE(files.ok());
  for (const gsym::FileEntry& f : *files) b.add_file(f);
  for (size_t i = 0; i < r.function_count(); ++i) REQUIRE(b.add_function(*r.decode_function(i)).ok());
  auto bytes = b.encode();
  REQUIRE(bytes.ok());
  return *bytes;
}

TEST_CASE("reader: steady-state lookups allocate nothing") {
  Bytes llvm = llvm_written_fixture();
  const Bytes& v1 = llvm.empty() ? kTiny : llvm;
  const Bytes v2 = as_version2(parse_ok(v1));
  for (const Bytes* input : {&v1, &v2}) {
    const Bytes& bytes = *input;
    CAPTURE(bytes.size());
    gsym::Reader r = parse_ok(bytes);
    CHECK(r.header().version == (input == &v1 ? 1 : 2));
    gsym::LookupScratch scratch(8);
    std::vector<uint64_t> addrs;
    for (size_t i = 0; i < r.function_count(); ++i)
      for (uint64_t d = 0; d < 64; ++d) addrs.push_back(r.function_start(i) + d);
    addrs.push_back(0);
    addrs.push_back(UINT64_MAX);
    // Failed lookups build an Error message; the steady state is about answers.
    std::erase_if(addrs, [&](uint64_t a) {
      for (int bits = 0; bits < 4; ++bits) {
        gsym::LookupOptions o{static_cast<bool>(bits & 1), static_cast<bool>(bits & 2)};
        if (!r.lookup_into(a, o, scratch).ok()) return true;
      }
      return false;
    });
    REQUIRE(addrs.size() > 100);
    size_t frames = 0;
    const uint64_t before = g_allocations.load();
    for (int round = 0; round < 50; ++round)
      for (uint64_t a : addrs) {
        for (int bits = 0; bits < 4; ++bits) {
          gsym::LookupOptions o{static_cast<bool>(bits & 1), static_cast<bool>(bits & 2)};
          auto found = r.for_each_frame(a, o, scratch, [&](const gsym::LookupFrame&) { ++frames; });
          (void)found.ok();
        }
      }
    const uint64_t after = g_allocations.load();
    CHECK(after - before == 0);
    CHECK(frames > addrs.size());
    // The counter does count: one allocating lookup moves it.
    (void)r.lookup(r.function_start(0));
    CHECK(g_allocations.load() > after);
  }
}

TEST_CASE("reader: lookups from several threads match single-threaded answers") {
  Bytes llvm = llvm_written_fixture();
  const Bytes& bytes = llvm.empty() ? kTiny : llvm;
  const std::vector<std::string> expected = render_all(parse_ok(bytes));
  // A reader nobody has looked up in yet: the threads race to index its
  // functions (built on a function's second lookup, under a lock).
  gsym::Reader fresh = parse_ok(bytes);
  std::vector<std::vector<std::string>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) results[t] = render_all(fresh);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& res : results) CHECK(res == expected);
}

TEST_CASE("reader: open and map read files; errors name the problem") {
  char path[] = "/tmp/gsym_reader_file.XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, kTiny.data(), kTiny.size()) == static_cast<ssize_t>(kTiny.size()));
  close(fd);
  auto opened = gsym::Reader::open(path);
  auto mapped = gsym::Reader::map(path);
  REQUIRE(opened.ok());
  REQUIRE(mapped.ok());
  CHECK(render(*opened, 0x401001) == render(*mapped, 0x401001));
  CHECK(render(*mapped, 0x401022) == "_start + 18 @ /home/user/demo/tiny.c:11");
  gsym::Reader moved = std::move(*mapped);
  CHECK(render(moved, 0x401005) == "f + 5 @ /home/user/demo/tiny.c:6");
  std::remove(path);
  CHECK(gsym::Reader::open("/nonexistent/x.gsym").error().message ==
        "cannot open: No such file or directory");
  CHECK(gsym::Reader::map("/nonexistent/x.gsym").error().message ==
        "cannot open: No such file or directory");
  CHECK(gsym::Error("bad", 0x1c).to_string() == "bad at offset 0x1c");
  CHECK(gsym::Error("bad").to_string() == "bad");
}

TEST_CASE("reader: without the lookup index, the same answers and no heap for it") {
  const Bytes llvm = llvm_written_fixture();
  for (const Bytes* bytes : {&kTiny, &llvm}) {
    if (bytes->empty()) {
      MESSAGE("gcc or llvm-gsymutil missing: LLVM-written part skipped");
      continue;
    }
    gsym::Reader indexed = parse_ok(*bytes);
    auto plain = gsym::Reader::parse(*bytes, gsym::Reader::Index::Skip);
    REQUIRE(plain.ok());
    CHECK(render_all(*plain) == render_all(indexed));
    CHECK(plain->memory_bytes() == 0);  // parse borrows the bytes
  }
}

TEST_CASE("reader: a function is indexed on its second lookup, not at open nor on its first") {
  const Bytes llvm = llvm_written_fixture();
  if (llvm.empty()) {
    MESSAGE("gcc or llvm-gsymutil missing: skipped");
    return;
  }
  gsym::Reader reader = parse_ok(llvm);
  const size_t at_open = reader.memory_bytes();
  gsym::LookupScratch scratch;
  auto lookup_each_function = [&] {
    for (size_t i = 0; i < reader.function_count(); ++i)
      REQUIRE(reader.lookup_into(reader.function_start(i) + 1, {}, scratch).ok());
  };
  lookup_each_function();
  CHECK(reader.memory_bytes() == at_open);
  lookup_each_function();
  const size_t indexed = reader.memory_bytes();
  CHECK(indexed > at_open);  // the fixture has long line programs and inline trees
  lookup_each_function();
  CHECK(reader.memory_bytes() == indexed);  // built once
}
