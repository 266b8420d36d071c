// userspace/base/build_id.h - a GNU build ID: bytes; hex only at I/O. Read
// from ELF files by gsym::read_gnu_build_id (its precedence, for every caller).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/expected.h"

namespace gsymprof {

class BuildId {
 public:
  BuildId() = default;
  explicit BuildId(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  static std::optional<BuildId> from_hex(std::string_view hex);

  bool empty() const { return bytes_.empty(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  std::string hex() const;

  bool operator==(const BuildId&) const = default;
  auto operator<=>(const BuildId&) const = default;

 private:
  std::vector<uint8_t> bytes_;
};

// The GNU build ID of the ELF file at `path` (empty: it has none), opened as
// gsym::open_regular_file does. The error is exactly "file missing" when the
// path does not exist.
gsym::Expected<BuildId> read_elf_build_id(const std::string& path);
// The same from an open descriptor (not closed); `label` names it in errors.
gsym::Expected<BuildId> read_elf_build_id_fd(int fd, const std::string& label);

}  // namespace gsymprof
