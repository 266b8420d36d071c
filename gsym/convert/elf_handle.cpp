#include "gsym/convert/elf_handle.h"

#include "gsym/base/file_io.h"
#include "gsym/convert/elf_image.h"

#include <utility>

namespace gsym {

bool libelf_ready() {
  // A function-local static: thread-safe, and once for every caller.
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  return ready;
}

ElfHandle::ElfHandle(ElfHandle&& other) noexcept
    : elf_(std::exchange(other.elf_, nullptr)), bytes_(std::move(other.bytes_)) {}

ElfHandle& ElfHandle::operator=(ElfHandle&& other) noexcept {
  if (this != &other) {
    if (elf_) elf_end(elf_);
    // The vector's heap buffer, which libelf reads, moves with it unchanged.
    elf_ = std::exchange(other.elf_, nullptr);
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

ElfHandle::~ElfHandle() {
  if (elf_) elf_end(elf_);
}

Expected<ElfHandle> ElfHandle::checked(ElfHandle handle) {
  if (!handle.elf_) {
    const char* message = elf_errmsg(-1);
    return Error(std::string("cannot read ELF: ") + (message ? message : "unknown libelf error"));
  }
  if (elf_kind(handle.elf_) != ELF_K_ELF) return Error(ErrorCode::Malformed, "not an ELF file");
  return handle;
}

Expected<ElfHandle> ElfHandle::open(int fd, const struct stat& status, UntrustedRead untrusted) {
  ElfHandle handle;
  if (!libelf_ready()) return checked(std::move(handle));
  if (writable_only_by_us(status)) {
    handle.elf_ = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  } else if (untrusted == UntrustedRead::OnDemand) {
    handle.elf_ = elf_begin(fd, ELF_C_READ, nullptr);
  } else {
    Expected<std::vector<uint8_t>> bytes = read_descriptor(fd, kMaxInMemoryElf, "");
    if (!bytes) return bytes.error();
    handle.bytes_ = std::move(*bytes);
    handle.elf_ = elf_memory(reinterpret_cast<char*>(handle.bytes_.data()), handle.bytes_.size());
  }
  return checked(std::move(handle));
}

Expected<ElfHandle> ElfHandle::from_memory(std::span<const uint8_t> bytes) {
  ElfHandle handle;
  // libelf wants a mutable pointer but ELF_C_READ_MEMORY never writes.
  if (libelf_ready())
    handle.elf_ = elf_memory(const_cast<char*>(reinterpret_cast<const char*>(bytes.data())), bytes.size());
  return checked(std::move(handle));
}

}  // namespace gsym
