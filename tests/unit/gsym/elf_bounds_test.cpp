// Decompression bounds (security finding 5): compressed sections whose
// headers claim more than check_section_sizes allows are refused before
// anything is allocated, on every path (section_bytes, libdw, the dwz alt
// file); the module still converts from its symbol table (finding 14); and
// legitimate compressed debug info converts exactly as uncompressed.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/test_files.h"
#include "gsym/base/file_io.h"
#include "gsym/convert/convert.h"
#include "gsym/convert/elf_handle.h"
#include "gsym/convert/elf_image.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kGiB = uint64_t(1) << 30;

using test_files::read_file;
using test_files::write_file;
struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("elf_bounds_test") {}
};

bool have_tools(const char* tools) {
  return std::system(("for t in " + std::string(tools) + "; do command -v $t >/dev/null || exit 1; done").c_str()) == 0;
}

void put(std::vector<uint8_t>& b, size_t off, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> zlib_bytes(const std::vector<uint8_t>& payload) {
  uLongf size = compressBound(payload.size());
  std::vector<uint8_t> out(size);
  REQUIRE(compress2(out.data(), &size, payload.data(), payload.size(), 9) == Z_OK);
  out.resize(size);
  return out;
}

// zlib stream of `n` zero bytes, made without holding them.
std::vector<uint8_t> zlib_zeros(uint64_t n) {
  z_stream z{};
  REQUIRE(deflateInit(&z, 9) == Z_OK);
  std::vector<uint8_t> zeros(kMiB), out, chunk(1 << 16);
  for (uint64_t left = n;;) {
    const uInt take = static_cast<uInt>(std::min<uint64_t>(left, zeros.size()));
    left -= take;
    z.next_in = zeros.data();
    z.avail_in = take;
    const int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    int rc;
    do {
      z.next_out = chunk.data();
      z.avail_out = static_cast<uInt>(chunk.size());
      rc = deflate(&z, flush);
      out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - z.avail_out));
    } while (z.avail_out == 0);
    if (flush == Z_FINISH) {
      REQUIRE(rc == Z_STREAM_END);
      break;
    }
  }
  deflateEnd(&z);
  return out;
}

// SHF_COMPRESSED contents: an Elf64_Chdr claiming `claimed` bytes + zlib.
std::vector<uint8_t> chdr_section(const std::vector<uint8_t>& zlib, uint64_t claimed) {
  std::vector<uint8_t> out(24, 0);
  put(out, 0, ELFCOMPRESS_ZLIB, 4);
  put(out, 8, claimed, 8);
  put(out, 16, 1, 8);
  out.insert(out.end(), zlib.begin(), zlib.end());
  return out;
}

// .zdebug_* contents: "ZLIB", the claimed size big-endian, zlib.
std::vector<uint8_t> gnu_section(const std::vector<uint8_t>& zlib, uint64_t claimed) {
  std::vector<uint8_t> out = {'Z', 'L', 'I', 'B'};
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<uint8_t>(claimed >> (8 * i)));
  out.insert(out.end(), zlib.begin(), zlib.end());
  return out;
}

// Bytes that compress like debug info does (a few times, not a thousand).
std::vector<uint8_t> payload(size_t n) {
  std::vector<uint8_t> p(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    p[i] = "abcdefgh_ij:\0"[(x >> 16) % 13];
  }
  return p;
}

struct Section {
  std::string name;
  uint64_t flags = 0;
  std::vector<uint8_t> data;
};

// A minimal ELF64 little-endian ET_DYN: .text with one 16-byte function,
// `bomb_func` at 0x1000 in .symtab, then `extra`, then .shstrtab (its own
// contents replaced by a SHF_COMPRESSED header claiming `names_claim` when
// that is non-zero).
std::vector<uint8_t> make_elf(const std::vector<Section>& extra, uint64_t names_claim = 0) {
  struct Sh {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t align, entsize;
  };
  std::vector<uint8_t> out(64, 0), names(1, 0);
  std::vector<Sh> headers(1, Sh{});
  auto add = [&](const std::string& name, uint32_t type, uint64_t flags, const std::vector<uint8_t>& data,
                 uint64_t addr = 0, uint32_t link = 0, uint32_t info = 0, uint64_t entsize = 0) {
    while (out.size() % 8) out.push_back(0);
    headers.push_back({static_cast<uint32_t>(names.size()), type, flags, addr, out.size(), data.size(), link,
                       info, (flags & SHF_COMPRESSED) ? 8u : 1u, entsize});
    names.insert(names.end(), name.begin(), name.end());
    names.push_back(0);
    out.insert(out.end(), data.begin(), data.end());
  };
  add(".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, std::vector<uint8_t>(16, 0xc3), 0x1000);
  std::vector<uint8_t> symtab(48, 0);
  put(symtab, 24, 1, 4);                                       // st_name
  symtab[24 + 4] = GELF_ST_INFO(STB_GLOBAL, STT_FUNC);         // st_info
  put(symtab, 24 + 6, 1, 2);                                   // st_shndx: .text
  put(symtab, 24 + 8, 0x1000, 8);                              // st_value
  put(symtab, 24 + 16, 16, 8);                                 // st_size
  add(".symtab", SHT_SYMTAB, 0, symtab, 0, 3, 1, 24);
  const char strtab[] = "\0bomb_func";
  add(".strtab", SHT_STRTAB, 0, std::vector<uint8_t>(strtab, strtab + sizeof strtab));
  for (const Section& s : extra) add(s.name, SHT_PROGBITS, s.flags, s.data);
  const std::string shstrtab = ".shstrtab";
  const uint32_t shstrtab_name = static_cast<uint32_t>(names.size());
  names.insert(names.end(), shstrtab.begin(), shstrtab.end());
  names.push_back(0);
  while (out.size() % 8) out.push_back(0);
  const std::vector<uint8_t> name_bytes = names_claim ? chdr_section(zlib_bytes(names), names_claim) : names;
  headers.push_back({shstrtab_name, SHT_STRTAB, names_claim ? uint64_t(SHF_COMPRESSED) : 0, 0, out.size(),
                     name_bytes.size(), 0, 0, 1, 0});
  out.insert(out.end(), name_bytes.begin(), name_bytes.end());
  while (out.size() % 8) out.push_back(0);
  const uint64_t shoff = out.size();
  for (const Sh& h : headers) {
    const size_t o = out.size();
    out.resize(o + 64, 0);
    put(out, o, h.name, 4);
    put(out, o + 4, h.type, 4);
    put(out, o + 8, h.flags, 8);
    put(out, o + 16, h.addr, 8);
    put(out, o + 24, h.offset, 8);
    put(out, o + 32, h.size, 8);
    put(out, o + 40, h.link, 4);
    put(out, o + 44, h.info, 4);
    put(out, o + 48, h.align, 8);
    put(out, o + 56, h.entsize, 8);
  }
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2LSB, EV_CURRENT};
  std::memcpy(out.data(), ident, sizeof ident);
  put(out, 16, ET_DYN, 2);
  put(out, 18, EM_X86_64, 2);
  put(out, 20, EV_CURRENT, 4);
  put(out, 40, shoff, 8);
  put(out, 52, 64, 2);
  put(out, 58, 64, 2);
  put(out, 60, headers.size(), 2);
  put(out, 62, headers.size() - 1, 2);
  return out;
}

std::string error_of(const Status& s) { return s.ok() ? std::string() : s.error().message; }

// Header of section `name` (libelf, read-only).
GElf_Shdr section_header(const std::string& path, const std::string& name) {
  REQUIRE(gsym::libelf_ready());
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  size_t shstrndx = 0;
  GElf_Shdr found{};
  if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0)
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      const char* n = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, shstrndx, shdr.sh_name) : nullptr;
      if (n && name == n) found = shdr;
    }
  if (elf) elf_end(elf);
  close(fd);
  REQUIRE(found.sh_offset != 0);
  return found;
}

// What a forked child measured: its peak RSS growth and time.
struct ChildRun {
  bool ok = false;
  uint64_t bytes = 0;  // what the child produced (a size, a count)
  long rss_growth_kb = 0;
  double ms = 0;
  char message[512] = {};
};

// Runs `body` in a forked child, so the peak RSS it reports (ru_maxrss starts
// at the child's RSS at fork) is the body's alone.
template <class Body>
ChildRun in_child(Body body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    ChildRun run;
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    run.ok = body(run.bytes, message);
    run.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    getrusage(RUSAGE_SELF, &after);
    run.rss_growth_kb = after.ru_maxrss - before.ru_maxrss;
    std::strncpy(run.message, message.c_str(), sizeof run.message - 1);
    ssize_t n = write(fds[1], &run, sizeof run);
    _exit(n == static_cast<ssize_t>(sizeof run) ? 0 : 1);
  }
  close(fds[1]);
  ChildRun run;
  const ssize_t n = read(fds[0], &run, sizeof run);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(n == static_cast<ssize_t>(sizeof run));
  REQUIRE(WIFEXITED(status));
  return run;
}

}  // namespace

TEST_CASE("elf bounds: each compressed section's claim is bounded by its size, naming the section") {
  TempDir dir;
  const std::vector<uint8_t> text = payload(8192);
  const std::vector<uint8_t> z = zlib_bytes(text);
  const std::string path = dir.file("elf");

  SUBCASE("an honest claim decompresses") {
    write_file(path, make_elf({{".debug_str", SHF_COMPRESSED, chdr_section(z, text.size())}}));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE_MESSAGE(image.ok(), image.error().message);
    CHECK(image->check_section_sizes().ok());
    Expected<std::span<const uint8_t>> bytes = image->section_bytes(".debug_str");
    REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
    CHECK(std::vector<uint8_t>(bytes->begin(), bytes->end()) == text);
  }
  // Inflated whole (libdeflate) into exactly the claimed size: a stream
  // longer or shorter than its claim, or damaged, is an error naming the
  // section, never a section of the wrong size.
  SUBCASE("a claim the stream does not match, or a damaged stream, is an error") {
    struct Case {
      std::vector<uint8_t> contents;
      const char* error;
    };
    std::vector<uint8_t> damaged = z;
    for (size_t i = 2; i < damaged.size(); i += 7) damaged[i] ^= 0xa5;
    const Case cases[] = {
        {chdr_section(z, text.size() - 1), "zlib: more bytes than its header claims"},
        {chdr_section(z, text.size() + 1), "zlib: fewer bytes than its header claims"},
        {chdr_section(damaged, text.size()), "zlib: invalid compressed data"},
        {chdr_section(std::vector<uint8_t>(z.begin(), z.begin() + z.size() / 2), text.size()), "zlib: "},
    };
    for (const Case& c : cases) {
      write_file(path, make_elf({{".debug_str", SHF_COMPRESSED, c.contents}}));
      Expected<ElfImage> image = ElfImage::open(path);
      REQUIRE_MESSAGE(image.ok(), image.error().message);
      const std::string e = error_of(image->prepare_debug_sections());
      CHECK(e.find("cannot decompress section .debug_str: ") != std::string::npos);
      CHECK(e.find(c.error) != std::string::npos);
    }
  }
  // A damaged stream in a section no conversion reads is never inflated:
  // preparing succeeds, the read sections are there, the others empty.
  SUBCASE("sections a conversion never reads are set aside, not inflated") {
    std::vector<uint8_t> damaged = z;
    for (size_t i = 2; i < damaged.size(); i += 7) damaged[i] ^= 0xa5;
    std::vector<Section> sections = {{".debug_str", SHF_COMPRESSED, chdr_section(z, text.size())},
                                     {".debug_loclists", SHF_COMPRESSED, chdr_section(damaged, text.size())},
                                     {".zdebug_loc", 0, gnu_section(damaged, text.size())},
                                     {".debug_aranges", SHF_COMPRESSED, chdr_section(damaged, text.size())}};
    std::vector<Section> with_read_damage = sections;
    with_read_damage.push_back({".debug_line_str", SHF_COMPRESSED, chdr_section(damaged, text.size())});
    write_file(path, make_elf(with_read_damage));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE_MESSAGE(image.ok(), image.error().message);
    // .debug_line_str is read: its damage is still an error.
    CHECK(error_of(image->prepare_debug_sections()).find("cannot decompress section .debug_line_str") !=
          std::string::npos);

    write_file(path, make_elf(sections));
    image = ElfImage::open(path);
    REQUIRE_MESSAGE(image.ok(), image.error().message);
    REQUIRE_MESSAGE(image->prepare_debug_sections().ok(), error_of(image->prepare_debug_sections()));
    Expected<std::span<const uint8_t>> str = image->section_bytes(".debug_str");
    REQUIRE_MESSAGE(str.ok(), str.error().message);
    CHECK(std::vector<uint8_t>(str->begin(), str->end()) == text);
    for (const char* unread : {".debug_loclists", ".debug_loc", ".debug_aranges"}) {
      Expected<std::span<const uint8_t>> bytes = image->section_bytes(unread);
      REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
      CHECK_MESSAGE(bytes->empty(), unread);
    }
  }
  SUBCASE("a 2 GiB claim is refused; the symbol table stays usable") {
    write_file(path, make_elf({{".debug_str", SHF_COMPRESSED, chdr_section(z, 2 * kGiB)}}));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE_MESSAGE(image.ok(), image.error().message);
    const std::string e = error_of(image->check_section_sizes());
    CHECK(e.find("compressed section .debug_str claims 2147483648 bytes") != std::string::npos);
    CHECK(e.find(std::to_string(z.size() + 24)) != std::string::npos);
    CHECK(e.find("limit of 16777216") != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(error_of(check_section_sizes(image->elf(), read_file(path).size())) == e);
    Expected<std::span<const uint8_t>> bytes = image->section_bytes(".debug_str");
    REQUIRE_FALSE(bytes.ok());
    CHECK(bytes.error().message.find("claims 2147483648") != std::string::npos);
    CHECK_FALSE(image->prepare_debug_sections().ok());
    const std::vector<ElfSymbol> symbols = image->function_symbols();
    REQUIRE(symbols.size() == 1);
    CHECK(symbols[0].name == "bomb_func");
  }
  SUBCASE("the limits are parameters") {
    write_file(path, make_elf({{".debug_str", SHF_COMPRESSED, chdr_section(z, text.size())}}));
    SectionSizeLimits tight;
    tight.min_bound = 1024;
    tight.max_ratio = 1;
    Expected<ElfImage> image = ElfImage::open(path, tight);
    REQUIRE(image.ok());
    CHECK(error_of(image->check_section_sizes()).find("(1x its size, at least 1024)") != std::string::npos);
    SectionSizeLimits small_total;
    small_total.max_total = 4096;
    Expected<ElfImage> image2 = ElfImage::open(path, small_total);
    REQUIRE(image2.ok());
    CHECK(error_of(image2->check_section_sizes()).find("8192 bytes decompressed in total, more than the limit of 4096") !=
          std::string::npos);
  }
  SUBCASE("claims within their sections' bounds still add up to the file's bound") {
    // Four 10 MiB claims (each under the 16 MiB floor) in a file of a few KB:
    // the file may claim max(16 MiB, 256 x its size).
    std::vector<Section> sections;
    for (const char* name : {".debug_info", ".debug_abbrev", ".debug_line", ".debug_str"})
      sections.push_back({name, SHF_COMPRESSED, chdr_section(z, 10 * kMiB)});
    write_file(path, make_elf(sections));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE(image.ok());
    const std::string e = error_of(image->check_section_sizes());
    CHECK(e.find("compressed sections claim 41943040 bytes decompressed in total, more than the limit of 16777216 for a ") !=
          std::string::npos);
  }
  SUBCASE(".zdebug_* sections: the \"ZLIB\" header's size is bounded too") {
    write_file(path, make_elf({{".zdebug_info", 0, gnu_section(z, 2 * kGiB)}}));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE(image.ok());
    CHECK(error_of(image->check_section_sizes()).find("compressed section .zdebug_info claims 2147483648") !=
          std::string::npos);
    write_file(path, make_elf({{".zdebug_info", 0, gnu_section(z, text.size())}}));
    Expected<ElfImage> honest = ElfImage::open(path);
    REQUIRE(honest.ok());
    Expected<std::span<const uint8_t>> bytes = honest->section_bytes(".debug_info");
    REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
    CHECK(std::vector<uint8_t>(bytes->begin(), bytes->end()) == text);
  }
  SUBCASE("output shorter or longer than claimed is an error, not a short section") {
    for (uint64_t claim : {text.size() + 100, text.size() - 100}) {
      CAPTURE(claim);
      write_file(path, make_elf({{".debug_str", SHF_COMPRESSED, chdr_section(z, claim)},
                                 {".zdebug_line", 0, gnu_section(z, claim)}}));
      Expected<ElfImage> image = ElfImage::open(path);
      REQUIRE(image.ok());
      CHECK(image->check_section_sizes().ok());
      Expected<std::span<const uint8_t>> chdr = image->section_bytes(".debug_str");
      REQUIRE_FALSE(chdr.ok());
      CHECK(chdr.error().message.find("section .debug_str") != std::string::npos);
      Expected<std::span<const uint8_t>> gnu = image->section_bytes(".debug_line");
      REQUIRE_FALSE(gnu.ok());
      CHECK(gnu.error().message.find("section .debug_line") != std::string::npos);
    }
  }
  SUBCASE("a compressed section name table that claims too much: nothing of the file is read") {
    write_file(path, make_elf({}, 2 * kGiB));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE_FALSE(image.ok());
    CHECK(image.error().message.find("(the section name table) claims 2147483648") != std::string::npos);
  }
  SUBCASE("a .zdebug section that decompresses to another \"ZLIB\" stream is refused") {
    // libdw would inflate it again at each dwarf_begin_elf on the same Elf.
    const std::vector<uint8_t> inner = gnu_section(z, text.size());
    write_file(path, make_elf({{".zdebug_str", 0, gnu_section(zlib_bytes(inner), inner.size())}}));
    Expected<ElfImage> image = ElfImage::open(path);
    REQUIRE(image.ok());
    CHECK(error_of(image->prepare_debug_sections()).find(".zdebug_str decompresses to compressed data again") !=
          std::string::npos);
  }
}

TEST_CASE("elf bounds: a bomb is refused in milliseconds, never allocated, and converts from symbols") {
  TempDir dir;
  // A genuine bomb: 128 MiB of zeros in ~130 KB (1029:1), claimed honestly.
  const uint64_t zeros = 128 * kMiB;
  const std::vector<uint8_t> zz = zlib_zeros(zeros);
  const std::vector<uint8_t> abbrev = zlib_bytes(payload(64));
  const std::string bomb = dir.file("bomb");
  write_file(bomb, make_elf({{".debug_info", SHF_COMPRESSED, chdr_section(zz, zeros)},
                             {".debug_abbrev", SHF_COMPRESSED, chdr_section(abbrev, 64)}}));
  // A small honest section whose header was patched to claim 2 GiB.
  const std::vector<uint8_t> text = payload(64 * 1024);
  const std::string claim = dir.file("claim");
  write_file(claim, make_elf({{".debug_info", SHF_COMPRESSED, chdr_section(zlib_bytes(text), 2 * kGiB)},
                              {".debug_abbrev", SHF_COMPRESSED, chdr_section(abbrev, 64)}}));

  for (const std::string& path : {bomb, claim}) {
    CAPTURE(path);
    ChildRun run = in_child([&](uint64_t& functions, std::string& message) {
      ConvertOptions options;
      options.threads = 2;
      options.search_debug_file = false;
      int warnings = 0;
      options.warning = [&](const std::string&) { ++warnings; };
      ConvertStats stats;
      Expected<std::vector<uint8_t>> bytes = convert_elf(path, options, &stats);
      if (!bytes) {
        message = bytes.error().message;
        return false;
      }
      functions = stats.symbol_functions;
      message = stats.dwarf_error;
      return warnings == 1 && stats.dwarf_functions == 0 && Reader::parse(*bytes).ok();
    });
    CHECK_MESSAGE(run.ok, run.message);
    CHECK(run.bytes == 1);
    CHECK(std::string(run.message).find("compressed section .debug_info claims") != std::string::npos);
    CHECK(run.rss_growth_kb < 32 * 1024);
    CHECK(run.ms < 2000);
  }

  // Control: with the bounds lifted the same bomb really is allocated, so the
  // measurement above would have seen it.
  ChildRun control = in_child([&](uint64_t& size, std::string& message) {
    SectionSizeLimits none;
    none.max_ratio = 1 << 20;
    none.max_total = UINT64_MAX;
    Expected<ElfImage> image = ElfImage::open(bomb, none);
    if (!image) {
      message = image.error().message;
      return false;
    }
    Expected<std::span<const uint8_t>> bytes = image->section_bytes(".debug_info");
    if (!bytes) {
      message = bytes.error().message;
      return false;
    }
    size = bytes->size();
    return true;
  });
  CHECK_MESSAGE(control.ok, control.message);
  CHECK(control.bytes == zeros);
  CHECK(control.rss_growth_kb > 100 * 1024);
}

// Runs `compile` in `dir` (it writes DIR/plain), then makes plain's zlib and
// zlib-gnu copies (DIR/zlib, DIR/zlib-gnu) with objcopy.
static void build_with_compressed_copies(const TempDir& dir, const std::string& compile) {
  const std::string command = "cd '" + dir.path + "' && " + compile +
                              " && objcopy --compress-debug-sections=zlib plain zlib"
                              " && objcopy --compress-debug-sections=zlib-gnu plain zlib-gnu";
  REQUIRE(std::system(command.c_str()) == 0);
}

TEST_CASE("elf bounds: compressed debug info (zlib, zlib-gnu) converts exactly as uncompressed") {
  if (!have_tools("gcc objcopy")) {
    MESSAGE("skipped: no gcc or objcopy");
    return;
  }
  TempDir dir;
  std::ofstream(dir.file("a.c")) << "int helper(int x);\n"
                                    "int main(int argc, char** argv) { (void)argv; return helper(argc); }\n";
  std::ofstream(dir.file("b.c")) << "static inline int sq(int x) { return x * x; }\n"
                                    "__attribute__((noinline)) int helper(int x) { return sq(x) + 1; }\n";
  build_with_compressed_copies(dir, "gcc -O2 -g -o plain a.c b.c && gcc -O2 -g -gz=zlib -o gz a.c b.c");
  for (unsigned threads : {1u, 3u}) {
    CAPTURE(threads);
    ConvertOptions options;
    options.threads = threads;
    options.search_debug_file = false;
    ConvertStats plain_stats;
    Expected<std::vector<uint8_t>> plain = convert_elf(dir.file("plain"), options, &plain_stats);
    REQUIRE_MESSAGE(plain.ok(), plain.error().message);
    CHECK(plain_stats.dwarf_functions >= 2);
    for (const char* name : {"zlib", "zlib-gnu", "gz"}) {
      CAPTURE(name);
      ConvertStats stats;
      Expected<std::vector<uint8_t>> bytes = convert_elf(dir.file(name), options, &stats);
      REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
      CHECK(stats.dwarf_error.empty());
      // gcc -gz links another file, so another build ID: same records.
      if (std::string(name) != "gz") CHECK(*bytes == *plain);
      CHECK(stats.dwarf_functions == plain_stats.dwarf_functions);
      CHECK(stats.line_rows == plain_stats.line_rows);
      CHECK(stats.inline_nodes == plain_stats.inline_nodes);
      CHECK(bytes->size() == plain->size());
    }
  }
}

TEST_CASE("elf bounds: decompression_growth is what inflating the debug sections adds") {
  if (!have_tools("gcc objcopy")) {
    MESSAGE("skipped: no gcc or objcopy");
    return;
  }
  TempDir dir;
  std::ofstream(dir.file("a.c")) << "static inline int sq(int x) { return x * x; }\n"
                                    "int main(int argc, char** argv) { (void)argv; return sq(argc) + 1; }\n";
  build_with_compressed_copies(dir, "gcc -O2 -g -o plain a.c");
  // The debug sections' bytes as the file holds them (compressed or not).
  auto debug_bytes = [](const std::string& path) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd.valid());
    REQUIRE(libelf_ready());
    Elf* elf = elf_begin(fd.get(), ELF_C_READ, nullptr);
    REQUIRE(elf != nullptr);
    size_t names = 0;
    REQUIRE(elf_getshdrstrndx(elf, &names) == 0);
    uint64_t total = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      REQUIRE(gelf_getshdr(scn, &shdr) != nullptr);
      const char* name = elf_strptr(elf, names, shdr.sh_name);
      if (name && (std::strncmp(name, ".debug", 6) == 0 || std::strncmp(name, ".zdebug", 7) == 0)) total += shdr.sh_size;
    }
    elf_end(elf);
    return total;
  };
  Expected<ElfImage> plain = ElfImage::open(dir.file("plain"));
  REQUIRE(plain.ok());
  CHECK(plain->decompression_growth() == 0);
  for (const char* name : {"zlib", "zlib-gnu"}) {
    CAPTURE(name);
    Expected<ElfImage> compressed = ElfImage::open(dir.file(name));
    REQUIRE(compressed.ok());
    CHECK(compressed->decompression_growth() > 0);
    CHECK(compressed->decompression_growth() == debug_bytes(dir.file("plain")) - debug_bytes(dir.file(name)));
  }
}

TEST_CASE("elf bounds: the dwz alt file is checked like the input") {
  if (!have_tools("gcc objcopy dwz")) {
    MESSAGE("skipped: no gcc, objcopy or dwz");
    return;
  }
  TempDir dir;
  // A struct both programs share, with names enough that dwz moves a
  // .debug_str worth compressing into the alt file.
  std::string shared = "struct shared {\n";
  for (int k = 1; k <= 40; ++k) shared += "  long shared_member_with_a_long_name_" + std::to_string(k) + ";\n";
  shared += "};\n";
  for (int i = 1; i <= 2; ++i) {
    const std::string n = std::to_string(i);
    std::ofstream(dir.file("c" + n + ".c"))
        << shared << "static inline long inl(struct shared* s) { return s->shared_member_with_a_long_name_1 * "
        << i + 1 << "; }\n__attribute__((noinline)) long f" << n
        << "(struct shared* s) { return inl(s) + s->shared_member_with_a_long_name_2; }\n"
           "int main(void) { struct shared s = {1, 2}; return (int)f"
        << n << "(&s); }\n";
  }
  const std::string d = "'" + dir.path + "'/";
  REQUIRE(std::system(("cd " + d + " && gcc -O2 -g -gdwarf-4 -o p1 c1.c && gcc -O2 -g -gdwarf-4 -o p2 c2.c && "
                       "dwz -m alt.debug -M " + d + "alt.debug p1 p2 && "
                       "objcopy --compress-debug-sections=zlib alt.debug alt.z && mv alt.z alt.debug")
                          .c_str()) == 0);
  ConvertOptions options;
  options.threads = 2;
  options.search_debug_file = false;
  ConvertStats stats;
  Expected<std::vector<uint8_t>> good = convert_elf(dir.file("p1"), options, &stats);
  REQUIRE_MESSAGE(good.ok(), good.error().message);
  CHECK(stats.dwarf_error.empty());
  CHECK(stats.dwarf_functions >= 1);

  // Patch the alt file's compressed .debug_str to claim 2 GiB.
  const GElf_Shdr str = section_header(dir.file("alt.debug"), ".debug_str");
  REQUIRE((str.sh_flags & SHF_COMPRESSED) != 0);
  std::vector<uint8_t> alt = read_file(dir.file("alt.debug"));
  put(alt, str.sh_offset + 8, 2 * kGiB, 8);
  write_file(dir.file("alt.debug"), alt);
  Expected<std::vector<uint8_t>> refused = convert_elf(dir.file("p1"), options, &stats);
  REQUIRE_MESSAGE(refused.ok(), refused.error().message);
  CHECK(stats.dwarf_error.find("alt file") != std::string::npos);
  CHECK(stats.dwarf_error.find("compressed section .debug_str claims 2147483648") != std::string::npos);
  CHECK(stats.dwarf_functions == 0);
  CHECK(stats.symbol_functions >= 1);
}
