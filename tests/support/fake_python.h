// tests/support/fake_python.h - a CPython process's memory made by hand:
// regions of bytes (a read succeeds only inside one), and the objects
// PythonCodeNamer reads (type objects, str, bytes, code objects) laid out by
// a PythonLayout as CPython lays them out. For the namer's unit tests and
// its fuzz target.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "userspace/process/python_runtime.h"

namespace gsymprof {

class FakeMemory {
 public:
  // A region at `address` (one already there is replaced).
  void put(uint64_t address, std::vector<uint8_t> bytes) { regions_[address] = std::move(bytes); }
  void remove(uint64_t address) { regions_.erase(address); }
  // The bytes of the region starting at `address` (to change them), or nullptr.
  std::vector<uint8_t>* region(uint64_t address);
  // All bytes of [address, address + out.size()) from one region.
  bool read(uint64_t address, std::span<uint8_t> out) const;
  // read() as a MemoryReader, counting calls in `reads`.
  MemoryReader reader();
  uint64_t reads = 0;
  const std::map<uint64_t, std::vector<uint8_t>>& regions() const { return regions_; }

 private:
  std::map<uint64_t, std::vector<uint8_t>> regions_;
};

// A str object's state, as written (make_str writes what CPython would).
struct FakeStrState {
  uint32_t kind = 1;
  bool compact = true, ascii = true, ready = true;
};

class FakePython {
 public:
  // Type flags of CPython's own str, bytes and code types.
  static constexpr uint64_t kStrFlags = (1ull << 28) | (1ull << 12) | (1ull << 10);
  static constexpr uint64_t kBytesFlags = (1ull << 27) | (1ull << 12) | (1ull << 10);
  static constexpr uint64_t kCodeFlags = (1ull << 12);
  static constexpr uint64_t kHeapType = 1ull << 9;

  // Makes the str, bytes and code types in `memory`.
  FakePython(const PythonLayout& layout, FakeMemory& memory);

  // A type object named `name` with `flags`.
  uint64_t make_type(const std::string& name, uint64_t flags);
  // A str as CPython makes it: the narrowest kind for `text` (code points).
  uint64_t make_str(const std::u32string& text);
  // A str with the state given (and `type`, 0: the str type); characters
  // written in `state.kind` bytes each, then a NUL.
  uint64_t make_str_as(const std::u32string& text, FakeStrState state, uint64_t type = 0);
  // A bytes object; `declared_size` (default: the contents' size) is its ob_size.
  uint64_t make_bytes(std::span<const uint8_t> contents, int64_t declared_size = -1, uint64_t type = 0);

  struct Code {
    uint64_t type = 0;  // 0: the code type
    int64_t code_units = 0;
    int32_t firstlineno = 1;
    uint64_t filename = 0, name = 0, qualname = 0, linetable = 0;
  };
  // A code object at a new address, or written over the one at `address`.
  uint64_t make_code(const Code& code);
  void write_code(uint64_t address, const Code& code);
  // A code object with these names and line table (code units from the table).
  uint64_t make_function(const std::u32string& qualname, const std::u32string& file,
                         const std::vector<uint8_t>& linetable, int32_t firstlineno);

  uint64_t str_type = 0, bytes_type = 0, code_type = 0;
  const PythonLayout& layout;

 private:
  uint64_t allocate(size_t size);
  FakeMemory& memory_;
  uint64_t next_ = 0x100000;
};

}  // namespace gsymprof
