// libFuzzer target: CPython line tables (python311_line_ranges,
// python311_line) and PythonCodeNamer over memory the fuzzer makes hostile.
// Input: [flags][instruction offset, int16 LE][table size N][N table bytes]
// [patches: (position u16 LE, xor byte)...]; flags bit 0 picks 3.12's layout
// over 3.11's, bits 4-7 add to the first line.
//   1. The decoder: ranges contiguous from 0, even and at most 16 bytes each;
//      python311_line agrees with them at every offset, and names nothing
//      for a malformed table.
//   2. A code object made around the table in a synthetic image is named
//      exactly when the table is well formed, covers code and the offset is
//      an instruction's (or -2), with the decoder's line (where that is none
//      or 0, the line before it, or the first line).
//   3. The fuzzer's patches XORed into the image (types, strings, the code
//      object, the table): named again after revalidation and afresh, with
//      the cache bounds, the names bounded, nothing read out of bounds.
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tests/support/fake_python.h"
#include "userspace/process/python_runtime.h"

using namespace gsymprof;

namespace {

std::optional<uint32_t> expected_line(const std::optional<std::vector<PythonLineRange>>& ranges, uint32_t first,
                                      int32_t offset) {
  if (!ranges) return std::nullopt;
  if (offset == -2) return first;
  if (offset < 0 || offset % 2 != 0) return std::nullopt;
  for (const PythonLineRange& r : *ranges)
    if (static_cast<uint32_t>(offset) >= r.start && static_cast<uint32_t>(offset) < r.end) return r.line;
  return std::nullopt;
}

// The line the namer gives: the decoder's, but where CPython has none (or
// line 0) the line before it, the first line at the start (a frame always
// says where it is).
std::optional<uint32_t> expected_named_line(const std::optional<std::vector<PythonLineRange>>& ranges,
                                            uint32_t first, int32_t offset) {
  if (!ranges) return std::nullopt;
  if (offset == -2) return first;
  if (offset < 0 || offset % 2 != 0) return std::nullopt;
  uint32_t before = first;
  for (const PythonLineRange& r : *ranges) {
    const uint32_t line = r.line && *r.line != 0 ? *r.line : before;
    if (static_cast<uint32_t>(offset) >= r.start && static_cast<uint32_t>(offset) < r.end) return line;
    before = line;
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t flags = data[0];
  const int32_t offset = static_cast<int16_t>(data[1] | (data[2] << 8));
  const size_t table_size = std::min<size_t>(data[3], size - 4);
  const std::vector<uint8_t> table(data + 4, data + 4 + table_size);
  const std::span<const uint8_t> patches(data + 4 + table_size, size - 4 - table_size);
  const uint32_t first = 1 + (flags >> 4);

  // 1. The decoder.
  const std::optional<std::vector<PythonLineRange>> ranges = python311_line_ranges(table, first);
  uint32_t covered = 0;
  if (ranges) {
    for (const PythonLineRange& r : *ranges) {
      if (r.start != covered || r.end <= r.start || (r.end - r.start) % 2 != 0 || r.end - r.start > 16) std::abort();
      covered = r.end;
    }
    if (covered > 16 * table.size()) std::abort();
  }
  for (int32_t at = -3; at < static_cast<int32_t>(covered) + 4; ++at)
    if (python311_line(table, first, at) != expected_line(ranges, first, at)) std::abort();
  if (python311_line(table, first, offset) != expected_line(ranges, first, offset)) std::abort();

  // 2. The namer over an image made around the table.
  const PythonLayout* layout = python_layout((flags & 1) ? 0x030c01f0 : 0x030b07f0);
  if (!layout) std::abort();
  FakeMemory memory;
  FakePython python(*layout, memory);
  const uint64_t code = python.make_function(U"Worker.run", U"/srv/w\u00f6rk.py", table, static_cast<int32_t>(first));
  MemoryReader read = memory.reader();
  PythonCodeNamer namer(PythonCodeNamerOptions{.max_entries = 2, .max_bytes = 1 << 20, .revalidate_ns = 10});
  const std::optional<PythonFrameName> name = namer.name(1, *layout, code, offset, read, 0);
  const bool instruction = offset == -2 || (offset >= 0 && offset % 2 == 0 && static_cast<uint32_t>(offset) < covered);
  if (name.has_value() != (ranges && covered > 0 && instruction)) std::abort();
  if (name) {
    if (name->qualname != "Worker.run" || name->file != "/srv/w\xc3\xb6rk.py") std::abort();
    if (name->line != expected_named_line(ranges, first, offset).value_or(0)) std::abort();
  }

  // 3. Hostile memory: the patches.
  std::vector<uint64_t> starts;
  for (const auto& region : memory.regions()) starts.push_back(region.first);
  for (size_t i = 0; i + 3 <= patches.size(); i += 3) {
    const uint32_t position = patches[i] | (patches[i + 1] << 8);
    std::vector<uint8_t>* bytes = memory.region(starts[position % starts.size()]);
    if (!bytes->empty()) (*bytes)[(position >> 4) % bytes->size()] ^= patches[i + 2];
  }
  const uint64_t reads_before = memory.reads;
  PythonCodeNamer fresh(PythonCodeNamerOptions{.max_entries = 2});
  for (uint64_t address : starts) {
    for (PythonCodeNamer* n : {&namer, &fresh}) {
      const std::optional<PythonFrameName> again = n->name(1, *layout, address, offset, read, 100);
      const size_t most = 4 * kMaxPythonStringBytes;  // UTF-8 of the most characters read
      if (again && (again->qualname.size() > most || again->file.size() > most)) std::abort();
      if (n->cached_entries() > 2) std::abort();
    }
  }
  // Each name reads a bounded number of times: no loop over garbage.
  if (memory.reads - reads_before > starts.size() * 2 * 64) std::abort();
  namer.forget(1);
  if (namer.cached_entries() != 0 || namer.cached_bytes() != 0) std::abort();
  return 0;
}
