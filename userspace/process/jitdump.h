// userspace/process/jitdump.h - JIT code from jitdump files: the
// jit-PID.dump a runtime writes (node --perf-prof, CPython 3.12+ -X perf_jit,
// the JVM through perf's JVMTI agent), in the format of perf's
// tools/perf/Documentation/jitdump-specification.txt: a header, then records
// that load compiled code (name, range, the code itself), move it, give the
// line table of the next load (debug info) and its .eh_frame (unwinding info).
//
// The file is written by the profiled process's user: untrusted. Every size
// is checked against the bytes present and against the bounds below; a bad
// record is skipped and counted, a bad header or record framing stops the
// file with one line saying why. Nothing here opens files: perf_map.cpp finds
// and opens the dump inside the process's root, as it does the perf map.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/capture/capture.h"

namespace gsymprof {

// Largest dump read (node writes ~1 KiB per compiled function, code included).
inline constexpr uint64_t kMaxJitdumpBytes = 256ull << 20;
// Largest record: a code load carries its machine code.
inline constexpr uint32_t kMaxJitdumpRecordBytes = 16u << 20;
// Longer function and file names are cut to this many bytes.
inline constexpr size_t kMaxJitdumpNameBytes = 4096;
// Unwinding info kept per code load, and for the whole file (beyond it the
// .eh_frame of later loads is dropped, their names kept).
inline constexpr size_t kMaxJitdumpUnwindBytes = 1u << 20;
inline constexpr uint64_t kMaxJitdumpUnwindTotalBytes = 64ull << 20;
// Line rows kept per code load (V8 writes a few per source position).
inline constexpr size_t kMaxJitdumpLineRows = 65536;
// Symbols a dump gives at most: past it, code keeps its name without lines
// (moves could otherwise copy one code's rows without end).
inline constexpr size_t kMaxJitdumpSymbols = 4u << 20;

// One row of a code load's line table: from `address` (runtime) to the next
// row's, the code is for `file`:`line`. `file` is "" when the runtime wrote
// no readable name (controls, bad UTF-8: node 20 writes freed memory there
// for user scripts) but the line is still right.
struct JitLine {
  uint64_t address = 0;
  uint32_t line = 0;
  uint32_t column = 0;  // the spec's "discrim"; V8 writes the column there
  std::string file;
  bool operator==(const JitLine&) const = default;
};

// Compiled code as loaded (JIT_CODE_LOAD) with the debug and unwinding info
// that preceded it.
struct JitCode {
  uint64_t start = 0, end = 0;  // [start, end) at run time
  std::string name;
  uint64_t code_index = 0;
  std::vector<JitLine> lines;  // sorted by address, all in [start, end)
  // JIT_CODE_UNWINDING_INFO: .eh_frame followed by .eh_frame_hdr (the
  // hdr's last eh_frame_hdr_size bytes), as the runtime wrote them.
  std::vector<uint8_t> unwind;
  uint64_t eh_frame_hdr_size = 0;
};

// A record the parser yields, in file order: a load, or a move of the code
// loaded at `moved_from` to code.start (code.name etc. empty).
struct JitdumpEvent {
  JitCode code;
  bool move = false;
  uint64_t moved_from = 0;
};

// An incremental parser of a dump's bytes: feed it the file from where it
// stopped (consumed()) as the file grows; it yields every complete record.
class JitdumpParser {
 public:
  // Parses the complete records at the start of `bytes`, which are the
  // file's bytes from offset consumed(); appends what they yield to `out`.
  // Returns the bytes consumed (a partial record at the end is left for the
  // next call). After an error (error() not empty) or JIT_CODE_CLOSE it
  // consumes nothing more.
  size_t parse(std::span<const uint8_t> bytes, std::vector<JitdumpEvent>& out);

  uint64_t consumed() const { return consumed_; }
  // Why the file stops here ("" = fine so far): a bad header or record size.
  const std::string& error() const { return error_; }
  bool closed() const { return closed_; }
  bool byte_swapped() const { return swapped_; }
  uint32_t pid() const { return pid_; }  // the header's, as the runtime saw itself
  uint64_t bad_records() const { return bad_records_; }  // skipped: inconsistent sizes, bad names
  uint64_t unknown_records() const { return unknown_records_; }  // skipped: a record id the spec does not know
  // The end of the file was reached with `pending` bytes of a record left:
  // the file is truncated there (or still being written).
  std::string truncation(uint64_t pending) const;

 private:
  bool parse_header(std::span<const uint8_t> bytes);
  void parse_record(uint32_t id, std::span<const uint8_t> body, std::vector<JitdumpEvent>& out);
  void parse_load(std::span<const uint8_t> body, std::vector<JitdumpEvent>& out);
  void parse_move(std::span<const uint8_t> body, std::vector<JitdumpEvent>& out);
  void parse_unwinding_info(std::span<const uint8_t> body);
  uint32_t u32(const uint8_t* at) const;
  uint64_t u64(const uint8_t* at) const;

  bool header_read_ = false, swapped_ = false, closed_ = false;
  uint32_t pid_ = 0;
  uint64_t consumed_ = 0;
  std::string error_;
  uint64_t bad_records_ = 0, unknown_records_ = 0;
  // What applies to the next code load: its debug record's body (read once
  // the code's range is known) and its unwinding info.
  std::vector<uint8_t> pending_debug_;
  std::vector<uint8_t> pending_unwind_;
  uint64_t pending_eh_frame_hdr_size_ = 0;
  uint64_t unwind_total_ = 0;
};

// The line rows of a debug-info record body (code_addr, nr_entry, entries)
// that fall in code [start, end), sorted. V8 writes each row's address 0x40
// past the code's (where perf inject puts the code, after an ELF header):
// rows that all lie at or beyond start + 0x40 are taken that way, others as
// plain addresses. Rows V8 wrote with a name of the wrong length (node 20,
// user scripts) are read at the fixed stride the record's size gives. Pure;
// an unreadable record gives no rows.
std::vector<JitLine> parse_jitdump_debug_info(std::span<const uint8_t> body, bool swapped, uint64_t start,
                                              uint64_t end);

// Parses a whole dump: what a file this size gives read at once. Pure; for
// tests and fuzzing.
struct ParsedJitdump {
  std::vector<JitdumpEvent> events;
  std::string error;  // the parser's, or the truncation if bytes were left
  bool closed = false;
  uint64_t bad_records = 0;
};
ParsedJitdump parse_jitdump(std::span<const uint8_t> bytes);

// The code of a process's dump as it stands after its records: where loads
// overlap the later wins, as in a perf map; a move carries the code (and its
// lines, shifted) to the new range, without copying it.
class JitCodeMap {
 public:
  void apply(std::vector<JitdumpEvent>&& events);
  // The code holding `address`, or nullptr; `moved_by` (optional): what to
  // add to the code's addresses (its start, its rows) to get where it is now.
  const JitCode* find(uint64_t address, uint64_t* moved_by = nullptr) const;
  // One symbol per line row of each piece of code (the name alone for code
  // before the first row, or without rows): "NAME (BASENAME:LINE)", or
  // "NAME (line LINE)" when the row has no readable file. Sorted, disjoint;
  // past kMaxJitdumpSymbols, one per piece.
  std::vector<JitSymbol> symbols() const;
  size_t size() const { return pieces_.size(); }

 private:
  struct Piece {
    uint64_t end = 0;
    uint32_t code = 0;      // index into codes_
    uint64_t moved_by = 0;  // added to the code's addresses (mod 2^64)
  };
  void paint(uint64_t start, uint64_t end, const Piece& piece);
  std::vector<JitCode> codes_;
  std::map<uint64_t, Piece> pieces_;
};

// The name a JIT symbol gets for code `name` at line row `line` (nullptr:
// none).
std::string jit_line_name(std::string_view name, const JitLine* line);

}  // namespace gsymprof
