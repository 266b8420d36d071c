// userspace/base/build_id.h - a module's identity: bytes and what they are;
// hex only at I/O. The GNU build ID is read from ELF files by
// gsym::read_gnu_build_id (its precedence, for every caller).
//
// Identity rule (read_elf_identity_fd, the one place it is decided): the GNU
// build ID note when the file has one; else the Go build ID note
// (.note.go.buildid, written by `go build`); else the SHA-256 of the whole
// file. Two identities are equal only when kind and bytes are: a GNU build
// ID never matches a Go build ID or a content hash with the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"

namespace gsymprof {

class BuildId {
 public:
  enum class Kind : uint8_t {
    Gnu = 0,        // NT_GNU_BUILD_ID note (also: the empty identity, "none")
    Go = 1,         // the Go linker's build ID note (an ASCII string)
    ContentSha256,  // SHA-256 of the file's bytes, for files with neither note
  };

  BuildId() = default;
  explicit BuildId(std::span<const uint8_t> bytes, Kind kind = Kind::Gnu)
      : kind_(bytes.empty() ? Kind::Gnu : kind), bytes_(bytes.begin(), bytes.end()) {}
  static std::optional<BuildId> from_hex(std::string_view hex, Kind kind = Kind::Gnu);

  bool empty() const { return bytes_.empty(); }
  Kind kind() const { return kind_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  std::string hex() const;

  bool operator==(const BuildId&) const = default;
  auto operator<=>(const BuildId&) const = default;

 private:
  Kind kind_ = Kind::Gnu;
  std::vector<uint8_t> bytes_;
};

// Stable names of kinds, in capture files and reports: "gnu", "go",
// "sha256"; parse returns false on anything else.
const char* kind_name(BuildId::Kind kind);
bool parse_kind_name(std::string_view name, BuildId::Kind* kind);

// How reports show an identity: "build ID 1a2b..." (GNU, as always),
// "Go build ID 1a2b..." (hex of the note's text), "SHA-256 1a2b...", or
// "no build ID" when empty.
std::string describe_identity(const BuildId& id);

// The GNU build ID of the ELF file at `path` (empty: it has none), opened as
// gsym::open_regular_file does. When the path does not exist the error is
// coded gsym::ErrorCode::NotFound and says "file missing".
gsym::Expected<BuildId> read_elf_build_id(const std::string& path);
// The same from an open descriptor (not closed); `label` names it in errors.
gsym::Expected<BuildId> read_elf_build_id_fd(int fd, const std::string& label);

// The identity of the ELF file open at `fd` by the rule above (never empty
// for an ELF file). The content hash is computed once per file version
// (device, inode, size, mtime, ctime) per run.
gsym::Expected<BuildId> read_elf_identity_fd(int fd, const std::string& label);

// The identity of ELF bytes in memory by the same rule (tests, fuzzing).
gsym::Expected<BuildId> read_elf_identity(std::span<const uint8_t> elf_bytes);

}  // namespace gsymprof
