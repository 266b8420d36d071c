#include "userspace/base/build_id.h"

#include <libelf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "gsym/convert/elf_handle.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/file_io.h"
#include "gsym/base/hex.h"
#include "userspace/base/content_hash.h"
#include "userspace/base/file_stamp.h"

namespace gsymprof {

std::optional<BuildId> BuildId::from_hex(std::string_view hex, Kind kind) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = gsym::hex_digit_value(hex[i]), lo = gsym::hex_digit_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return BuildId(bytes, kind);
}

std::string BuildId::hex() const { return gsym::to_hex(bytes_); }

const char* kind_name(BuildId::Kind kind) {
  switch (kind) {
    case BuildId::Kind::Gnu: return "gnu";
    case BuildId::Kind::Go: return "go";
    case BuildId::Kind::ContentSha256: return "sha256";
  }
  return "gnu";
}

bool parse_kind_name(std::string_view name, BuildId::Kind* kind) {
  for (BuildId::Kind k : {BuildId::Kind::Gnu, BuildId::Kind::Go, BuildId::Kind::ContentSha256})
    if (name == kind_name(k)) {
      *kind = k;
      return true;
    }
  return false;
}

std::string describe_identity(const BuildId& id) {
  if (id.empty()) return "no build ID";
  switch (id.kind()) {
    case BuildId::Kind::Gnu: return "build ID " + id.hex();
    case BuildId::Kind::Go: return "Go build ID " + id.hex();
    case BuildId::Kind::ContentSha256: return "SHA-256 " + id.hex();
  }
  return "build ID " + id.hex();
}

namespace {

using gsym::ElfHandle;

gsym::Expected<ElfHandle> open_elf(int fd, const std::string& label, struct stat* st) {
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    return gsym::Error::from_errno(err, label + ": cannot stat: " + std::strerror(err));
  }
  gsym::Expected<ElfHandle> elf = ElfHandle::open(fd, *st, gsym::UntrustedRead::OnDemand);
  if (!elf) return elf.error().prefixed(label + ": ");
  return elf;
}

// A note-based identity of `elf`, or empty when it has neither note.
BuildId note_identity(Elf* elf) {
  const std::vector<uint8_t> gnu = gsym::read_gnu_build_id(elf);
  if (!gnu.empty()) return BuildId(gnu);
  const std::vector<uint8_t> go = gsym::read_go_build_id(elf);
  return BuildId(go, BuildId::Kind::Go);
}

// Files past this size get no content identity (hashing one would take
// seconds; no real module without a build ID is near it).
constexpr uint64_t kMaxHashedBytes = uint64_t{1} << 30;

// Content hashes by file version, so a module seen in many processes (or
// checked again before conversion) is read once.
struct HashMemo {
  std::mutex mutex;
  std::map<std::string, Sha256> by_stamp;
};
HashMemo& hash_memo() {
  static HashMemo memo;
  return memo;
}

}  // namespace

gsym::Expected<BuildId> read_elf_build_id(const std::string& path) {
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(path);
  if (!file) {
    if (file.error().code == gsym::ErrorCode::NotFound)
      return gsym::Error(gsym::ErrorCode::NotFound, "file missing");
    return file.error().prefixed("cannot open ");
  }
  return read_elf_build_id_fd(file->fd.get(), path);
}

gsym::Expected<BuildId> read_elf_build_id_fd(int fd, const std::string& label) {
  struct stat st {};
  gsym::Expected<ElfHandle> elf = open_elf(fd, label, &st);
  if (!elf) return elf.error();
  return BuildId(gsym::read_gnu_build_id(elf->get()));
}

gsym::Expected<BuildId> read_elf_identity_fd(int fd, const std::string& label) {
  struct stat st {};
  {
    gsym::Expected<ElfHandle> elf = open_elf(fd, label, &st);
    if (!elf) return elf.error();
    if (BuildId id = note_identity(elf->get()); !id.empty()) return id;
  }
  if (!S_ISREG(st.st_mode)) return gsym::Error(gsym::ErrorCode::Refused, label + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxHashedBytes)
    return gsym::Error(label + ": no build ID, and too large (" + std::to_string(st.st_size) +
                       " bytes) to identify by its SHA-256");
  const std::string key = FileStamp::of(st).key();
  HashMemo& memo = hash_memo();
  {
    std::lock_guard lock(memo.mutex);
    if (auto it = memo.by_stamp.find(key); it != memo.by_stamp.end())
      return BuildId(it->second, BuildId::Kind::ContentSha256);
  }
  gsym::Expected<Sha256> hash = sha256_of_descriptor(fd);
  if (!hash) return hash.error().prefixed(label + ": ");
  // A file changed while it was read has another stamp now: not remembered.
  struct stat after {};
  if (::fstat(fd, &after) == 0 && FileStamp::of(after).key() == key) {
    std::lock_guard lock(memo.mutex);
    memo.by_stamp.emplace(key, *hash);
  }
  return BuildId(*hash, BuildId::Kind::ContentSha256);
}

gsym::Expected<BuildId> read_elf_identity(std::span<const uint8_t> elf_bytes) {
  gsym::Expected<ElfHandle> elf = ElfHandle::from_memory(elf_bytes);
  if (!elf) return elf.error();
  if (BuildId id = note_identity(elf->get()); !id.empty()) return id;
  return BuildId(sha256_of(elf_bytes), BuildId::Kind::ContentSha256);
}

}  // namespace gsymprof
