#include <doctest/doctest.h>
#include <elf.h>

#include <algorithm>
#include <cstring>

#include "gsym/convert/elf_image.h"
#include "gsym/base/hex.h"
#include "tests/unit/test_files.h"
#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"

using gsymprof::BuildId;

TEST_CASE("BuildId hex round trip") {
  auto id = BuildId::from_hex("00ff10Ab");
  REQUIRE(id.has_value());
  CHECK(id->bytes().size() == 4);
  CHECK(id->hex() == "00ff10ab");
  CHECK_FALSE(BuildId::from_hex("abc").has_value());
  CHECK_FALSE(BuildId::from_hex("zz").has_value());
  CHECK(BuildId::from_hex("")->empty());
}

// An x86-64 ET_DYN whose section .note.gnu.build-id holds one build ID and
// whose PT_NOTE segment, elsewhere in the file, holds another.
namespace {

std::vector<uint8_t> build_id_note(uint8_t fill, size_t size = 20) {
  std::vector<uint8_t> note(12 + 4 + size, 0);
  const uint32_t header[3] = {4, static_cast<uint32_t>(size), NT_GNU_BUILD_ID};
  std::memcpy(note.data(), header, sizeof header);
  std::memcpy(note.data() + 12, "GNU", 4);
  std::fill(note.begin() + 16, note.end(), fill);
  return note;
}

std::vector<uint8_t> elf_with_two_build_ids(bool with_sections) {
  constexpr size_t kSegmentNote = 0x200, kSectionNote = 0x280, kNames = 0x300, kShdrs = 0x340;
  std::vector<uint8_t> out(kShdrs + 3 * sizeof(Elf64_Shdr), 0);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof eh;
  eh.e_ehsize = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  if (with_sections) {
    eh.e_shoff = kShdrs;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 3;
    eh.e_shstrndx = 2;
  }
  std::memcpy(out.data(), &eh, sizeof eh);
  const std::vector<uint8_t> segment_note = build_id_note(0xbb), section_note = build_id_note(0xaa);
  Elf64_Phdr phdrs[2] = {};
  phdrs[0].p_type = PT_LOAD;
  phdrs[0].p_flags = PF_R | PF_X;
  phdrs[0].p_filesz = phdrs[0].p_memsz = out.size();
  phdrs[0].p_align = 0x1000;
  phdrs[1].p_type = PT_NOTE;
  phdrs[1].p_offset = phdrs[1].p_vaddr = kSegmentNote;
  phdrs[1].p_filesz = phdrs[1].p_memsz = segment_note.size();
  phdrs[1].p_align = 4;
  std::memcpy(out.data() + sizeof eh, phdrs, sizeof phdrs);
  std::memcpy(out.data() + kSegmentNote, segment_note.data(), segment_note.size());
  if (with_sections) {
    std::memcpy(out.data() + kSectionNote, section_note.data(), section_note.size());
    const char names[] = "\0.note.gnu.build-id\0.shstrtab";
    std::memcpy(out.data() + kNames, names, sizeof names);
    Elf64_Shdr shdrs[3] = {};
    shdrs[1].sh_name = 1;
    shdrs[1].sh_type = SHT_NOTE;
    shdrs[1].sh_flags = SHF_ALLOC;
    shdrs[1].sh_offset = kSectionNote;
    shdrs[1].sh_size = section_note.size();
    shdrs[1].sh_addralign = 4;
    shdrs[2].sh_name = 20;
    shdrs[2].sh_type = SHT_STRTAB;
    shdrs[2].sh_offset = kNames;
    shdrs[2].sh_size = sizeof names;
    shdrs[2].sh_addralign = 1;
    std::memcpy(out.data() + kShdrs, shdrs, sizeof shdrs);
  }
  return out;
}

}  // namespace

TEST_CASE("build ID: every reader takes the .note.gnu.build-id section first, then PT_NOTE") {
  test_files::TempDir dir;
  for (bool with_sections : {true, false}) {
    CAPTURE(with_sections);
    const std::vector<uint8_t> bytes = elf_with_two_build_ids(with_sections);
    const std::string want(40, with_sections ? 'a' : 'b');
    const std::string path = dir / (with_sections ? "sections" : "segments");
    test_files::write_file(path, bytes);

    auto identity = gsymprof::read_module_identity(bytes);
    REQUIRE(identity.ok());
    CHECK(identity->build_id.hex() == want);
    auto from_file = gsymprof::read_elf_build_id(path);
    REQUIRE(from_file.ok());
    CHECK(from_file->hex() == want);
    auto image = gsym::ElfImage::open(path);
    REQUIRE(image.ok());
    CHECK(gsym::to_hex(image->build_id()) == want);
  }
}

TEST_CASE("build ID: a missing file is exactly \"file missing\"") {
  auto missing = gsymprof::read_elf_build_id("/nonexistent/gsymprof/file");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "file missing");
}
