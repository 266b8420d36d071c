// GSYM version 2 (LLVM 23's format, gsym/FORMAT.md §9): the builder writes
// it on request in LLVM main's layout, the reader reads it in both byte
// orders with the answers the same content gives in version 1, and damaged
// headers and directories are one-line errors.
#include <doctest/doctest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/reader/dump.h"
#include "gsym/format/format.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

using Bytes = std::vector<uint8_t>;

// Functions with everything a record can hold: line tables, a nested inline
// tree, merged functions and call sites (names in records are 8-byte string
// offsets in version 2), a zero-size symbol.
void add_sample(Builder& b) {
  const uint32_t c = b.add_file({"/src", "a.c"});
  const uint32_t h = b.add_file({"/src/include", "a.h"});
  Function outer;
  outer.range = {0x401000, 0x401100};
  outer.name = "outer";
  outer.lines = {{0x401000, c, 10}, {0x401010, h, 3}, {0x401050, h, 900}, {0x4010f0, c, 2}};
  InlineNode n3{{{0x401012, 0x401014}}, "d3", h, 7, {}};
  InlineNode n2{{{0x401011, 0x401016}, {0x401030, 0x401040}}, "d2", h, 5, {n3}};
  InlineNode n1{{{0x401010, 0x401020}, {0x401030, 0x401060}}, "d1", c, 11, {n2}};
  InlineNode sib{{{0x401070, 0x401080}}, "sib", c, 12, {}};
  outer.inline_tree = InlineNode{{{0x401000, 0x401100}}, "outer", 0, 0, {n1, sib}};
  REQUIRE(b.add_function(outer).ok());

  Function folded;
  folded.range = {0x401100, 0x401140};
  folded.name = "folded_b";
  folded.lines = {{0x401100, c, 50}};
  Function alias = folded;
  alias.name = "folded_a";
  alias.call_sites = {CallSite{0x8, CallSite::kInternal, {"callee_a"}}};
  folded.merged = {alias};
  folded.call_sites = {CallSite{0x4, CallSite::kInternal | CallSite::kExternal, {"x", "y.*"}}};
  REQUIRE(b.add_function(folded).ok());

  Function symbol;
  symbol.range = {0x401140, 0x401140};
  symbol.name = "zero_size_symbol";
  REQUIRE(b.add_function(symbol).ok());

  Function last{{0x401200, 0x401210}, "last", {{0x40120f, h, 1}}, std::nullopt, {}, {}};
  REQUIRE(b.add_function(last).ok());
}

Bytes encode_sample(uint16_t version, Endian endian, std::vector<uint8_t> build_id = {1, 2, 3, 4}) {
  BuilderOptions options;
  options.version = version;
  options.endian = endian;
  options.build_id = std::move(build_id);
  Builder b(options);
  add_sample(b);
  auto bytes = b.encode();
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
  return std::move(*bytes);
}

// Every frame of a lookup as one line (or the error / "not found").
std::string render(const Reader& r, uint64_t addr, LookupOptions options = {}) {
  LookupScratch scratch;
  auto found = r.lookup_into(addr, options, scratch);
  if (!found) return "error: " + found.error().message;
  if (!*found) return "not found";
  std::string out;
  for (const LookupFrame& f : scratch.frames)
    out += std::string(f.name) + "+" + std::to_string(f.offset) + "@" + std::string(f.directory) +
           "/" + std::string(f.basename) + ":" + std::to_string(f.line) +
           (f.inlined ? " [i] | " : "");
  return out;
}

// Lookups at every address from just below the first function to past the
// last, with each option set.
std::vector<std::string> render_all(const Reader& r) {
  std::vector<std::string> out;
  const uint64_t first = r.function_start(0), last = r.function_start(r.function_count() - 1);
  for (uint64_t a = first - 2; a < last + 0x20; ++a)
    for (int bits = 0; bits < 4; ++bits)
      out.push_back(render(r, a, {static_cast<bool>(bits & 1), static_cast<bool>(bits & 2)}));
  return out;
}

uint32_t le32(const Bytes& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t le64(const Bytes& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void put32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put64(Bytes& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

std::string parse_error(const Bytes& bytes) {
  auto r = Reader::parse(bytes);
  return r.ok() ? "<parsed>" : r.error().message;
}

// Directory entry k of a little-endian version 2 file.
constexpr size_t entry_at(size_t k) { return kHeaderSizeV2 + kDirectoryEntrySize * k; }

}  // namespace

TEST_CASE("gsym v2: both byte orders decode and answer every address like version 1") {
  const Bytes v1 = encode_sample(kVersion, Endian::Little);
  auto r1 = Reader::parse(v1);
  REQUIRE(r1.ok());
  const std::vector<std::string> expected = render_all(*r1);
  for (Endian endian : {Endian::Little, Endian::Big}) {
    CAPTURE(int(endian));
    const Bytes v2 = encode_sample(kVersion2, endian);
    auto r2 = Reader::parse(v2);
    REQUIRE_MESSAGE(r2.ok(), r2.error().to_string());
    CHECK(r2->header().version == 2);
    CHECK(r2->header().endian == endian);
    CHECK(r2->header().base_address == 0x401000);
    CHECK(std::vector<uint8_t>(r2->build_id().begin(), r2->build_id().end()) ==
          std::vector<uint8_t>{1, 2, 3, 4});
    CHECK(render_all(*r2) == expected);
    REQUIRE(r2->function_count() == r1->function_count());
    for (size_t i = 0; i < r1->function_count(); ++i) {
      auto a = r1->decode_function(i), b = r2->decode_function(i);
      REQUIRE(a.ok());
      REQUIRE_MESSAGE(b.ok(), b.error().to_string());
      CHECK(*a == *b);
    }
    CHECK(*r1->decode_files() == *r2->decode_files());
    auto report1 = r1->verify(), report2 = r2->verify();
    REQUIRE(report1.ok());
    REQUIRE_MESSAGE(report2.ok(), report2.error().to_string());
    CHECK(report2->functions == report1->functions);
    CHECK(report2->line_rows == report1->line_rows);
    CHECK(report2->inline_nodes == report1->inline_nodes);
    CHECK(report2->strings == report1->strings);
    CHECK(report2->merged_functions == 1);
    CHECK(report2->call_sites == 2);
  }
  // The inline chain really is read through 8-byte names.
  const Bytes big = encode_sample(kVersion2, Endian::Big);  // parse() borrows it
  auto r2 = Reader::parse(big);
  REQUIRE(r2.ok());
  CHECK(render(*r2, 0x401013) ==
        "d3+1@/src/include/a.h:3 [i] | d2+2@/src/include/a.h:7 [i] | "
        "d1+3@/src/include/a.h:5 [i] | outer+19@/src/a.c:11");
}

TEST_CASE("gsym v2: the layout LLVM main writes") {
  const Bytes b = encode_sample(kVersion2, Endian::Little);
  CHECK(le32(b, 0) == kMagic);
  CHECK(b[4] == 2);
  CHECK(b[5] == 0);
  CHECK(b[6] == 2);  // AddrOffSize: last start 0x200 above the base
  CHECK(b[7] == 0);  // StrTableEncoding
  CHECK(le64(b, 8) == 0x401000);
  CHECK(le32(b, 16) == 4);
  // Directory: UUID, AddrOffsets, AddrInfoOffsets, FileTable, StringTable,
  // FunctionInfo, then the all-zero end; sections in that order, right
  // after it, each aligned as LLVM aligns it.
  const std::vector<uint32_t> types = {6, 1, 2, 4, 3, 5};
  const std::vector<uint64_t> align = {1, 2, 8, 4, 1, 4};
  uint64_t expected_offset = entry_at(types.size() + 1);
  for (size_t k = 0; k < types.size(); ++k) {
    CAPTURE(k);
    CHECK(le32(b, entry_at(k)) == types[k]);
    const uint64_t offset = le64(b, entry_at(k) + 4), size = le64(b, entry_at(k) + 12);
    expected_offset = (expected_offset + align[k] - 1) / align[k] * align[k];
    CHECK(offset == expected_offset);
    expected_offset = offset + size;
  }
  CHECK(expected_offset == b.size());
  for (size_t i = 0; i < kDirectoryEntrySize; ++i) CHECK(b[entry_at(types.size()) + i] == 0);
  CHECK(le64(b, entry_at(0) + 12) == 4);     // UUID bytes
  CHECK(le64(b, entry_at(1) + 12) == 4 * 2); // 4 starts x 2 bytes
  CHECK(le64(b, entry_at(2) + 12) == 4 * 8); // u64 info offsets
  // Info offsets count from the FunctionInfo section: the first record is at 0.
  const uint64_t infos = le64(b, entry_at(2) + 4), records = le64(b, entry_at(5) + 4);
  CHECK(le64(b, infos) == 0);
  // The record: u32 size, then an 8-byte name offset into the string table.
  CHECK(le32(b, records) == 0x100);
  const uint64_t strtab = le64(b, entry_at(4) + 4);
  CHECK(std::string(reinterpret_cast<const char*>(b.data() + strtab + le64(b, records + 4))) ==
        "outer");
  // The file table: u32 count, 16-byte entries of two u64 string offsets.
  const uint64_t files = le64(b, entry_at(3) + 4);
  CHECK(le32(b, files) == 3);
  CHECK(le64(b, entry_at(3) + 12) == 4 + 3 * 16);
  CHECK(std::string(reinterpret_cast<const char*>(b.data() + strtab + le64(b, files + 4 + 16 + 8))) ==
        "a.c");
}

TEST_CASE("gsym v2: deterministic bytes, no UUID section without a build ID, long build IDs") {
  CHECK(encode_sample(kVersion2, Endian::Little) == encode_sample(kVersion2, Endian::Little));
  const Bytes none = encode_sample(kVersion2, Endian::Little, {});
  CHECK(le32(none, entry_at(0)) == static_cast<uint32_t>(GlobalInfoType::AddrOffsets));
  auto r = Reader::parse(none);
  REQUIRE(r.ok());
  CHECK(r->build_id().empty());
  CHECK(r->sections().size() == 5);

  // Version 2 stores any UUID length; version 1 stops at 20 bytes.
  std::vector<uint8_t> id32(32);
  for (size_t i = 0; i < id32.size(); ++i) id32[i] = static_cast<uint8_t>(0xa0 + i);
  const Bytes long_bytes = encode_sample(kVersion2, Endian::Big, id32);
  auto long_id = Reader::parse(long_bytes);
  REQUIRE(long_id.ok());
  CHECK(std::vector<uint8_t>(long_id->build_id().begin(), long_id->build_id().end()) == id32);
  BuilderOptions options;
  options.build_id = id32;
  Builder v1(options);
  add_sample(v1);
  auto refused = v1.encode();
  REQUIRE(!refused.ok());
  CHECK(refused.error().message == "invalid build ID size 32 (GSYM version 1 allows at most 20 bytes)");
  options.version = 3;
  Builder v3(options);
  add_sample(v3);
  auto unknown = v3.encode();
  REQUIRE(!unknown.ok());
  CHECK(unknown.error().message == "unsupported GSYM version 3 (1 or 2)");
}

TEST_CASE("gsym v2: damaged headers and directories are one-line errors") {
  const Bytes good = encode_sample(kVersion2, Endian::Little);
  REQUIRE(parse_error(good) == "<parsed>");

  // Every truncation fails (the FunctionInfo section reaches the end), with
  // one line, and never crashes.
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string message = parse_error(Bytes(good.begin(), good.begin() + n));
    CAPTURE(n);
    CHECK(message != "<parsed>");
    CHECK(message.find('\n') == std::string::npos);
  }
  CHECK(parse_error(Bytes(good.begin(), good.begin() + 19)) ==
        "not enough data for a GSYM version 2 header");
  CHECK(parse_error(Bytes(good.begin(), good.begin() + entry_at(3) + 7)) ==
        "global data directory has no end (entry at 0x50 is past the end of the file)");

  Bytes b = good;
  b[6] = 3;
  CHECK(parse_error(b) == "invalid address offset size 3");
  b = good;
  b[7] = 1;
  CHECK(parse_error(b) == "unsupported string table encoding 1");
  b = good;
  b[4] = 3;
  CHECK(parse_error(b) == "unsupported GSYM version 3");

  b = good;  // the StringTable entry turned into a second AddrOffsets
  put32(b, entry_at(4), 1);
  CHECK(parse_error(b) == "global data AddrOffsets appears twice");
  b = good;  // the FunctionInfo entry ends the directory early
  std::memset(b.data() + entry_at(5), 0, kDirectoryEntrySize);
  CHECK(parse_error(b) == "global data directory has no FunctionInfo");
  b = good;
  put64(b, entry_at(4) + 12, 0);
  CHECK(parse_error(b) == "global data StringTable has size 0");
  b = good;
  put64(b, entry_at(5) + 4, good.size() - 8);
  CHECK(parse_error(b) == "global data FunctionInfo [" + hex_number(good.size() - 8) +
                              ", +" + hex_number(le64(good, entry_at(5) + 12)) +
                              ") extends past the end of the file");
  b = good;
  put64(b, entry_at(1) + 12, 6);
  CHECK(parse_error(b) == "AddrOffsets size 0x6 is not 4 x 2");
  b = good;
  put64(b, entry_at(2) + 12, 24);
  CHECK(parse_error(b) == "AddrInfoOffsets size 0x18 is not 4 x 8");
  b = good;
  put32(b, le64(good, entry_at(3) + 4), 4);  // file count 4, room for 3
  CHECK(parse_error(b) == "file table (4 entries) extends past the end of its section");
  b = good;  // the last record's info offset past its section
  const uint64_t infos = le64(good, entry_at(2) + 4);
  put64(b, infos + 3 * 8, le64(good, entry_at(5) + 12) - 4);
  CHECK(parse_error(b) == "function info 3 offset " + hex_number(le64(good, entry_at(5) + 12) - 4) +
                              " is past the end of the FunctionInfo section");

  // Unknown section types are skipped, as LLVM skips them.
  b = good;
  put32(b, entry_at(0), 77);  // the UUID entry becomes an unknown one
  auto r = Reader::parse(b);
  REQUIRE(r.ok());
  CHECK(r->build_id().empty());
  CHECK(r->sections()[0].type == 77);
  CHECK(render(*r, 0x401013) == render(*Reader::parse(good), 0x401013));
}

TEST_CASE("gsym v2: dump shows the version and the directory") {
  const Bytes b = encode_sample(kVersion2, Endian::Big);
  auto r = Reader::parse(b);
  REQUIRE(r.ok());
  std::ostringstream out;
  REQUIRE(write_dump(*r, out).ok());
  const std::string text = out.str();
  CHECK(text.find("  Version      = 0x0002\n") != std::string::npos);
  CHECK(text.find("(big-endian)") != std::string::npos);
  CHECK(text.find("  UUID         = 01020304\n\nGlobal Data:\n"
                  "TYPE                 OFFSET             SIZE\n"
                  "UUID                 0x00000000000000a0 0x0000000000000004\n"
                  "AddrOffsets          0x00000000000000a4 0x0000000000000008\n") !=
        std::string::npos);
  CHECK(text.find("FunctionInfo[1]: [0x0000000000401100 - 0x0000000000401140) \"folded_b\"") !=
        std::string::npos);
  // Version 1's dump keeps its own header lines.
  const Bytes v1 = encode_sample(kVersion, Endian::Little);
  auto r1 = Reader::parse(v1);
  REQUIRE(r1.ok());
  std::ostringstream out1;
  REQUIRE(write_dump(*r1, out1).ok());
  CHECK(out1.str().find("Global Data") == std::string::npos);
  CHECK(out1.str().find("  StrtabOffset = ") != std::string::npos);
}
