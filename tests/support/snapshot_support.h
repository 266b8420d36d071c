// tests/support/snapshot_support.h - test-only helpers around stack snapshots:
// the executable modules of a live process (from /proc/PID/maps, with build
// ID and load bias from the ELF), and a symbol-table lookup (libelf; the
// separate debug file by build ID when the module is stripped) to name the
// IPs an unwind returns. Shared by tests/unit/unwind/cfi_unwinder_test.cpp and
// tests/tools/cfi_snapshot_tool.cpp (tests/e2e/cfi_snapshot_unwind.sh).
#pragma once

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gsym/convert/elf_handle.h"
#include "tests/support/recorded_snapshot.h"

namespace snapshot_support {

struct ElfFile {
  int fd = -1;
  Elf* elf = nullptr;
  explicit ElfFile(const std::string& path) {
    gsym::libelf_ready();
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  }
  ~ElfFile() {
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
  }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
  bool ok() const { return elf && elf_kind(elf) == ELF_K_ELF; }

  gsymprof::BuildId build_id() const {
    const void* id = nullptr;
    ssize_t size = ok() ? dwelf_elf_gnu_build_id(elf, &id) : -1;
    if (size <= 0) return {};
    return gsymprof::BuildId(std::span(static_cast<const uint8_t*>(id), size));
  }

  // load_bias for a mapping at runtime `start` of file offset `offset`: the
  // PT_LOAD segment holding the offset turns it into an unslid address.
  std::optional<uint64_t> load_bias(uint64_t start, uint64_t offset) const {
    size_t count = 0;
    if (!ok() || elf_getphdrnum(elf, &count) != 0) return std::nullopt;
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD) continue;
      if (offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz)
        return start - offset + ph.p_offset - ph.p_vaddr;
    }
    return std::nullopt;
  }
};

// The executable, file-backed mappings of `pid`, as a snapshot's module list.
inline bool add_process_modules(const std::string& pid, gsymprof::RecordedSnapshot& out,
                                std::string& error) {
  std::ifstream maps("/proc/" + pid + "/maps");
  if (!maps) {
    error = "cannot read /proc/" + pid + "/maps";
    return false;
  }
  std::map<std::string, uint32_t> index_of_path;
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t start = 0, end = 0, offset = 0, inode = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*x:%*x %" SCNu64 " %n",
                    &start, &end, perms, &offset, &inode, &path_at) < 5)
      continue;
    std::string path = path_at > 0 ? line.substr(path_at) : "";
    if (perms[2] != 'x' || inode == 0 || path.empty() || path[0] != '/') continue;
    if (path.ends_with(" (deleted)")) continue;  // its file is gone: nothing to read
    auto [it, inserted] = index_of_path.emplace(path, static_cast<uint32_t>(out.modules.size()));
    if (inserted) {
      ElfFile elf(path);
      std::optional<uint64_t> bias = elf.load_bias(start, offset);
      if (!bias) {
        error = path + ": no PT_LOAD segment holds offset " + std::to_string(offset);
        return false;
      }
      out.modules.push_back({path, elf.build_id(), *bias, {}, {}});
    }
    out.mappings.push_back({start, end, it->second});
  }
  std::sort(out.mappings.begin(), out.mappings.end(),
            [](const auto& a, const auto& b) { return a.start < b.start; });
  return true;
}

// [start, end) of the mapping named `name` ("[stack]") in /proc/PID/maps.
inline std::optional<std::pair<uint64_t, uint64_t>> find_mapping(const std::string& pid,
                                                                  const std::string& name) {
  std::ifstream maps("/proc/" + pid + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t start = 0, end = 0;
    if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0 &&
        std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64, &start, &end) == 2)
      return std::pair(start, end);
  }
  return std::nullopt;
}

// Function symbols of one module, by unslid address.
class SymbolTable {
 public:
  explicit SymbolTable(const gsymprof::UnwindModule& module) {
    load(module.elf_path);
    // A stripped module (libc) keeps its full symbol table in the debug file.
    std::string hex = module.build_id.hex();
    if (hex.size() > 2)
      load("/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug");
    std::sort(symbols_.begin(), symbols_.end());
  }

  // The FUNC symbol covering `addr` (the lowest-sorting name among aliases).
  std::string name_at(uint64_t addr) const {
    std::string best;
    for (const Symbol& s : symbols_) {
      if (s.start > addr) break;
      if (addr < s.end && (best.empty() || s.name < best)) best = s.name;
    }
    return best;
  }

 private:
  struct Symbol {
    uint64_t start, end;
    std::string name;
    bool operator<(const Symbol& o) const { return start < o.start; }
  };

  void load(const std::string& path) {
    ElfFile file(path);
    if (!file.ok()) return;
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(file.elf, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
      for (size_t i = 0; data && i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_value == 0 || sym.st_shndx == SHN_UNDEF)
          continue;
        const char* name = elf_strptr(file.elf, sh.sh_link, sym.st_name);
        if (name && *name) symbols_.push_back({sym.st_value, sym.st_value + std::max<uint64_t>(sym.st_size, 1), name});
      }
    }
  }

  std::vector<Symbol> symbols_;
};

// Names each IP of an unwind: frame 0 as is, return addresses at ip - 1.
// "?" when no module or symbol covers it.
class Namer {
 public:
  explicit Namer(const gsymprof::RecordedSnapshot& snapshot) : snapshot_(snapshot) {}

  std::vector<std::string> names(const std::vector<uint64_t>& ips) {
    std::vector<std::string> out;
    for (size_t i = 0; i < ips.size(); ++i) out.push_back(name(i == 0 ? ips[i] : ips[i] - 1));
    return out;
  }

  std::string name(uint64_t lookup_addr) {
    const gsymprof::UnwindModule* module = snapshot_.find_module(lookup_addr);
    if (!module) return "?";
    auto it = tables_.find(module->elf_path);
    if (it == tables_.end())
      it = tables_.emplace(module->elf_path, std::make_unique<SymbolTable>(*module)).first;
    std::string n = it->second->name_at(lookup_addr - module->load_bias);
    return n.empty() ? "?" : n;
  }

 private:
  const gsymprof::RecordedSnapshot& snapshot_;
  std::map<std::string, std::unique_ptr<SymbolTable>> tables_;
};

inline std::string join(const std::vector<std::string>& names, const char* sep = ";") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? sep : "") + names[i];
  return out;
}

}  // namespace snapshot_support
