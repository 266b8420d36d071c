// userspace/process/python_runtime: CPython 3.11's line tables decoded
// from hand-made and CPython-made tables; code objects named from a
// synthetic memory image (unreadable, implausible, reused objects, the cache
// bounds); the layout table compared with the offsets the compiler measures
// from each CPython's headers (tests/tools/python_offsets.c), and 3.13's
// read from its _Py_DebugOffsets (well-formed and malformed blocks, pyenv's
// libpython3.13 against its headers); and real python3.11, 3.12 and 3.13
// processes named through process_vm_readv against what the interpreter
// itself says, every instruction offset of each code object, with the frame
// walk the BPF sampler makes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gsym/convert/elf_image.h"
#include "tests/support/fake_python.h"
#include "tests/unit/test_files.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/process/process_image.h"
#include "userspace/process/proc_maps.h"
#include "userspace/process/python_runtime.h"

extern char** environ;

using namespace gsymprof;

namespace {

// ---- Line-table entries (Objects/locations.md) ----

uint8_t first_byte(unsigned code, unsigned units) { return static_cast<uint8_t>(0x80 | (code << 3) | (units - 1)); }

void put_varint(std::vector<uint8_t>& out, uint64_t value) {
  while (value >= 64) {
    out.push_back(static_cast<uint8_t>(64 | (value & 63)));
    value >>= 6;
  }
  out.push_back(static_cast<uint8_t>(value));
}

void put_signed_varint(std::vector<uint8_t>& out, int64_t value) {
  put_varint(out, value < 0 ? (static_cast<uint64_t>(-value) << 1) | 1 : static_cast<uint64_t>(value) << 1);
}

// Entry builders: `units` code units (1-8) each.
void short_form(std::vector<uint8_t>& t, unsigned units, unsigned group = 0) {
  t.push_back(first_byte(group, units));
  t.push_back(0x12);
}
void one_line(std::vector<uint8_t>& t, unsigned units, unsigned delta) {
  t.push_back(first_byte(10 + delta, units));
  t.push_back(4);
  t.push_back(9);
}
void no_columns(std::vector<uint8_t>& t, unsigned units, int64_t delta) {
  t.push_back(first_byte(13, units));
  put_signed_varint(t, delta);
}
void long_form(std::vector<uint8_t>& t, unsigned units, int64_t delta) {
  t.push_back(first_byte(14, units));
  put_signed_varint(t, delta);
  put_varint(t, 2);    // end line - line
  put_varint(t, 1);    // column + 1
  put_varint(t, 300);  // end column + 1: two bytes
}
void no_location(std::vector<uint8_t>& t, unsigned units) { t.push_back(first_byte(15, units)); }

// Every instruction offset's line by python311_line, 0 for nullopt.
std::vector<uint32_t> lines_of(const std::vector<uint8_t>& table, uint32_t first, int32_t bytes) {
  std::vector<uint32_t> out;
  for (int32_t offset = 0; offset < bytes; offset += 2) out.push_back(python311_line(table, first, offset).value_or(0));
  return out;
}

// ---- CPython-made table: sample() below, compiled by Debian's 3.11.2 ----
//  1 def sample(items):
//  2     total = 0
//  3     for item in items:
//  4         if item > 2:
//  5             total += (item *
//  6                       2)
//  7         else:
//  8             total -= 1
//  9     try:
// 10         x = 1 / total
// 11     except ZeroDivisionError:
// 12         x = None
// 13     return x
const std::vector<uint8_t> kSampleTable = {
    0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xd8, 0x10, 0x15, 0xf0, 0x00, 0x05, 0x05, 0x17, 0xf0, 0x00, 0x05,
    0x05, 0x17, 0x88, 0x04, 0xd8, 0x0b, 0x0f, 0x90, 0x21, 0x8a, 0x38, 0x88, 0x38, 0xd8, 0x0c, 0x11, 0x90, 0x64,
    0xd8, 0x16, 0x17, 0xf1, 0x03, 0x01, 0x17, 0x18, 0xf1, 0x00, 0x01, 0x0d, 0x19, 0x88, 0x45, 0x88, 0x45, 0xf0,
    0x06, 0x00, 0x0d, 0x12, 0x90, 0x51, 0x89, 0x4a, 0x88, 0x45, 0x88, 0x45, 0xf0, 0x02, 0x03, 0x05, 0x11, 0xd8,
    0x0c, 0x0d, 0x90, 0x05, 0x89, 0x49, 0x88, 0x01, 0x88, 0x01, 0xf8, 0xdd, 0x0b, 0x1c, 0xf0, 0x00, 0x01, 0x05,
    0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xd8, 0x0c, 0x10, 0x88, 0x01, 0x88, 0x01,
    0x88, 0x01, 0xf0, 0x03, 0x01, 0x05, 0x11, 0xf8, 0xf8, 0xf8, 0xe0, 0x0b, 0x0c, 0x80, 0x48};
// [co_positions()[i][0] for i in range(55)], None as 0.
const std::vector<uint32_t> kSampleLines = {1,  2,  2,  3,  3,  3,  3,  4,  4,  4,  4,  4,  4,  5,  5,  6,  5,  5, 5,
                                            5,  5,  5,  8,  8,  8,  8,  8,  8,  9,  10, 10, 10, 10, 10, 10, 0,  11, 11,
                                            11, 11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 11, 0,  0,  0,  13, 13};

}  // namespace

TEST_CASE("python line table: each form, deltas, runs of code units") {
  std::vector<uint8_t> t;
  short_form(t, 2);       // 0-3: line 10
  one_line(t, 1, 1);      // 4: 11
  one_line(t, 3, 2);      // 6-10: 13
  one_line(t, 1, 0);      // 12: 13
  no_columns(t, 2, 7);    // 14-16: 20
  no_columns(t, 1, -15);  // 18: 5 (negative delta)
  long_form(t, 8, 100);   // 20-34: 105 (two-byte varint)
  long_form(t, 1, -4);    // 36: 101
  no_location(t, 2);      // 38-40: none; the line stays 101 for what follows
  short_form(t, 1, 9);    // 42: 101
  one_line(t, 1, 2);      // 44: 103
  CHECK(lines_of(t, 10, 46) == std::vector<uint32_t>{10, 10, 11, 13, 13, 13, 13, 20, 20, 5, 105, 105, 105, 105, 105,
                                                      105, 105, 105, 101, 0, 0, 101, 103});
  CHECK(python311_line(t, 10, -2) == 10u);  // before the first instruction: the first line
  CHECK(!python311_line(t, 10, 46));        // past the table
  CHECK(!python311_line(t, 10, 3));         // odd: not an instruction
  CHECK(!python311_line(t, 10, -1));
  CHECK(!python311_line(t, 10, -4));
  CHECK(!python311_line(t, 10, 38));        // no location
  CHECK(!python311_line(t, 10, INT32_MIN));

  auto ranges = python311_line_ranges(t, 10);
  REQUIRE(ranges);
  CHECK(ranges->size() == 11);
  CHECK(ranges->back().end == 46);
  CHECK(ranges->at(8).start == 38);
  CHECK(!ranges->at(8).line);

  // An empty table covers nothing; -2 is still the first line.
  CHECK(python311_line({}, 7, -2) == 7u);
  CHECK(!python311_line({}, 7, 0));
}

TEST_CASE("python line table: CPython 3.11's own table, every code unit as co_positions says") {
  REQUIRE(kSampleLines.size() == 55);
  CHECK(lines_of(kSampleTable, 1, 110) == kSampleLines);
  auto ranges = python311_line_ranges(kSampleTable, 1);
  REQUIRE(ranges);
  CHECK(ranges->back().end == 110);
  // The same table from another first line: every line moves with it.
  std::vector<uint32_t> moved = lines_of(kSampleTable, 1001, 110);
  for (size_t i = 0; i < moved.size(); ++i) CHECK(moved[i] == (kSampleLines[i] ? kSampleLines[i] + 1000 : 0));
}

TEST_CASE("python line table: malformed tables name no line at all") {
  auto refused = [](const std::vector<uint8_t>& t) {
    CHECK(!python311_line_ranges(t, 10));
    CHECK(!python311_line(t, 10, 0));
    CHECK(!python311_line(t, 10, -2));
  };
  refused({0x00});                                       // no entry bit
  refused({first_byte(0, 1)});                           // short form without its byte
  refused({first_byte(0, 1), 0x12, 0x13});               // ... with one byte too many
  refused({first_byte(10, 1), 4});                       // one-line form missing a column
  refused({first_byte(13, 1)});                          // no varint
  refused({first_byte(13, 1), 0x42});                    // varint continued past the end
  refused({first_byte(13, 1), 0x42, first_byte(0, 1), 0});  // ... into the next entry
  refused({first_byte(14, 1), 2, 0, 0});                 // long form: a varint short
  refused({first_byte(15, 1), 0});                       // no-location with a byte
  refused({first_byte(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f});  // varint over 32 bits
  std::vector<uint8_t> below_zero;
  no_columns(below_zero, 1, -11);  // line 10 - 11
  refused(below_zero);
  std::vector<uint8_t> later;  // valid first, broken later: still no line
  short_form(later, 1);
  later.push_back(0x05);
  refused(later);
  // Truncated anywhere, CPython's table is refused or names exactly what it did.
  for (size_t size = 0; size < kSampleTable.size(); ++size) {
    std::span<const uint8_t> cut(kSampleTable.data(), size);
    auto ranges = python311_line_ranges(cut, 1);
    if (!ranges) continue;
    for (const PythonLineRange& r : *ranges)
      for (uint32_t at = r.start; at < r.end; at += 2) CHECK(r.line.value_or(0) == kSampleLines[at / 2]);
  }
  std::vector<uint8_t> huge(kMaxPythonLineTableBytes + 2, 0);
  for (size_t i = 0; i < huge.size(); i += 2) huge[i] = first_byte(0, 1), huge[i + 1] = 0;
  CHECK(!python311_line_ranges(huge, 1));
}

// ---- The namer over a synthetic image ----

// ---- CPython 3.13's _Py_DebugOffsets ----
namespace {

// A field of 3.13's _Py_DebugOffsets the layout is read from: where it is
// (its name as tests/tools/python_offsets.c prints it, "debug_offsets_"
// before; the header test compares the position), its value in pyenv's
// 3.13.0 (x86-64), the layout member it gives (nullptr: a structure's size
// or a value only checked) and a change of value that stays in bounds
// (0: none does), to see that exactly that member follows it.
struct DebugField {
  const char* name;
  size_t position;
  uint64_t value;
  uint32_t PythonLayout::* member;
  int64_t nudge;
};

const std::vector<DebugField>& debug313_fields() {
  static const std::vector<DebugField> fields = {
      {"version", 8, 0x030d00f0, nullptr, 0},
      {"free_threaded", 16, 0, nullptr, 0},
      {"runtime_size", 24, 283320, nullptr, 0},
      {"runtime_interpreters_head", 40, 632, &PythonLayout::runtime_interpreters_head, 8},
      {"interp_size", 48, 194968, nullptr, 0},
      {"interp_threads_head", 72, 7344, &PythonLayout::interp_threads_head, 8},
      {"tstate_size", 152, 304, nullptr, 0},
      {"tstate_next", 168, 8, &PythonLayout::tstate_next, 8},
      {"tstate_interp", 176, 16, &PythonLayout::tstate_interp, 8},
      {"tstate_current_frame", 184, 72, &PythonLayout::tstate_cframe, 8},
      {"tstate_thread_id", 192, 152, &PythonLayout::tstate_thread_id, 8},
      {"tstate_native_thread_id", 200, 160, &PythonLayout::tstate_native_thread_id, 8},
      {"frame_size", 224, 80, nullptr, 0},
      {"frame_previous", 232, 8, &PythonLayout::frame_previous, 8},
      {"frame_executable", 240, 0, &PythonLayout::frame_code, 8},
      {"frame_instr_ptr", 248, 56, &PythonLayout::frame_prev_instr, 8},
      {"frame_owner", 264, 70, &PythonLayout::frame_owner, 1},
      {"code_size", 272, 208, nullptr, 0},
      {"code_filename", 280, 112, &PythonLayout::code_filename, 8},
      {"code_name", 288, 120, &PythonLayout::code_name, 8},
      {"code_qualname", 296, 128, &PythonLayout::code_qualname, 8},
      {"code_linetable", 304, 136, &PythonLayout::code_linetable, 8},
      {"code_firstlineno", 312, 68, &PythonLayout::code_firstlineno, 4},
      {"code_adaptive", 344, 200, &PythonLayout::code_adaptive, 4},
      {"object_size", 352, 16, nullptr, 0},
      {"object_type", 360, 8, &PythonLayout::object_type, -8},
      {"type_size", 368, 416, nullptr, 0},
      {"type_name", 376, 24, &PythonLayout::type_name, 8},
      {"type_flags", 392, 168, &PythonLayout::type_flags, 8},
      {"bytes_size", 512, 40, nullptr, 0},
      {"bytes_ob_size", 520, 16, &PythonLayout::bytes_size, 0},  // is PyVarObject's: checked
      {"bytes_data", 528, 32, &PythonLayout::bytes_data, 1},
      {"unicode_size", 536, 64, nullptr, 0},
      {"unicode_state", 544, 32, &PythonLayout::unicode_state, 4},
      {"unicode_length", 552, 16, &PythonLayout::unicode_length, 8},
      {"unicode_ascii_size", 560, 40, &PythonLayout::unicode_ascii_size, 0},  // sets the compact size: checked
  };
  return fields;
}

constexpr uint32_t kPython3130 = 0x030d00f0;
constexpr uint64_t kRuntimeSize3130 = 283320;

// The start of a 3.13 _PyRuntime: pyenv 3.13.0's debug offsets, the rest
// of the block (offsets the layout does not take) a filler.
std::vector<uint8_t> debug_offsets_313() {
  std::vector<uint8_t> bytes(kPython313DebugOffsetsBytes, 0x5a);
  std::memcpy(bytes.data(), "xdebugpy", 8);
  for (const DebugField& field : debug313_fields()) std::memcpy(&bytes[field.position], &field.value, 8);
  return bytes;
}

void set_debug_field(std::vector<uint8_t>& bytes, const char* name, uint64_t value) {
  for (const DebugField& field : debug313_fields())
    if (std::string_view(field.name) == name) {
      std::memcpy(&bytes[field.position], &value, 8);
      return;
    }
  FAIL("no debug offsets field ", name);
}

// 3.13.0's layout, as its headers say (the header test compares).
PythonLayout expected_layout313() {
  PythonLayout l;
  l.version = 0x030d;
  l.runtime_interpreters_head = 632;
  l.interp_threads_head = 7344;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 152;
  l.tstate_native_thread_id = 160;
  l.tstate_cframe = 72;
  l.frame_code = 0;
  l.frame_previous = 8;
  l.frame_prev_instr = 56;
  l.frame_owner = 70;
  l.frame_owned_by_generator = 1;
  l.frame_owned_by_cstack = 3;
  l.code_adaptive = 200;
  l.object_type = 8;
  l.var_object_size = 16;
  l.type_name = 24;
  l.type_flags = 168;
  l.code_firstlineno = 68;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  l.unicode_length = 16;
  l.unicode_state = 32;
  l.unicode_ascii_size = 40;
  l.unicode_compact_size = 56;
  l.unicode_kind_shift = 2;
  l.unicode_compact_shift = 5;
  l.unicode_ascii_shift = 6;
  l.bytes_size = 16;
  l.bytes_data = 32;
  return l;
}

// The layout python_layout_for gives a 3.13.0 runtime.
const PythonLayout& layout313() {
  static const PythonLayout* layout = [] {
    PythonSymbols symbols;
    symbols.hexversion = kPython3130;
    symbols.debug_layout = python_layout_from_debug_offsets(debug_offsets_313(), kPython3130, kRuntimeSize3130);
    return python_layout_for(symbols);
  }();
  REQUIRE(layout);
  return *layout;
}

}  // namespace

TEST_CASE("python debug offsets: 3.13's layout read from its _Py_DebugOffsets, each field from its place") {
  const std::vector<uint8_t> good = debug_offsets_313();
  std::optional<PythonLayout> layout = python_layout_from_debug_offsets(good, kPython3130, kRuntimeSize3130);
  REQUIRE(layout);
  CHECK(*layout == expected_layout313());
  CHECK(python_layout_from_debug_offsets(good, kPython3130, 0) == layout);                  // size unknown
  CHECK(python_layout_from_debug_offsets(good, 0x030d05f0, kRuntimeSize3130) == layout);   // Py_Version 3.13.5
  std::vector<uint8_t> longer = good;
  longer.resize(4096, 0xff);  // what follows the block is not read
  CHECK(python_layout_from_debug_offsets(longer, kPython3130, kRuntimeSize3130) == layout);

  // Each member comes from its own place: a change there moves it alone.
  for (const DebugField& field : debug313_fields()) {
    if (!field.member || field.nudge == 0) continue;
    CAPTURE(field.name);
    std::vector<uint8_t> bytes = good;
    set_debug_field(bytes, field.name, field.value + static_cast<uint64_t>(field.nudge));
    std::optional<PythonLayout> moved = python_layout_from_debug_offsets(bytes, kPython3130, kRuntimeSize3130);
    REQUIRE(moved);
    PythonLayout expected = expected_layout313();
    expected.*field.member = static_cast<uint32_t>(field.value + static_cast<uint64_t>(field.nudge));
    CHECK(*moved == expected);
  }

  // python_layout_for: the debug offsets' layout, kept once.
  PythonSymbols symbols;
  symbols.hexversion = kPython3130;
  symbols.debug_layout = layout;
  const PythonLayout* kept = python_layout_for(symbols);
  REQUIRE(kept);
  CHECK(*kept == *layout);
  CHECK(python_layout_for(symbols) == kept);
  CHECK(kept == &layout313());
  PythonSymbols table = symbols;
  table.hexversion = 0x030c01f0;  // a table's version: the table, whatever else
  CHECK(python_layout_for(table) == python_layout(0x030c01f0));
  PythonSymbols mismatched = symbols;
  mismatched.hexversion = 0x030e00f0;  // 3.14 with a 3.13 layout: none
  CHECK(!python_layout_for(mismatched));
  symbols.debug_layout.reset();
  CHECK(!python_layout_for(symbols));
}

TEST_CASE("python debug offsets: a wrong cookie, version, build or offset gives no layout") {
  const std::vector<uint8_t> good = debug_offsets_313();
  auto refused = [&](std::vector<uint8_t> bytes, const char* why, uint32_t hexversion = kPython3130,
                     uint64_t runtime_size = kRuntimeSize3130) {
    CAPTURE(why);
    CHECK(!python_layout_from_debug_offsets(bytes, hexversion, runtime_size));
  };
  auto with = [&](const char* name, uint64_t value) {
    std::vector<uint8_t> bytes = good;
    set_debug_field(bytes, name, value);
    return bytes;
  };
  std::vector<uint8_t> cookie = good;
  cookie[7] = 'Y';
  refused(cookie, "cookie");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), "one byte short");
  refused({}, "nothing");
  refused(good, "Py_Version 3.12", 0x030c01f0);
  refused(good, "Py_Version 3.14", 0x030e00f0);
  refused(good, "Py_Version unknown", 0);
  refused(with("version", 0x030c01f0), "debug offsets of 3.12");
  refused(with("version", 0x030e00f0), "debug offsets of 3.14: their layout is not known");
  refused(with("version", 0x030d00c1), "3.13.0rc1: fewer fields");
  refused(with("version", 0x030d00c3), "a release candidate");
  refused(with("version", 0x030d00f0 | (uint64_t{1} << 32)), "a version beyond 32 bits");
  refused(with("free_threaded", 1), "free-threaded: another object layout");
  refused(good, "another runtime size", kPython3130, kRuntimeSize3130 + 8);
  refused(with("runtime_size", 100), "a runtime smaller than its debug offsets", kPython3130, 0);
  refused(with("runtime_size", uint64_t{1} << 40), "a runtime too large", kPython3130, 0);
  refused(with("runtime_interpreters_head", kRuntimeSize3130 - 7), "past the runtime");
  refused(with("interp_size", 0), "a structure of no size");
  refused(with("interp_size", uint64_t{1} << 30), "an interpreter too large");
  refused(with("interp_threads_head", 194968), "past the interpreter");
  refused(with("tstate_size", 5000), "a thread state too large");
  refused(with("tstate_native_thread_id", 300), "past the thread state");
  refused(with("tstate_current_frame", UINT64_MAX), "-1");
  refused(with("frame_previous", 65), "a frame field past the 72 bytes read");
  refused(with("frame_owner", 72), "the owner past the 72 bytes read");
  refused(with("frame_instr_ptr", 1ull << 63), "huge");
  refused(with("frame_size", 4), "a frame smaller than its fields");
  refused(with("code_adaptive", 207), "the instructions past the code object");
  refused(with("code_firstlineno", 205), "past the code object");
  refused(with("object_size", 24), "an object header the table's ob_size does not follow");
  refused(with("object_type", 9), "ob_type past the object header");
  refused(with("type_flags", 410), "past the type object");
  refused(with("bytes_ob_size", 24), "bytes' ob_size not PyVarObject's");
  refused(with("bytes_data", 20), "bytes' data over its size");
  refused(with("unicode_ascii_size", 48), "a PyASCIIObject the table's compact size does not follow");
  refused(with("unicode_size", 48), "a PyUnicodeObject smaller than its compact form");
  refused(with("unicode_state", 38), "the state past the ASCII header");
  refused(with("unicode_length", 4), "the length inside the object header");

  // Any byte changed: never a crash, and what is accepted keeps the bounds.
  uint32_t seed = 12345;
  size_t accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> bytes = good;
    for (int flips = 0; flips < 1 + round % 3; ++flips) {
      seed = seed * 1103515245 + 12345;
      bytes[(seed >> 8) % bytes.size()] ^= static_cast<uint8_t>(1u << ((seed >> 4) % 8));
    }
    std::optional<PythonLayout> layout = python_layout_from_debug_offsets(bytes, kPython3130, kRuntimeSize3130);
    if (!layout) continue;
    ++accepted;
    for (uint32_t offset : {layout->frame_code, layout->frame_previous, layout->frame_prev_instr})
      CHECK(offset + 8 <= 72);
    CHECK(layout->frame_owner < 72);
    for (uint32_t offset : {layout->tstate_next, layout->tstate_cframe, layout->tstate_native_thread_id,
                            layout->code_filename, layout->code_qualname, layout->code_linetable,
                            layout->code_adaptive, layout->type_name, layout->type_flags, layout->bytes_data})
      CHECK(offset < 1024);
  }
  MESSAGE(accepted, " of 20000 changed blocks accepted (the change where nothing is read, or in bounds)");
}

namespace {

struct Image {
  FakeMemory memory;
  FakePython python;
  explicit Image(const PythonLayout& layout) : python(layout, memory) {}
};

const PythonLayout& layout311() {
  const PythonLayout* layout = python_layout(0x030b07f0);
  REQUIRE(layout);
  return *layout;
}

}  // namespace

TEST_CASE("python namer: names, lines, the cache, strings of every kind") {
  for (const PythonLayout* layout : {python_layout(0x030b02f0), python_layout(0x030c01f0), &layout313()}) {
    REQUIRE(layout);
    CAPTURE(layout->version);
    Image image(*layout);
    const uint64_t run = image.python.make_function(U"Worker.run", U"/srv/app/worker.py", kSampleTable, 40);
    PythonCodeNamer namer;
    MemoryReader read = image.memory.reader();
    // Code with no location (co_positions None) is named by the line
    // before it: the frame always says where it is.
    uint32_t line_before = 40;
    for (int32_t offset = 0; offset < 110; offset += 2) {
      auto name = namer.name(7, *layout, run, offset, read, 1000);
      REQUIRE(name);
      CHECK(name->qualname == "Worker.run");
      CHECK(name->file == "/srv/app/worker.py");
      if (kSampleLines[offset / 2]) line_before = kSampleLines[offset / 2] + 39;
      CHECK(name->line == line_before);
    }
    CHECK(namer.name(7, *layout, run, -2, read, 1000) == PythonFrameName{"Worker.run", "/srv/app/worker.py", 40});
    CHECK(namer.stats().named == 56);
    CHECK(namer.stats().cache_hits == 55);
    const uint64_t reads = image.memory.reads;
    CHECK(namer.name(7, *layout, run, 0, read, 1000));
    CHECK(image.memory.reads == reads);  // a hit reads nothing

    // Offsets outside the code: no name, counted.
    CHECK(!namer.name(7, *layout, run, 110, read, 1000));
    CHECK(!namer.name(7, *layout, run, 3, read, 1000));
    CHECK(!namer.name(7, *layout, run, -4, read, 1000));
    CHECK(namer.stats().bad_offset == 3);

    // Another process at the same address: its own entry.
    CHECK(namer.name(8, *layout, run, 0, read, 1000));
    CHECK(namer.cached_entries() == 2);
    namer.forget(8);
    CHECK(namer.cached_entries() == 1);

    // UCS1, UCS2, UCS4 and a surrogate escape (a path byte os.fsdecode could not decode).
    std::vector<uint8_t> one;
    short_form(one, 1);
    const std::u32string escaped_path = std::u32string(U"/tmp/\U00020000/x") + char32_t{0xDCFF} + U".py";
    const uint64_t wide = image.python.make_function(U"gr\u00f6\u00dfe.<locals>.\u95a2\u6570", escaped_path, one, 3);
    auto name = namer.name(7, *layout, wide, 0, read, 1000);
    REQUIRE(name);
    CHECK(name->qualname == "gr\xc3\xb6\xc3\x9f" "e.<locals>.\xe9\x96\xa2\xe6\x95\xb0");
    CHECK(name->file == "/tmp/\xf0\xa0\x80\x80/x\xff.py");
    CHECK(name->line == 3);
    const uint64_t latin = image.python.make_function(U"caf\u00e9", U"", one, 1);
    CHECK(namer.name(7, *layout, latin, 0, read, 1000) == PythonFrameName{"caf\xc3\xa9", "", 1});
    CHECK(namer.stats().implausible == 0);
    CHECK(namer.stats().unreadable == 0);
  }
}

TEST_CASE("python namer: what cannot be read is not named") {
  const PythonLayout& layout = layout311();
  Image image(layout);
  std::vector<uint8_t> one;
  short_form(one, 1);
  MemoryReader read = image.memory.reader();
  PythonCodeNamer namer;

  CHECK(!namer.name(1, layout, 0x7000000, 0, read, 0));  // no memory there
  FakePython::Code code;
  code.code_units = 1;
  code.qualname = image.python.make_str(U"f");
  code.filename = image.python.make_str(U"f.py");
  code.linetable = image.python.make_bytes(one);
  code.name = code.qualname;
  FakePython::Code missing_name = code;
  missing_name.qualname = 0x7100000;
  CHECK(!namer.name(1, layout, image.python.make_code(missing_name), 0, read, 0));
  FakePython::Code missing_table = code;
  missing_table.linetable = 0x7200000;
  CHECK(!namer.name(1, layout, image.python.make_code(missing_table), 0, read, 0));
  // A string whose characters run past its memory (length says 40).
  const uint64_t cut = image.python.make_str(U"abc");
  (*image.memory.region(cut))[layout.unicode_length] = 40;
  FakePython::Code cut_name = code;
  cut_name.filename = cut;
  CHECK(!namer.name(1, layout, image.python.make_code(cut_name), 0, read, 0));
  // A type object that cannot be read.
  FakePython::Code lost_type = code;
  lost_type.type = 0x7300000;
  CHECK(!namer.name(1, layout, image.python.make_code(lost_type), 0, read, 0));
  CHECK(namer.stats().unreadable == 5);
  CHECK(namer.stats().named == 0);
  CHECK(namer.cached_entries() == 0);
  // The good one still names.
  CHECK(namer.name(1, layout, image.python.make_code(code), 0, read, 0) == PythonFrameName{"f", "f.py", 1});
}

TEST_CASE("python namer: implausible objects are not named") {
  const PythonLayout& layout = layout311();
  Image image(layout);
  std::vector<uint8_t> one;
  short_form(one, 2);
  MemoryReader read = image.memory.reader();
  PythonCodeNamer namer;
  FakePython& py = image.python;
  FakePython::Code good;
  good.code_units = 2;
  good.qualname = py.make_str(U"good");
  good.name = good.qualname;
  good.filename = py.make_str(U"good.py");
  good.linetable = py.make_bytes(one);
  REQUIRE(namer.name(1, layout, py.make_code(good), 0, read, 0));

  uint64_t implausible = 0;
  auto refused = [&](const FakePython::Code& code, const char* why) {
    INFO(std::string(why));
    PythonCodeNamer fresh;  // no type learnt before
    CHECK(!fresh.name(2, layout, py.make_code(code), 0, read, 0));
    CHECK(fresh.stats().implausible == 1);
    CHECK(fresh.stats().unreadable == 0);
    CHECK(!namer.name(1, layout, py.make_code(code), 0, read, 0));
    CHECK(namer.stats().implausible == ++implausible);
  };
  auto with = [&](auto change) {
    FakePython::Code code = good;
    change(code);
    return code;
  };
  const std::u32string long_text(kMaxPythonStringBytes + 1, U'x');
  refused(with([&](auto& c) { c.qualname = py.make_str(long_text); }), "a string over 4 KiB");
  refused(with([&](auto& c) { c.qualname = py.make_str(std::u32string(kMaxPythonStringBytes / 2 + 1, U'\u0100')); }),
          "4 KiB of UCS2");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {.kind = 1, .compact = false}); }), "not compact");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {.kind = 1, .ready = false}); }), "not ready (3.11)");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {.kind = 3}); }), "kind 3");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {.kind = 2, .ascii = true}); }), "ascii of kind 2");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {.kind = 2, .ascii = false}); }),
          "UCS2 that fits one byte");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"ab\u00e9", {.kind = 1, .ascii = true}); }),
          "ascii with a byte over 0x7f");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"", {.kind = 1, .ascii = false}); }), "empty, not ascii");
  refused(with([&](auto& c) {
            c.filename = py.make_str_as(std::u32string(1, char32_t{0x110000}), {.kind = 4, .ascii = false});
          }),
          "beyond Unicode");
  refused(with([&](auto& c) {
            c.filename = py.make_str(U"abc");
            image.memory.region(c.filename)->back() = 'x';  // no NUL after the characters
          }),
          "no NUL");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {}, py.bytes_type); }), "a bytes object as a str");
  const uint64_t heap_str = py.make_type("str", FakePython::kStrFlags | FakePython::kHeapType);
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {}, heap_str); }),
          "a class named str");
  const uint64_t string_type = py.make_type("string", FakePython::kStrFlags);
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {}, string_type); }),
          "a type named string");
  refused(with([&](auto& c) { c.filename = py.make_str_as(U"abc", {}, py.make_type("str", FakePython::kBytesFlags)); }),
          "str without the unicode flag");
  refused(with([&](auto& c) { c.linetable = c.filename; }), "a str as the line table");
  refused(with([&](auto& c) { c.linetable = py.make_bytes(one, kMaxPythonLineTableBytes + 1); }),
          "a line table over 1 MiB");
  refused(with([&](auto& c) { c.linetable = py.make_bytes(std::vector<uint8_t>{0x12, 0x80}); }),
          "a malformed line table");
  refused(with([&](auto& c) { c.code_units = 3; }), "a table that does not cover the code");
  refused(with([&](auto& c) { c.code_units = 1; }), "a table that covers more than the code");
  refused(with([&](auto& c) { c.code_units = 0; }), "no code");
  refused(with([&](auto& c) { c.code_units = -1; }), "negative size");
  refused(with([&](auto& c) { c.firstlineno = -1; }), "a negative first line");
  refused(with([&](auto& c) { c.type = py.str_type; }), "a str as the code object");
  refused(with([&](auto& c) { c.type = py.make_type("code", FakePython::kCodeFlags | FakePython::kHeapType); }),
          "a heap type named code");
  refused(with([&](auto& c) { c.qualname = 0; }), "a null name");
  refused(with([&](auto& c) { c.filename += 4; }), "a misaligned name");
  CHECK(!namer.name(1, layout, 0x1234567, 0, read, 0));  // a misaligned code object
  CHECK(namer.stats().implausible == implausible + 1);
  CHECK(namer.stats().unreadable == 0);
  CHECK(namer.cached_entries() == 1);

  // A layout that is not one of ours names nothing.
  PythonLayout broken = layout;
  broken.code_qualname = kPythonAbsent;
  CHECK(!namer.name(1, broken, py.make_code(good), 0, read, 0));
}

TEST_CASE("python namer: a freed and reused code object is named anew once revalidated") {
  const PythonLayout& layout = layout311();
  Image image(layout);
  FakePython& py = image.python;
  std::vector<uint8_t> table;
  short_form(table, 2);
  one_line(table, 1, 1);
  const uint64_t code = py.make_function(U"old", U"old.py", table, 10);
  MemoryReader read = image.memory.reader();
  PythonCodeNamer namer(PythonCodeNamerOptions{.revalidate_ns = 1000});
  CHECK(namer.name(1, layout, code, 4, read, 0) == PythonFrameName{"old", "old.py", 11});

  // Freed; another function's code object made at the same address.
  FakePython::Code other;
  other.code_units = 3;
  other.firstlineno = 50;
  other.qualname = py.make_str(U"new");
  other.name = other.qualname;
  other.filename = py.make_str(U"new.py");
  other.linetable = py.make_bytes(table);
  py.write_code(code, other);
  // Within revalidate_ns the cache answers; once older, it is checked and read anew.
  CHECK(namer.name(1, layout, code, 4, read, 999) == PythonFrameName{"old", "old.py", 11});
  CHECK(namer.name(1, layout, code, 4, read, 1000) == PythonFrameName{"new", "new.py", 51});
  CHECK(namer.stats().revalidated_changed == 1);
  // Unchanged at the next check: no new read of its strings.
  const uint64_t reads = image.memory.reads;
  CHECK(namer.name(1, layout, code, 0, read, 2500) == PythonFrameName{"new", "new.py", 50});
  CHECK(image.memory.reads == reads + 1);  // the code object's fields only
  CHECK(namer.stats().revalidated_changed == 1);

  // Freed and the memory given to something else: no name.
  image.memory.region(code)->assign(layout.code_adaptive + 6, 0xab);
  CHECK(namer.name(1, layout, code, 0, read, 2600));  // still cached
  CHECK(!namer.name(1, layout, code, 0, read, 4000));
  CHECK(namer.stats().implausible == 1);
  CHECK(namer.cached_entries() == 0);
  // Unmapped: unreadable, and forgotten.
  py.write_code(code, other);
  CHECK(namer.name(1, layout, code, 0, read, 5000));
  image.memory.remove(code);
  CHECK(!namer.name(1, layout, code, 0, read, 7000));
  CHECK(namer.stats().unreadable == 1);
  CHECK(namer.cached_entries() == 0);
  // A clock that went back is no reason to trust the cache.
  py.write_code(code, other);
  CHECK(namer.name(1, layout, code, 0, read, 9000));
  const uint64_t before = image.memory.reads;
  CHECK(namer.name(1, layout, code, 0, read, 8000));
  CHECK(image.memory.reads == before + 1);
}

TEST_CASE("python namer: the cache is bounded in entries and bytes, least recently used out first") {
  const PythonLayout& layout = layout311();
  Image image(layout);
  std::vector<uint8_t> one;
  short_form(one, 1);
  std::vector<uint64_t> codes;
  for (int i = 0; i < 6; ++i)
    codes.push_back(image.python.make_function(U"f" + std::u32string(1, U'0' + i), U"m.py", one, i + 1));
  MemoryReader read = image.memory.reader();
  PythonCodeNamer namer(PythonCodeNamerOptions{.max_entries = 3});
  for (int i = 0; i < 3; ++i) REQUIRE(namer.name(1, layout, codes[i], 0, read, 0));
  CHECK(namer.name(1, layout, codes[0], 0, read, 0));  // f0 used: f1 is now the oldest
  CHECK(namer.name(2, layout, codes[3], 0, read, 0));
  CHECK(namer.cached_entries() == 3);
  CHECK(namer.stats().evicted == 1);
  uint64_t hits = namer.stats().cache_hits;
  CHECK(namer.name(1, layout, codes[0], 0, read, 0));
  CHECK(namer.stats().cache_hits == ++hits);
  CHECK(namer.name(1, layout, codes[1], 0, read, 0));  // evicted: read again
  CHECK(namer.stats().cache_hits == hits);
  for (int round = 0; round < 3; ++round)
    for (uint64_t code : codes) CHECK(namer.name(3, layout, code, 0, read, 0));
  CHECK(namer.cached_entries() == 3);
  namer.forget(3);
  CHECK(namer.cached_entries() == 0);
  CHECK(namer.cached_bytes() == 0);

  // Bytes: a 4 KiB name costs more than the bound of one entry.
  const uint64_t big = image.python.make_function(std::u32string(4000, U'q'), U"m.py", one, 1);
  PythonCodeNamer small(PythonCodeNamerOptions{.max_bytes = 4500});
  CHECK(small.name(1, layout, codes[0], 0, read, 0));
  CHECK(small.name(1, layout, codes[1], 0, read, 0));
  CHECK(small.cached_entries() == 2);
  auto name = small.name(1, layout, big, 0, read, 0);
  REQUIRE(name);
  CHECK(name->qualname.size() == 4000);
  CHECK(small.cached_bytes() <= 4500);
  CHECK(small.cached_entries() == 1);  // the two small ones went first
  PythonCodeNamer none(PythonCodeNamerOptions{.max_entries = 0});
  CHECK(none.name(1, layout, codes[0], 0, read, 0));  // named, not kept
  CHECK(none.cached_entries() == 0);
}

// ---- ELF symbols and layouts ----

namespace {

// Interpreters to try: Debian's and pyenv's builds of `minor` (3.11, 3.12, 3.13).
std::vector<std::string> interpreters(const std::string& minor) {
  std::vector<std::string> found;
  const char* pyenv = std::getenv("PYENV_ROOT");
  const char* home = std::getenv("HOME");
  std::string root = pyenv ? pyenv : std::string(home ? home : "/root") + "/.pyenv";
  std::error_code ignored;
  std::vector<std::string> candidates = {"/usr/bin/python" + minor};
  for (const auto& version : std::filesystem::directory_iterator(root + "/versions", ignored)) {
    const std::string name = version.path().filename().string();
    if (name.rfind(minor + ".", 0) == 0) candidates.push_back(version.path().string() + "/bin/python" + minor);
  }
  std::sort(candidates.begin() + 1, candidates.end());
  for (const std::string& path : candidates)
    if (::access(path.c_str(), X_OK) == 0) found.push_back(path);
  return found;
}

std::string run_command(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    status = -1;
    return out;
  }
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  status = ::pclose(pipe);
  return out;
}

std::string offsets_program() {
  for (std::filesystem::path path : {std::filesystem::path("tests/tools/python_offsets.c"),
                                     std::filesystem::path(__FILE__).parent_path() / "../../tools/python_offsets.c"})
    if (std::filesystem::exists(path)) return path.string();
  return "";
}

// The CPython runtime of install `root` (pyenv's layout): the executable
// when it holds _PyRuntime, else libpython; nullopt when neither does.
std::optional<PythonSymbols> runtime_symbols_of(const std::filesystem::path& root, uint32_t major, uint32_t minor) {
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  for (const std::filesystem::path& file :
       {root / "bin" / ("python" + version), root / "lib" / ("libpython" + version + ".so.1.0")}) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    auto symbols = read_python_symbols_fd(fd);
    ::close(fd);
    if (symbols.ok() && *symbols) return **symbols;
  }
  return std::nullopt;
}

// The layout's members by the names python_offsets.c prints.
const std::vector<std::pair<std::string, uint32_t PythonLayout::*>>& layout_members() {
  static const std::vector<std::pair<std::string, uint32_t PythonLayout::*>> members = {
      {"runtime_tstate_current", &PythonLayout::runtime_tstate_current},
      {"runtime_interpreters_head", &PythonLayout::runtime_interpreters_head},
      {"interp_threads_head", &PythonLayout::interp_threads_head},
      {"tstate_next", &PythonLayout::tstate_next},
      {"tstate_interp", &PythonLayout::tstate_interp},
      {"tstate_thread_id", &PythonLayout::tstate_thread_id},
      {"tstate_native_thread_id", &PythonLayout::tstate_native_thread_id},
      {"tstate_cframe", &PythonLayout::tstate_cframe},
      {"cframe_current_frame", &PythonLayout::cframe_current_frame},
      {"frame_code", &PythonLayout::frame_code},
      {"frame_previous", &PythonLayout::frame_previous},
      {"frame_prev_instr", &PythonLayout::frame_prev_instr},
      {"frame_is_entry", &PythonLayout::frame_is_entry},
      {"frame_owner", &PythonLayout::frame_owner},
      {"frame_owned_by_generator", &PythonLayout::frame_owned_by_generator},
      {"frame_owned_by_cstack", &PythonLayout::frame_owned_by_cstack},
      {"code_adaptive", &PythonLayout::code_adaptive},
      {"object_type", &PythonLayout::object_type},
      {"var_object_size", &PythonLayout::var_object_size},
      {"type_name", &PythonLayout::type_name},
      {"type_flags", &PythonLayout::type_flags},
      {"code_firstlineno", &PythonLayout::code_firstlineno},
      {"code_filename", &PythonLayout::code_filename},
      {"code_name", &PythonLayout::code_name},
      {"code_qualname", &PythonLayout::code_qualname},
      {"code_linetable", &PythonLayout::code_linetable},
      {"unicode_length", &PythonLayout::unicode_length},
      {"unicode_state", &PythonLayout::unicode_state},
      {"unicode_ascii_size", &PythonLayout::unicode_ascii_size},
      {"unicode_compact_size", &PythonLayout::unicode_compact_size},
      {"unicode_kind_shift", &PythonLayout::unicode_kind_shift},
      {"unicode_compact_shift", &PythonLayout::unicode_compact_shift},
      {"unicode_ascii_shift", &PythonLayout::unicode_ascii_shift},
      {"unicode_ready_shift", &PythonLayout::unicode_ready_shift},
      {"bytes_size", &PythonLayout::bytes_size},
      {"bytes_data", &PythonLayout::bytes_data},
  };
  // Every member but `version` is listed: a member added without a line here fails.
  static_assert(sizeof(PythonLayout) == 4 + 36 * sizeof(uint32_t));
  return members;
}

}  // namespace

TEST_CASE("python layouts: the table is what each CPython's headers say (tests/tools/python_offsets.c)") {
  CHECK(python_layout(0x030b07f0) == python_layout(0x030b02f0));
  CHECK(python_layout(0x030b00c1));         // 3.11.0rc1
  CHECK(!python_layout(0x030b00b4));        // 3.11.0b4: structures still changing
  CHECK(!python_layout(0x030a0df0));        // 3.10
  CHECK(!python_layout(0x030d00f0));        // 3.13: no table, its debug offsets say
  CHECK(python_layout(0x030c01f0)->version == 0x030c);

  const std::string program = offsets_program();
  REQUIRE_MESSAGE(!program.empty(), "tests/tools/python_offsets.c not found from ", std::filesystem::current_path());
  int status = 0;
  run_command("cc --version >/dev/null 2>&1", status);
  if (status != 0) {
    MESSAGE("skipped: no C compiler (cc) to measure the headers");
    return;
  }
  std::vector<std::string> includes;
  for (const std::string& minor : {std::string("3.11"), std::string("3.12"), std::string("3.13")}) {
    if (std::filesystem::exists("/usr/include/python" + minor + "/internal/pycore_frame.h"))
      includes.push_back("/usr/include/python" + minor);
    for (const std::string& python : interpreters(minor)) {
      if (python.rfind("/usr/", 0) == 0) continue;
      const std::string include = std::filesystem::path(python).parent_path().parent_path().string() +
                                  "/include/python" + minor;
      if (std::filesystem::exists(include + "/internal/pycore_frame.h")) includes.push_back(include);
    }
  }
  if (includes.empty()) {
    MESSAGE("skipped: no CPython 3.11, 3.12 or 3.13 headers (Debian: python3.11-dev)");
    return;
  }
  test_files::TempDir dir("python_offsets");
  size_t measured_311 = 0, measured_313 = 0;
  for (const std::string& include : includes) {
    CAPTURE(include);
    const std::string binary = dir / "offsets";
    const std::string output = run_command("cc -DPy_BUILD_CORE -I'" + include + "' -I'" + include + "/internal' '" +
                                               program + "' -o '" + binary + "' 2>&1 && '" + binary + "'",
                                           status);
    REQUIRE_MESSAGE(status == 0, output);
    std::map<std::string, uint64_t> measured;
    std::istringstream lines(output);
    std::string name;
    uint64_t value = 0;
    while (lines >> name >> value) measured[name] = value;
    REQUIRE(measured.count("hexversion"));
    const uint32_t hexversion = static_cast<uint32_t>(measured["hexversion"]);
    const PythonLayout* layout = python_layout(hexversion);
    if ((hexversion >> 16) >= 0x030d) {
      // No table: the layout the runtime next to these headers publishes
      // (its file's debug offsets), and where python_runtime.cpp reads
      // each offset in _Py_DebugOffsets, as these headers say.
      CHECK(!layout);
      CHECK(measured["debug_offsets_bytes"] == kPython313DebugOffsetsBytes);
      measured.erase("debug_offsets_bytes");
      for (const DebugField& field : debug313_fields()) {
        CAPTURE(field.name);
        auto it = measured.find(std::string("debug_offsets_") + field.name);
        REQUIRE(it != measured.end());
        CHECK(it->second == field.position);
        measured.erase(it);
      }
      const std::filesystem::path install = std::filesystem::path(include).parent_path().parent_path();
      std::optional<PythonSymbols> symbols = runtime_symbols_of(install, (hexversion >> 24), (hexversion >> 16) & 0xff);
      if (!symbols) {
        MESSAGE("skipped: no CPython runtime (bin/python or libpython) in ", install, " for ", include);
        continue;
      }
      CHECK(symbols->hexversion == hexversion);
      REQUIRE_MESSAGE(symbols->debug_layout, "no layout from the debug offsets of ", install);
      layout = python_layout_for(*symbols);
      MESSAGE("3.13 layout read from the debug offsets of the runtime in ", install);
    }
    REQUIRE(layout);
    CHECK(layout->version == measured["hexversion"] >> 16);
    if (layout->version == 0x030b) ++measured_311;
    if (layout->version == 0x030d) ++measured_313;
    for (const auto& [member, pointer] : layout_members()) {
      CAPTURE(member);
      auto it = measured.find(member);
      if (it == measured.end())
        CHECK(layout->*pointer == kPythonAbsent);  // this version has no such member
      else
        CHECK(layout->*pointer == it->second);
    }
    MESSAGE("layout ", layout->version >> 8, ".", layout->version & 0xff, " checked against ", include);
    CHECK(measured.size() == 1 + static_cast<size_t>(std::count_if(
                                     layout_members().begin(), layout_members().end(),
                                     [&](const auto& m) { return layout->*m.second != kPythonAbsent; })));
  }
  CHECK_MESSAGE(measured_311 > 0, "no 3.11 headers measured");
  if (measured_313 == 0) MESSAGE("no CPython 3.13 measured (pyenv install 3.13): its debug offsets unchecked");
}

TEST_CASE("python symbols: not ELF, not a CPython runtime, a truncated file") {
  const std::vector<uint8_t> text = {'n', 'o', 't', ' ', 'e', 'l', 'f'};
  CHECK(!read_python_symbols(text).ok());
  test_files::TempDir dir("python_symbols");
  test_files::write_file(dir / "text", text);
  int fd = ::open((dir / "text").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(!read_python_symbols_fd(fd).ok());
  ::close(fd);
  // Our own executable: ELF, no _PyRuntime.
  fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto self = read_python_symbols_fd(fd);
  ::close(fd);
  REQUIRE(self.ok());
  CHECK(!*self);
  // A CPython runtime cut short anywhere: never a crash, never a wrong version.
  for (const std::string& python : interpreters("3.11")) {
    std::vector<uint8_t> bytes = test_files::read_file(python);
    auto whole = read_python_symbols(bytes);
    REQUIRE(whole.ok());
    if (!*whole) continue;  // pyenv's: the runtime is in libpython
    for (size_t size : {size_t{0}, size_t{16}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
      auto cut = read_python_symbols(std::span<const uint8_t>(bytes.data(), size));
      if (cut.ok() && *cut) CHECK(((*cut)->hexversion == 0 || (*cut)->hexversion == (*whole)->hexversion));
    }
  }
  // A 3.13 runtime (its debug offsets read too) cut short, or its
  // _PyRuntime's first bytes garbled: no crash, the whole layout or none.
  for (const std::string& python : interpreters("3.13")) {
    const std::filesystem::path root = std::filesystem::path(python).parent_path().parent_path();
    std::string file = python;
    std::vector<uint8_t> bytes = test_files::read_file(file);
    auto whole = read_python_symbols(bytes);
    if (whole.ok() && !*whole) {
      file = (root / "lib" / "libpython3.13.so.1.0").string();
      bytes = test_files::read_file(file);
      whole = read_python_symbols(bytes);
    }
    CAPTURE(file);
    REQUIRE(whole.ok());
    REQUIRE(*whole);
    REQUIRE((*whole)->debug_layout);
    for (size_t size : {size_t{0}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
      auto cut = read_python_symbols(std::span<const uint8_t>(bytes.data(), size));
      if (cut.ok() && *cut && (*cut)->debug_layout) CHECK((*cut)->debug_layout == (*whole)->debug_layout);
    }
    // The cookie garbled at _PyRuntime's start: the runtime still, without
    // a layout. (The file holds the string elsewhere too, which does not
    // matter: exactly one copy is the block's.)
    size_t cookies = 0, refused = 0;
    for (size_t at = 0; at + 8 <= bytes.size(); ++at)
      if (std::memcmp(&bytes[at], "xdebugpy", 8) == 0) {
        ++cookies;
        std::vector<uint8_t> garbled = bytes;
        garbled[at + 1] = 'D';
        auto bad = read_python_symbols(garbled);
        REQUIRE(bad.ok());
        REQUIRE(*bad);
        if (!(*bad)->debug_layout) {
          ++refused;
          CHECK(!python_layout_for(**bad));
        } else {
          CHECK((*bad)->debug_layout == (*whole)->debug_layout);
        }
      }
    CHECK(cookies >= 1);
    CHECK(refused == 1);
  }
}

// ---- Real interpreters ----

namespace {

const char* const kScript = R"PY(import sys, threading
class Worker:
    def run(self):
        total = 0
        for i in range(3):
            total += (i *
                      2)
        return total
def outer():
    def inner(x):
        return [y * 2 for y in range(x)]
    return inner
def größe(): return 1
def 関数(): return 2
def 𠀀(): return 3
async def coro():
    try:
        return 4
    except ValueError:
        return None
def spin():
    n = 0
    while True:
        n += 1
inner = outer()
codes = [Worker.run.__code__, outer.__code__, inner.__code__, größe.__code__, 関数.__code__, 𠀀.__code__,
         coro.__code__, spin.__code__, sys._getframe().f_code]
codes += [c for c in inner.__code__.co_consts if hasattr(c, "co_positions")]
def hexed(text):
    return text.encode("utf-8", "surrogateescape").hex() or "-"
for co in codes:
    lines = ",".join("%d" % (-1 if p[0] is None else p[0]) for p in co.co_positions())
    print("code", id(co), co.co_firstlineno, len(co.co_code), hexed(co.co_qualname), hexed(co.co_filename), lines)
print("ready", sys.hexversion, threading.get_native_id(), id(spin.__code__), id(sys._getframe().f_code),
      sys._getframe().f_lineno + 1, flush=True)
spin()
)PY";

std::string unhex(const std::string& hex) {
  if (hex == "-") return "";
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

struct PythonCode {
  uint64_t address = 0;
  uint32_t firstlineno = 0;
  size_t code_bytes = 0;
  std::string qualname, file;
  std::vector<int64_t> lines;  // per code unit, -1: none
};

struct RunningPython {
  pid_t pid = -1;
  std::vector<PythonCode> codes;
  uint32_t hexversion = 0, tid = 0, module_call_line = 0;
  uint64_t spin_code = 0, module_code = 0;
  std::string error;

  RunningPython(const std::string& python, const std::string& script) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      error = "pipe";
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> args = {python, "-I", script};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (pid > 0 && text.find("\nready ") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    // The ready line is whole once it ends in a newline.
    while (pid > 0 && text.find("\nready ") != std::string::npos && text.back() != '\n') {
      char buffer[256];
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    ::close(out[0]);
    std::istringstream lines(text);
    std::string kind;
    while (lines >> kind) {
      if (kind == "code") {
        PythonCode code;
        std::string qualname, file, positions;
        lines >> code.address >> code.firstlineno >> code.code_bytes >> qualname >> file >> positions;
        code.qualname = unhex(qualname);
        code.file = unhex(file);
        std::istringstream each(positions);
        std::string line;
        while (std::getline(each, line, ',')) code.lines.push_back(std::stol(line));
        codes.push_back(code);
      } else if (kind == "ready") {
        lines >> hexversion >> tid >> spin_code >> module_code >> module_call_line;
      }
    }
    if (pid <= 0) error = "cannot start " + python;
    else if (hexversion == 0) error = python + " said: " + text;
  }
  ~RunningPython() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

uint64_t read_u64(const MemoryReader& read, uint64_t address) {
  uint8_t bytes[8] = {};
  REQUIRE(read(address, bytes));
  uint64_t value = 0;
  std::memcpy(&value, bytes, 8);
  return value;
}

uint8_t read_u8(const MemoryReader& read, uint64_t address) {
  uint8_t byte = 0;
  REQUIRE(read(address, std::span<uint8_t>(&byte, 1)));
  return byte;
}

// The module of `pid` that is its CPython runtime, as the profiler finds
// it: each mapped file's .dynsym read through /proc/PID/map_files.
struct Runtime {
  std::string path;
  PythonSymbols symbols;
  uint64_t bias = 0;  // runtime address - ELF address
};

std::optional<Runtime> find_runtime(uint32_t pid) {
  gsym::Expected<std::string> text = read_pseudo_file("/proc/" + std::to_string(pid) + "/maps", kMaxProcMapsBytes);
  REQUIRE(text.ok());
  gsym::Expected<std::vector<MapEntry>> maps = parse_proc_maps(*text);
  REQUIRE(maps.ok());
  std::optional<Runtime> found;
  std::set<std::string> seen;
  for (const MapEntry& map : *maps) {
    if (!map.file_backed() || !map.executable() || !seen.insert(map.path).second) continue;
    const int fd = ::open(map_files_path("/proc", pid, map).c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto symbols = read_python_symbols_fd(fd);
    ::close(fd);
    CHECK_MESSAGE(symbols.ok(), map.path);
    if (!symbols.ok() || !*symbols) continue;
    if (found) FAIL_CHECK("two CPython runtimes: ", found->path, " and ", map.path);
    Runtime runtime{map.path, **symbols, 0};
    // The same from the file's bytes.
    std::vector<uint8_t> bytes = test_files::read_file(map.path);
    auto from_bytes = read_python_symbols(bytes);
    REQUIRE(from_bytes.ok());
    REQUIRE(*from_bytes);
    CHECK((*from_bytes)->runtime_vaddr == runtime.symbols.runtime_vaddr);
    CHECK((*from_bytes)->eval_vaddr == runtime.symbols.eval_vaddr);
    CHECK((*from_bytes)->eval_size == runtime.symbols.eval_size);
    CHECK((*from_bytes)->hexversion == runtime.symbols.hexversion);
    CHECK((*from_bytes)->debug_layout == runtime.symbols.debug_layout);
    // Load bias: where the file's offset 0 is mapped, less the first PT_LOAD's page.
    auto image = gsym::ElfImage::open(map.path);
    REQUIRE(image.ok());
    const std::optional<uint64_t> first_load = image->first_load_address();
    REQUIRE(first_load);
    for (const MapEntry& other : *maps)
      if (other.path == map.path && other.file_offset == 0) {
        runtime.bias = other.start - (*first_load & ~uint64_t{0xfff});
        break;
      }
    found = runtime;
  }
  return found;
}

void check_interpreter(const std::string& python, const std::string& minor) {
  CAPTURE(python);
  test_files::TempDir dir("python_runtime");
  // A file name that is not ASCII: co_filename of kind 1.
  const std::string script = dir / "w\xc3\xb6rk.py";
  std::ofstream(script) << kScript;
  RunningPython process(python, script);
  REQUIRE_MESSAGE(process.error.empty(), process.error);
  REQUIRE(process.codes.size() >= 9);  // 3.11 adds the list comprehension's
  const uint32_t pid = static_cast<uint32_t>(process.pid);

  // Its runtime module, version and layout.
  std::optional<Runtime> runtime = find_runtime(pid);
  REQUIRE(runtime);
  MESSAGE(python, ": CPython runtime ", runtime->path);
  CHECK(runtime->symbols.hexversion == process.hexversion);
  CHECK((runtime->symbols.hexversion >> 16) == 0x0300u + std::stoul(minor.substr(2)));
  CHECK(runtime->symbols.runtime_vaddr != 0);
  CHECK(runtime->symbols.eval_vaddr != 0);
  CHECK(runtime->symbols.eval_size > 1000);
  // As the profiler takes it: a table, or (3.13) the debug offsets.
  CHECK(runtime->symbols.debug_layout.has_value() == (minor == "3.13"));
  const PythonLayout* layout = python_layout_for(runtime->symbols);
  REQUIRE(layout);
  CHECK(layout->version == runtime->symbols.hexversion >> 16);

  ProcSource source = ProcSource::live();
  uint64_t reads = 0;
  MemoryReader read = [&](uint64_t address, std::span<uint8_t> out) {
    ++reads;
    return source.read_memory(pid, address, out) == out.size();
  };

  // Every code object at every instruction offset, as co_positions() says.
  PythonCodeNamer namer;
  size_t offsets = 0;
  std::set<std::string> qualnames;
  for (const PythonCode& code : process.codes) {
    CAPTURE(code.qualname);
    REQUIRE(code.lines.size() * 2 == code.code_bytes);
    qualnames.insert(code.qualname);
    uint32_t line_before = code.firstlineno;  // where co_positions says None or 0
    for (size_t unit = 0; unit < code.lines.size(); ++unit) {
      auto name = namer.name(pid, *layout, code.address, static_cast<int32_t>(unit * 2), read, 0);
      REQUIRE(name);
      CHECK(name->qualname == code.qualname);
      CHECK(name->file == code.file);
      if (code.lines[unit] > 0) line_before = static_cast<uint32_t>(code.lines[unit]);  // 0: a module's RESUME
      CHECK(name->line == line_before);
      ++offsets;
    }
    CHECK(namer.name(pid, *layout, code.address, -2, read, 0) ==
          PythonFrameName{code.qualname, code.file, code.firstlineno});
    CHECK(!namer.name(pid, *layout, code.address, static_cast<int32_t>(code.code_bytes), read, 0));
  }
  for (const char* expected : {"Worker.run", "outer", "outer.<locals>.inner", "gr\xc3\xb6\xc3\x9f" "e",
                               "\xe9\x96\xa2\xe6\x95\xb0", "\xf0\xa0\x80\x80", "coro", "spin", "<module>"})
    CHECK_MESSAGE(qualnames.count(expected), expected);
  CHECK(process.codes.front().file == script);
  CHECK(namer.stats().named == offsets + process.codes.size());
  CHECK(namer.stats().implausible == 0);
  CHECK(namer.stats().unreadable == 0);
  CHECK(!namer.name(pid, *layout, 0x10, 0, read, 0));           // nothing mapped there
  CHECK(!namer.name(pid, *layout, process.tid * 16, 0, read, 0));  // not a code object
  MESSAGE(python, ": ", process.codes.size(), " code objects, ", offsets, " instruction offsets named; ", reads,
          " reads");

  // The walk the BPF sampler makes: _PyRuntime -> interpreter -> the
  // thread whose native id is the spinning main thread -> its frames.
  const uint64_t runtime_address = runtime->bias + runtime->symbols.runtime_vaddr;
  const uint64_t interp = read_u64(read, runtime_address + layout->runtime_interpreters_head);
  REQUIRE(interp != 0);
  uint64_t tstate = read_u64(read, interp + layout->interp_threads_head);
  for (int i = 0; i < 64 && tstate; ++i) {
    if (read_u64(read, tstate + layout->tstate_native_thread_id) == process.tid) break;
    tstate = read_u64(read, tstate + layout->tstate_next);
  }
  REQUIRE_MESSAGE(tstate != 0, "no thread state with native_thread_id ", process.tid);
  CHECK(read_u64(read, tstate + layout->tstate_interp) == interp);
  // The interpreter's state as the sampler would see it now. The script
  // prints its ready line and then calls spin(): on a loaded machine it may
  // still be in that write (the GIL released) when the line arrives, so the
  // state is read again until it spins (a few seconds at most).
  uint64_t tstate_current = 0;
  std::vector<uint64_t> chain;
  std::vector<uint8_t> entries, owners;
  std::vector<std::optional<PythonFrameName>> names;
  const std::vector<uint64_t> spinning{process.spin_code, process.module_code};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    if (layout->runtime_tstate_current != kPythonAbsent)
      tstate_current = read_u64(read, runtime_address + layout->runtime_tstate_current);
    // 3.11, 3.12: through the _PyCFrame; 3.13: the thread state holds it.
    uint64_t frame = read_u64(read, tstate + layout->tstate_cframe);
    if (layout->cframe_current_frame != kPythonAbsent) frame = read_u64(read, frame + layout->cframe_current_frame);
    chain.clear();
    entries.clear();
    owners.clear();
    names.clear();
    for (int depth = 0; depth < 16 && frame; ++depth, frame = read_u64(read, frame + layout->frame_previous)) {
      const uint8_t owner = read_u8(read, frame + layout->frame_owner);
      if (layout->frame_owned_by_cstack != kPythonAbsent && owner == layout->frame_owned_by_cstack) continue;
      owners.push_back(owner);
      const uint64_t code = read_u64(read, frame + layout->frame_code);
      const uint64_t prev_instr = read_u64(read, frame + layout->frame_prev_instr);
      chain.push_back(code);
      if (layout->frame_is_entry != kPythonAbsent) entries.push_back(read_u8(read, frame + layout->frame_is_entry));
      const int64_t offset = static_cast<int64_t>(prev_instr - (code + layout->code_adaptive));
      names.push_back(namer.name(pid, *layout, code, static_cast<int32_t>(offset), read, 0));
    }
    const bool holds_gil = layout->runtime_tstate_current == kPythonAbsent || tstate_current == tstate;
    if ((holds_gil && chain == spinning) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The only thread spins in Python: it holds the GIL.
  if (layout->runtime_tstate_current != kPythonAbsent) CHECK(tstate_current == tstate);
  for (uint8_t owner : owners) CHECK(owner == 0);  // FRAME_OWNED_BY_THREAD
  REQUIRE(chain == spinning);
  if (layout->frame_is_entry != kPythonAbsent) CHECK(entries == std::vector<uint8_t>{0, 1});
  REQUIRE(names[0]);
  CHECK(names[0]->qualname == "spin");
  CHECK(names[0]->line >= 23);  // `while True:` or `n += 1`
  CHECK(names[0]->line <= 24);
  REQUIRE(names[1]);
  CHECK(*names[1] == PythonFrameName{"<module>", script, process.module_call_line});
}

}  // namespace

TEST_CASE("python runtime: real CPython 3.11 processes named as the interpreter names them") {
  std::vector<std::string> pythons = interpreters("3.11");
  if (pythons.empty()) {
    MESSAGE("skipped: no python3.11 (Debian: python3.11; pyenv install 3.11)");
    return;
  }
  if (::geteuid() != 0) {
    MESSAGE("skipped: reading another process's memory needs root");
    return;
  }
  for (const std::string& python : pythons) check_interpreter(python, "3.11");
}

TEST_CASE("python runtime: real CPython 3.12 processes") {
  std::vector<std::string> pythons = interpreters("3.12");
  if (pythons.empty() || ::geteuid() != 0) {
    MESSAGE("skipped: no python3.12 (pyenv install 3.12), or not root");
    return;
  }
  for (const std::string& python : pythons) check_interpreter(python, "3.12");
}

TEST_CASE("python runtime: real CPython 3.13 processes, their layout from _PyRuntime's debug offsets") {
  std::vector<std::string> pythons = interpreters("3.13");
  if (pythons.empty() || ::geteuid() != 0) {
    MESSAGE("skipped: no python3.13 (pyenv install 3.13), or not root");
    return;
  }
  for (const std::string& python : pythons) check_interpreter(python, "3.13");
}
