#include "userspace/module_identity.h"

#include "userspace/vdso_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace gsymprof {
namespace {

// Largest build ID accepted; GNU ld writes 20 bytes (sha1), some tools 16/32.
constexpr size_t kMaxBuildIdSize = 64;
// A sane limit on program headers; real files have about a dozen.
constexpr size_t kMaxProgramHeaders = 4096;

struct ElfCloser {
  void operator()(Elf* elf) const { elf_end(elf); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

bool libelf_ready() {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  return ready;
}

gsym::Error elf_error(const char* what) {
  return gsym::Error(std::string(what) + ": " + elf_errmsg(-1));
}

// Looks for NT_GNU_BUILD_ID among the notes in `data`.
bool find_build_id(Elf_Data* data, BuildId& out) {
  if (!data || !data->d_buf) return false;
  size_t offset = 0;
  GElf_Nhdr note;
  size_t name_offset = 0, desc_offset = 0;
  while (offset < data->d_size) {
    size_t next = gelf_getnote(data, offset, &note, &name_offset, &desc_offset);
    if (next == 0 || next <= offset) break;
    const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(bytes + name_offset, "GNU", 4) == 0 && note.n_descsz > 0 &&
        note.n_descsz <= kMaxBuildIdSize) {
      out = BuildId(std::span<const uint8_t>(bytes + desc_offset, note.n_descsz));
      return true;
    }
    offset = next;
  }
  return false;
}

// The GNU build ID: PT_NOTE segments first (what the loader mapped), then
// SHT_NOTE sections (files without PT_NOTE, e.g. some debug files).
BuildId elf_build_id(Elf* elf, size_t phnum) {
  BuildId id;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr) || phdr.p_type != PT_NOTE) continue;
    Elf_Type type = phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
    if (find_build_id(elf_getdata_rawchunk(elf, static_cast<int64_t>(phdr.p_offset),
                                           phdr.p_filesz, type),
                      id))
      return id;
  }
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    if (find_build_id(elf_getdata(scn, nullptr), id)) return id;
  }
  return id;
}

gsym::Expected<ModuleIdentity> read_identity(Elf* elf) {
  if (elf_kind(elf) != ELF_K_ELF) return gsym::Error("not an ELF file");
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) return elf_error("bad ELF header");
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return elf_error("bad program headers");
  if (phnum > kMaxProgramHeaders) return gsym::Error("too many program headers");

  ModuleIdentity identity;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) return elf_error("bad program header");
    if (phdr.p_type == PT_LOAD) {
      if (phdr.p_filesz > phdr.p_memsz || phdr.p_offset + phdr.p_filesz < phdr.p_offset ||
          phdr.p_vaddr + phdr.p_memsz < phdr.p_vaddr)
        return gsym::Error("PT_LOAD segment " + std::to_string(i) + " is malformed");
      identity.segments.push_back({phdr.p_offset, phdr.p_vaddr, phdr.p_filesz, phdr.p_memsz,
                                   (phdr.p_flags & PF_X) != 0});
    }
  }
  if (identity.segments.empty()) return gsym::Error("no PT_LOAD segments");
  identity.build_id = elf_build_id(elf, phnum);
  return identity;
}

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

gsym::Expected<ModuleIdentity> read_module_identity(std::span<const uint8_t> elf_bytes) {
  if (!libelf_ready()) return elf_error("libelf");
  // libelf wants a mutable pointer but ELF_C_READ_MEMORY never writes.
  ElfHandle elf(elf_memory(const_cast<char*>(reinterpret_cast<const char*>(elf_bytes.data())),
                           elf_bytes.size()));
  if (!elf) return elf_error("not an ELF file");
  return read_identity(elf.get());
}

gsym::Expected<ModuleIdentity> read_module_identity_fd(int fd) {
  if (!libelf_ready()) return elf_error("libelf");
  ElfHandle elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (!elf) return elf_error("not an ELF file");
  return read_identity(elf.get());
}

gsym::Expected<BuildId> read_elf_build_id(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR) return gsym::Error("file missing");
    return gsym::Error("cannot open " + path + ": " + errno_text(error));
  }
  if (!libelf_ready()) {
    ::close(fd);
    return elf_error("libelf");
  }
  ElfHandle elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  size_t phnum = 0;
  gsym::Expected<BuildId> result =
      !elf || elf_kind(elf.get()) != ELF_K_ELF ? gsym::Expected<BuildId>(gsym::Error(path + ": not an ELF file"))
      : elf_getphdrnum(elf.get(), &phnum) != 0 ? gsym::Expected<BuildId>(gsym::Error(path + ": bad program headers"))
                                               : gsym::Expected<BuildId>(elf_build_id(elf.get(), phnum));
  elf.reset();
  ::close(fd);
  return result;
}

gsym::Expected<ModuleIdentity> load_module_identity(uint32_t pid, const MapEntry& mapping,
                                                    const std::string& proc_root) {
  if (mapping.path == kVdsoPath) {
    const gsym::Expected<VdsoFile>& vdso = own_vdso_file();
    if (!vdso) return gsym::Error("vDSO: " + vdso.error().message);
    if (mapping.end - mapping.start != vdso->size)
      return gsym::Error("[vdso] is not the size of gsymprof's own vDSO (a process of another ABI?)");
    int fd = ::open(vdso->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gsym::Error(vdso->path + ": " + errno_text(errno));
    auto identity = read_module_identity_fd(fd);
    ::close(fd);
    return identity;
  }
  char range[64];
  std::snprintf(range, sizeof(range), "%llx-%llx", static_cast<unsigned long long>(mapping.start),
                static_cast<unsigned long long>(mapping.end));
  const std::string proc_pid = proc_root + "/" + std::to_string(pid);
  int fd = ::open((proc_pid + "/map_files/" + range).c_str(), O_RDONLY | O_CLOEXEC);
  std::string first_error;
  if (fd < 0) {
    first_error = "map_files: " + errno_text(errno);
    if (mapping.deleted) return gsym::Error("file deleted and " + first_error);
    fd = ::open((proc_pid + "/root" + mapping.path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gsym::Error(first_error + "; " + mapping.path + ": " + errno_text(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_ino != mapping.inode ||
        major(st.st_dev) != mapping.dev_major || minor(st.st_dev) != mapping.dev_minor) {
      ::close(fd);
      return gsym::Error(mapping.path + " is not the file that was mapped (replaced since?)");
    }
  }
  auto identity = read_module_identity_fd(fd);
  ::close(fd);
  return identity;
}

}  // namespace gsymprof
