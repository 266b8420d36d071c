#include "userspace/base/build_id.h"

#include <libelf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "gsym/elf_image.h"
#include "gsym/file_io.h"
#include "gsym/hex.h"

namespace gsymprof {

std::optional<BuildId> BuildId::from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = gsym::hex_digit_value(hex[i]), lo = gsym::hex_digit_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return BuildId(bytes);
}

std::string BuildId::hex() const { return gsym::to_hex(bytes_); }

gsym::Expected<BuildId> read_elf_build_id(const std::string& path) {
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(path);
  if (!file) {
    if (gsym::is_missing_file(file.error())) return gsym::Error("file missing");
    return gsym::Error("cannot open " + file.error().message);
  }
  return read_elf_build_id_fd(file->fd.get(), path);
}

gsym::Expected<BuildId> read_elf_build_id_fd(int fd, const std::string& label) {
  if (elf_version(EV_CURRENT) == EV_NONE) return gsym::Error(std::string("libelf: ") + elf_errmsg(-1));
  struct stat st {};
  if (::fstat(fd, &st) != 0) return gsym::Error(label + ": cannot stat: " + std::strerror(errno));
  // A file someone else can truncate is read, not mapped (SIGBUS).
  std::unique_ptr<Elf, decltype(&elf_end)> elf(
      elf_begin(fd, gsym::writable_only_by_us(st) ? ELF_C_READ_MMAP : ELF_C_READ, nullptr), &elf_end);
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return gsym::Error(label + ": not an ELF file");
  return BuildId(gsym::read_gnu_build_id(elf.get()));
}

}  // namespace gsymprof
