// Tests for userspace/module_identity: GNU build ID and PT_LOAD segments read
// with libelf from synthetic ELF images built byte by byte.
#include <doctest/doctest.h>
#include <elf.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "userspace/base/content_hash.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/proc_maps.h"

using namespace gsymprof;

namespace {

struct SyntheticElf {
  std::vector<Elf64_Phdr> phdrs;
  std::vector<uint8_t> note;  // placed at note_offset
  uint64_t note_offset = 0x200;
  size_t file_size = 0x400;

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out(file_size, 0);
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<uint16_t>(phdrs.size());
    std::memcpy(out.data(), &eh, sizeof(eh));
    for (size_t i = 0; i < phdrs.size(); ++i)
      std::memcpy(out.data() + sizeof(eh) + i * sizeof(Elf64_Phdr), &phdrs[i], sizeof(Elf64_Phdr));
    if (!note.empty()) std::memcpy(out.data() + note_offset, note.data(), note.size());
    return out;
  }
};

Elf64_Phdr load(uint64_t offset, uint64_t vaddr, uint64_t filesz, uint32_t flags) {
  Elf64_Phdr p{};
  p.p_type = PT_LOAD;
  p.p_offset = offset;
  p.p_vaddr = p.p_paddr = vaddr;
  p.p_filesz = p.p_memsz = filesz;
  p.p_flags = flags;
  p.p_align = 0x1000;
  return p;
}

std::vector<uint8_t> gnu_note(uint32_t type, const std::vector<uint8_t>& desc,
                              const char* name = "GNU") {
  auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  uint32_t header[3] = {static_cast<uint32_t>(std::strlen(name) + 1),
                        static_cast<uint32_t>(desc.size()), type};
  const size_t name_size = align4(header[0]);
  std::vector<uint8_t> n(sizeof(header) + name_size + align4(desc.size()), 0);
  std::memcpy(n.data(), header, sizeof(header));
  std::memcpy(n.data() + sizeof(header), name, header[0]);
  if (!desc.empty()) std::memcpy(n.data() + sizeof(header) + name_size, desc.data(), desc.size());
  return n;
}

Elf64_Phdr note_phdr(uint64_t offset, uint64_t size) {
  Elf64_Phdr p{};
  p.p_type = PT_NOTE;
  p.p_offset = offset;
  p.p_vaddr = offset;
  p.p_filesz = p.p_memsz = size;
  p.p_align = 4;
  return p;
}

std::vector<uint8_t> twenty_bytes() {
  std::vector<uint8_t> id(20);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(0xa0 + i);
  return id;
}

}  // namespace

TEST_CASE("module identity: build ID from PT_NOTE and every PT_LOAD in order") {
  SyntheticElf elf;
  // Another note first (ABI tag), then the build ID, in one PT_NOTE.
  std::vector<uint8_t> notes = gnu_note(NT_GNU_ABI_TAG, {0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0});
  std::vector<uint8_t> id_note = gnu_note(NT_GNU_BUILD_ID, twenty_bytes());
  notes.insert(notes.end(), id_note.begin(), id_note.end());
  elf.note = notes;
  elf.phdrs = {load(0x0, 0x400000, 0x300, PF_R), load(0x1000, 0x401000, 0x200, PF_R | PF_X),
               load(0x3000, 0x603000, 0x100, PF_R | PF_X), note_phdr(0x200, notes.size())};
  auto identity = read_module_identity(elf.bytes());
  REQUIRE(identity.ok());
  CHECK(identity->build_id.hex() == "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
  REQUIRE(identity->segments.size() == 3);
  CHECK(identity->segments[0] == LoadSegment{0x0, 0x400000, 0x300, 0x300, false});
  CHECK(identity->segments[1] == LoadSegment{0x1000, 0x401000, 0x200, 0x200, true});
  CHECK(identity->segments[2] == LoadSegment{0x3000, 0x603000, 0x100, 0x100, true});
}

TEST_CASE("module identity: a file without a build ID has an empty one") {
  SyntheticElf elf;
  elf.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X)};
  const std::vector<uint8_t> bytes = elf.bytes();
  auto identity = read_module_identity(bytes);
  REQUIRE(identity.ok());
  // The fallback identity: the SHA-256 of the whole file.
  CHECK(identity->build_id.kind() == BuildId::Kind::ContentSha256);
  CHECK(identity->build_id == BuildId(gsymprof::sha256_of(bytes), BuildId::Kind::ContentSha256));
  CHECK(identity->segments.size() == 1);
}

TEST_CASE("module identity: a Go build ID note when there is no GNU build ID") {
  const std::string go_id = "abcdefghij/klmnopqrst/uvwxyzABCD/EFGHIJKLMN";
  const std::vector<uint8_t> go_bytes(go_id.begin(), go_id.end());
  SyntheticElf elf;
  elf.note = gnu_note(4, go_bytes, "Go");
  elf.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, elf.note.size())};
  auto identity = read_module_identity(elf.bytes());
  REQUIRE(identity.ok());
  CHECK(identity->build_id.kind() == BuildId::Kind::Go);
  CHECK(identity->build_id == BuildId(go_bytes, BuildId::Kind::Go));
  CHECK(describe_identity(identity->build_id) == "Go build ID " + identity->build_id.hex());
  // Equal bytes of another kind are another identity.
  CHECK(identity->build_id != BuildId(go_bytes));

  // A GNU build ID wins over a Go one (go build -ldflags=-B adds one).
  SyntheticElf both;
  both.note = gnu_note(4, go_bytes, "Go");
  std::vector<uint8_t> gnu = gnu_note(NT_GNU_BUILD_ID, twenty_bytes());
  both.note.insert(both.note.end(), gnu.begin(), gnu.end());
  both.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, both.note.size())};
  auto with_gnu = read_module_identity(both.bytes());
  REQUIRE(with_gnu.ok());
  CHECK(with_gnu->build_id == BuildId(twenty_bytes()));
  CHECK(describe_identity(with_gnu->build_id) == "build ID a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");

  // A Go note of another type, or longer than kMaxGoBuildIdBytes: content hash.
  SyntheticElf other;
  other.note = gnu_note(3, go_bytes, "Go");
  other.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, other.note.size())};
  auto other_identity = read_module_identity(other.bytes());
  REQUIRE(other_identity.ok());
  CHECK(other_identity->build_id.kind() == BuildId::Kind::ContentSha256);
}

TEST_CASE("module identity: the content hash is the file's, read through a descriptor") {
  SyntheticElf elf;
  elf.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X)};
  const std::vector<uint8_t> bytes = elf.bytes();
  char path[] = "/tmp/gsymprof-identity-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  auto from_fd = read_module_identity_fd(fd);
  auto again = read_elf_identity_fd(fd, path);  // memoized by file version
  ::close(fd);
  ::unlink(path);
  REQUIRE(from_fd.ok());
  REQUIRE(again.ok());
  CHECK(from_fd->build_id == BuildId(sha256_of(bytes), BuildId::Kind::ContentSha256));
  CHECK(*again == from_fd->build_id);
  CHECK(describe_identity(*again) == "SHA-256 " + again->hex());
  // The digest itself: SHA-256 of "abc" (FIPS 180-2 example).
  const uint8_t abc[] = {'a', 'b', 'c'};
  CHECK(BuildId(sha256_of(abc)).hex() ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("module identity: notes with another owner or an absurd size are not build IDs") {
  SyntheticElf elf;
  elf.note = gnu_note(NT_GNU_BUILD_ID, twenty_bytes(), "XYZ");
  elf.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, elf.note.size())};
  auto identity = read_module_identity(elf.bytes());
  REQUIRE(identity.ok());
  CHECK(identity->build_id.kind() == BuildId::Kind::ContentSha256);

  SyntheticElf big;
  big.note = gnu_note(NT_GNU_BUILD_ID, std::vector<uint8_t>(100, 7));
  big.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, big.note.size())};
  auto big_identity = read_module_identity(big.bytes());
  REQUIRE(big_identity.ok());
  CHECK(big_identity->build_id.kind() == BuildId::Kind::ContentSha256);
}

TEST_CASE("module identity: bad input is an error, never a crash") {
  std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  auto not_elf = read_module_identity(text);
  REQUIRE(!not_elf.ok());
  CHECK(not_elf.error().message == "not an ELF file");

  SyntheticElf no_load;
  no_load.phdrs = {note_phdr(0x200, 0)};
  auto none = read_module_identity(no_load.bytes());
  REQUIRE(!none.ok());
  CHECK(none.error().message == "no PT_LOAD segments");

  SyntheticElf bad_load;
  Elf64_Phdr p = load(0x0, 0x0, 0x300, PF_R);
  p.p_memsz = 0x100;  // smaller than the file size
  bad_load.phdrs = {p};
  auto malformed = read_module_identity(bad_load.bytes());
  REQUIRE(!malformed.ok());
  CHECK(malformed.error().message == "PT_LOAD segment 0 is malformed");

  // Truncated at every length: an error or a result, never a crash.
  SyntheticElf elf;
  elf.note = gnu_note(NT_GNU_BUILD_ID, twenty_bytes());
  elf.phdrs = {load(0x0, 0x0, 0x300, PF_R | PF_X), note_phdr(0x200, elf.note.size())};
  std::vector<uint8_t> full = elf.bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    auto r = read_module_identity(std::span<const uint8_t>(full.data(), n));
    if (n < sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) * 2) CHECK(!r.ok());
    // A note cut short must not yield a partial build ID.
    if (r.ok() && r->build_id.kind() == BuildId::Kind::Gnu) CHECK(r->build_id.bytes().size() == 20);
    if (r.ok()) CHECK(!r->build_id.empty());
  }
}

TEST_CASE("module identity: our own executable through /proc/self/map_files") {
  std::ifstream maps_file("/proc/self/maps");
  std::stringstream text;
  text << maps_file.rdbuf();
  auto maps = parse_proc_maps(text.str());
  REQUIRE(maps.ok());
  std::string self(256, '\0');
  ssize_t n = readlink("/proc/self/exe", self.data(), self.size());
  REQUIRE(n > 0);
  self.resize(static_cast<size_t>(n));
  const MapEntry* exec_map = nullptr;
  for (const MapEntry& m : *maps)
    if (m.path == self && m.executable()) exec_map = &m;
  REQUIRE(exec_map);
  // map_files needs CAP_SYS_ADMIN; the /proc/PID/root fallback works without.
  auto via_proc = load_module_identity(static_cast<uint32_t>(getpid()), *exec_map);
  REQUIRE(via_proc.ok());
  int fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto direct = read_module_identity_fd(fd);
  ::close(fd);
  REQUIRE(direct.ok());
  CHECK(via_proc->build_id == direct->build_id);
  CHECK(via_proc->segments == direct->segments);
  CHECK(!direct->build_id.empty());  // gcc/ld on Debian always write one

  // A mapping whose inode does not match is refused on the path fallback.
  MapEntry wrong = *exec_map;
  wrong.start = 1;  // no such map_files entry
  wrong.end = 2;
  wrong.inode += 1;
  auto refused = load_module_identity(static_cast<uint32_t>(getpid()), wrong);
  REQUIRE(!refused.ok());
  CHECK(refused.error().message.find("is not the file that was mapped") != std::string::npos);
}

TEST_CASE("module identity: a process gone before its files were opened says so") {
  MapEntry mapping;
  mapping.start = 0x400000;
  mapping.end = 0x401000;
  mapping.perms = "r-xp";
  mapping.path = "/usr/bin/true";
  mapping.inode = 1;
  // A child that has exited and been reaped: no /proc/PID at all.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  auto gone = load_module_identity(static_cast<uint32_t>(child), mapping);
  REQUIRE(!gone.ok());
  CHECK(gone.error().message == kProcessExitedError);

  // A zombie (exited, not yet reaped): its root link is gone too.
  pid_t zombie = ::fork();
  REQUIRE(zombie >= 0);
  if (zombie == 0) ::_exit(0);
  for (int i = 0; i < 200; ++i) {  // until the kernel shows it as a zombie
    std::ifstream stat("/proc/" + std::to_string(zombie) + "/stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    if (state == "Z") break;
    ::usleep(5000);
  }
  auto zombie_identity = load_module_identity(static_cast<uint32_t>(zombie), mapping);
  REQUIRE(::waitpid(zombie, &status, 0) == zombie);
  REQUIRE(!zombie_identity.ok());
  CHECK(zombie_identity.error().message == kProcessExitedError);
}
