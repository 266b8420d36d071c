#include "tests/support/fake_python.h"

#include <algorithm>
#include <iterator>

namespace gsymprof {
namespace {

void store(std::vector<uint8_t>& bytes, size_t at, uint64_t value, size_t size) {
  if (bytes.size() < at + size) bytes.resize(at + size);
  for (size_t i = 0; i < size; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

}  // namespace

std::vector<uint8_t>* FakeMemory::region(uint64_t address) {
  auto it = regions_.find(address);
  return it == regions_.end() ? nullptr : &it->second;
}

bool FakeMemory::read(uint64_t address, std::span<uint8_t> out) const {
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) return false;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second.size() || it->second.size() - offset < out.size()) return false;
  std::copy_n(it->second.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
  return true;
}

MemoryReader FakeMemory::reader() {
  return [this](uint64_t address, std::span<uint8_t> out) {
    ++reads;
    return read(address, out);
  };
}

FakePython::FakePython(const PythonLayout& python_layout, FakeMemory& memory)
    : layout(python_layout), memory_(memory) {
  str_type = make_type("str", kStrFlags);
  bytes_type = make_type("bytes", kBytesFlags);
  code_type = make_type("code", kCodeFlags);
}

uint64_t FakePython::allocate(size_t size) {
  // 16-aligned, with an unmapped gap after each object: a read past its end fails.
  const uint64_t address = next_;
  next_ += (size + 15) / 16 * 16 + 0x1000;
  return address;
}

uint64_t FakePython::make_type(const std::string& name, uint64_t flags) {
  std::vector<uint8_t> name_bytes(name.begin(), name.end());
  name_bytes.push_back(0);
  const uint64_t name_address = allocate(name_bytes.size());
  memory_.put(name_address, std::move(name_bytes));
  std::vector<uint8_t> type(std::max(layout.type_name, layout.type_flags) + 8);
  store(type, layout.type_name, name_address, 8);
  store(type, layout.type_flags, flags, 8);
  const uint64_t address = allocate(type.size());
  memory_.put(address, std::move(type));
  return address;
}

uint64_t FakePython::make_str(const std::u32string& text) {
  char32_t widest = 0;
  for (char32_t c : text) widest = std::max(widest, c);
  FakeStrState state;
  state.ascii = widest < 0x80;
  state.kind = widest < 0x100 ? 1 : widest < 0x10000 ? 2 : 4;
  return make_str_as(text, state);
}

uint64_t FakePython::make_str_as(const std::u32string& text, FakeStrState state, uint64_t type) {
  const size_t data = state.ascii ? layout.unicode_ascii_size : layout.unicode_compact_size;
  std::vector<uint8_t> object(data + (text.size() + 1) * state.kind);
  store(object, layout.object_type, type ? type : str_type, 8);
  store(object, layout.unicode_length, text.size(), 8);
  uint32_t bits = (state.kind << layout.unicode_kind_shift) |
                  (uint32_t{state.compact} << layout.unicode_compact_shift) |
                  (uint32_t{state.ascii} << layout.unicode_ascii_shift);
  if (layout.unicode_ready_shift != kPythonAbsent) bits |= uint32_t{state.ready} << layout.unicode_ready_shift;
  store(object, layout.unicode_state, bits, 4);
  for (size_t i = 0; i < text.size(); ++i) store(object, data + i * state.kind, text[i], state.kind);
  const uint64_t address = allocate(object.size());
  memory_.put(address, std::move(object));
  return address;
}

uint64_t FakePython::make_bytes(std::span<const uint8_t> contents, int64_t declared_size, uint64_t type) {
  std::vector<uint8_t> object(layout.bytes_data + contents.size() + 1);
  store(object, layout.object_type, type ? type : bytes_type, 8);
  store(object, layout.bytes_size, static_cast<uint64_t>(declared_size < 0 ? static_cast<int64_t>(contents.size())
                                                                           : declared_size), 8);
  std::copy(contents.begin(), contents.end(), object.begin() + layout.bytes_data);
  const uint64_t address = allocate(object.size());
  memory_.put(address, std::move(object));
  return address;
}

void FakePython::write_code(uint64_t address, const Code& code) {
  std::vector<uint8_t> object(layout.code_adaptive + static_cast<size_t>(std::max<int64_t>(code.code_units, 0)) * 2);
  store(object, layout.object_type, code.type ? code.type : code_type, 8);
  store(object, layout.var_object_size, static_cast<uint64_t>(code.code_units), 8);
  store(object, layout.code_firstlineno, static_cast<uint32_t>(code.firstlineno), 4);
  store(object, layout.code_filename, code.filename, 8);
  store(object, layout.code_name, code.name, 8);
  store(object, layout.code_qualname, code.qualname, 8);
  store(object, layout.code_linetable, code.linetable, 8);
  memory_.put(address, std::move(object));
}

uint64_t FakePython::make_code(const Code& code) {
  const size_t code_bytes = static_cast<size_t>(std::max<int64_t>(code.code_units, 0)) * 2;
  const uint64_t address = allocate(layout.code_adaptive + code_bytes);
  write_code(address, code);
  return address;
}

uint64_t FakePython::make_function(const std::u32string& qualname, const std::u32string& file,
                                   const std::vector<uint8_t>& linetable, int32_t firstlineno) {
  Code code;
  code.firstlineno = firstlineno;
  // Code units: what the table covers (each entry's low 3 bits + 1).
  for (uint8_t b : linetable)
    if (b & 0x80) code.code_units += (b & 7) + 1;
  code.qualname = make_str(qualname);
  const size_t dot = qualname.rfind(U'.');
  code.name = dot == std::u32string::npos ? code.qualname : make_str(qualname.substr(dot + 1));
  code.filename = make_str(file);
  code.linetable = make_bytes(linetable);
  return make_code(code);
}

}  // namespace gsymprof
