// The PLT table reader (gsym/convert/plt_table.h, ElfImage::plt_entries) and the
// converter's profiler names: hand-made stubs of every layout, then real
// programs built here, checked against objdump's `sym@plt` labels.
#include <doctest/doctest.h>
#include <gelf.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gsym/convert/convert.h"
#include "gsym/convert/elf_image.h"
#include "gsym/convert/plt_table.h"
#include "gsym/reader/reader.h"
#include "tests/unit/test_files.h"

namespace {

using gsym::PltEntry;
using gsym::PltRelocation;
using gsym::PltSection;

void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// jmp *slot(%rip) at `at` (after `prefix`), for a stub at `stub`.
void jmp_slot(std::vector<uint8_t>& b, uint64_t section, size_t at, std::vector<uint8_t> prefix, uint64_t slot) {
  std::copy(prefix.begin(), prefix.end(), b.begin() + static_cast<long>(at));
  const size_t j = at + prefix.size();
  b[j] = 0xff;
  b[j + 1] = 0x25;
  put32(b, j + 2, static_cast<uint32_t>(slot - (section + j + 6)));
}

const std::vector<uint8_t> kEndbr = {0xf3, 0x0f, 0x1e, 0xfa};

bool run(const std::string& command) {
  return std::system(("(" + command + ") > /dev/null 2>&1").c_str()) == 0;
}

// The name a GSYM gives `addr` ("" = no function covers it).
std::string name_at(const gsym::Reader& reader, uint64_t addr) {
  auto found = reader.lookup(addr);
  REQUIRE(found.ok());
  return *found ? std::string(found->value().frames.back().name) : "";
}

std::vector<uint8_t> convert(const std::string& path, bool profiler_names) {
  gsym::ConvertOptions options;
  options.threads = 1;
  options.plt_names = options.code_labels = profiler_names;
  auto bytes = gsym::convert_elf(path, options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().to_string());
  return *bytes;
}

std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// objdump -d's `ADDR <name@plt>:` labels, by address.
std::map<uint64_t, std::string> objdump_plt_labels(const std::string& path) {
  std::map<uint64_t, std::string> labels;
  const std::string text = output_of("objdump -d " + path);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t open = line.find(" <"), close = line.rfind(">:");
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string name = line.substr(open + 2, close - open - 2);
    if (!name.ends_with("@plt")) continue;
    labels[std::stoull(line.substr(0, open), nullptr, 16)] = name;
  }
  return labels;
}

}  // namespace

TEST_CASE("decode_plt: lazy .plt, PLT0 and unknown slots") {
  const uint64_t plt = 0x1020;
  std::vector<uint8_t> bytes(16 * 4, 0x90);
  bytes[0] = 0xff;  // PLT0: push GOT+8 (ff 35): never decoded, named .plt
  bytes[1] = 0x35;
  jmp_slot(bytes, plt, 16, {}, 0x4000);
  jmp_slot(bytes, plt, 32, {}, 0x4008);
  jmp_slot(bytes, plt, 48, {}, 0x4100);  // no relocation for this slot: left out
  const std::vector<PltSection> sections = {{".plt", plt, 16, bytes}};
  const std::vector<PltRelocation> slots = {{0x4000, "strlen", 0, false}, {0x4008, "_Znwm", 0, false}};
  CHECK(gsym::decode_plt(sections, slots, {}) ==
        std::vector<PltEntry>{{0x1020, 16, ".plt"}, {0x1030, 16, "strlen@plt"}, {0x1040, 16, "_Znwm@plt"}});
}

TEST_CASE("decode_plt: IBT .plt (push N) and .plt.sec, .plt.got of 8 and 16 bytes, IRELATIVE") {
  const uint64_t plt = 0x1000, sec = 0x1040, got8 = 0x1080, got16 = 0x10a0;
  std::vector<uint8_t> lazy(16 * 3, 0x90);
  for (size_t i = 1; i < 3; ++i) {  // endbr64; push i-1; bnd jmp PLT0
    std::copy(kEndbr.begin(), kEndbr.end(), lazy.begin() + static_cast<long>(16 * i));
    lazy[16 * i + 4] = 0x68;
    put32(lazy, 16 * i + 5, static_cast<uint32_t>(i - 1));
  }
  std::vector<uint8_t> secbytes(32, 0x90);
  jmp_slot(secbytes, sec, 0, {0xf3, 0x0f, 0x1e, 0xfa, 0xf2}, 0x4000);
  jmp_slot(secbytes, sec, 16, {0xf3, 0x0f, 0x1e, 0xfa, 0xf2}, 0x4008);
  std::vector<uint8_t> got8bytes(8, 0x90), got16bytes(16, 0x90);
  jmp_slot(got8bytes, got8, 0, {}, 0x3ff0);
  jmp_slot(got16bytes, got16, 0, kEndbr, 0x3ff8);
  const std::vector<PltSection> sections = {{".plt", plt, 16, lazy},
                                            {".plt.sec", sec, 16, secbytes},
                                            {".plt.got", got8, 8, got8bytes},
                                            {".plt.got", got16, 16, got16bytes}};
  const std::vector<PltRelocation> slots = {{0x4000, "", 0x9d8a0, true}, {0x4008, "", 0x77, true}};
  const std::vector<PltRelocation> glob_dat = {{0x3ff0, "__cxa_finalize", 0, false},
                                               {0x3ff8, "free", 0, false}};
  auto resolver = [](uint64_t addr) { return addr == 0x9d8a0 ? std::string("strlen") : std::string(); };
  CHECK(gsym::decode_plt(sections, slots, glob_dat, resolver) ==
        std::vector<PltEntry>{{0x1000, 16, ".plt"},
                              {0x1010, 16, "strlen@plt"},
                              {0x1020, 16, "*ABS*+0x77@plt"},
                              {0x1040, 16, "strlen@plt"},
                              {0x1050, 16, "*ABS*+0x77@plt"},
                              {0x1080, 8, "__cxa_finalize@plt"},
                              {0x10a0, 16, "free@plt"}});
}

TEST_CASE("decode_plt: hostile tables read nothing outside the sections") {
  std::vector<uint8_t> bytes(16 + 7, 0x90);  // one whole entry and a tail
  bytes[16] = 0x68;                          // a push in the cut-off tail
  std::vector<uint8_t> push_far(32, 0x90);
  push_far[16] = 0x68;
  put32(push_far, 17, 0xffffffff);  // index past .rela.plt
  std::vector<uint8_t> jump_short = {0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25, 0x00};  // 7 bytes
  const std::vector<PltSection> sections = {{".plt", 0x1000, 16, bytes},
                                            {".plt", 0x2000, 16, push_far},
                                            {".plt.sec", 0x3000, 12, push_far},  // unknown size
                                            {".plt.got", 0x4000, 8, jump_short},
                                            {".plt.sec", UINT64_MAX - 15, 16, push_far}};  // wraps
  const std::vector<PltRelocation> slots = {{0, "x", 0, false}};
  std::vector<PltEntry> entries = gsym::decode_plt(sections, slots, {});
  CHECK(entries == std::vector<PltEntry>{{0x1000, 16, ".plt"}, {0x2000, 16, ".plt"}});
  CHECK(gsym::decode_plt({}, {}, {}).empty());
}

TEST_CASE("ElfImage::plt_entries: gcc-built programs agree with objdump's @plt labels") {
  if (!run("command -v gcc && command -v objdump")) return;  // install-deps.sh installs both
  test_files::TempDir dir("plt_table");
  const std::string src = dir / "p.c", lib_src = dir / "l.c";
  const std::string code =
      "#include <string.h>\n#include <stdlib.h>\n"
      "size_t (*volatile fp)(const char*);\n"
      "int main(int argc, char** argv) { fp = strlen; char* p = malloc(8); free(p);"
      " return (int)strlen(argv[0]) + argc + (int)strtol(argv[0], 0, 10); }\n";
  const std::string lib_code =
      "#include <string.h>\nsize_t (*volatile fp)(const char*);\n"
      "size_t f(const char* s) { fp = strlen; return strlen(s) + strnlen(s, 3); }\n";
  test_files::write_file(src, std::vector<uint8_t>(code.begin(), code.end()));
  test_files::write_file(lib_src, std::vector<uint8_t>(lib_code.begin(), lib_code.end()));
  struct Build {
    std::string name, command;
  };
  const std::vector<Build> builds = {
      {"lazy", "gcc -O1 -fcf-protection=none " + src + " -o " + (dir / "lazy")},
      {"ibt", "gcc -O1 -fcf-protection -Wl,-z,ibtplt " + src + " -o " + (dir / "ibt")},
      {"nopie", "gcc -O1 -no-pie -fno-pie " + src + " -o " + (dir / "nopie")},
      {"lib.so", "gcc -O1 -fPIC -shared " + lib_src + " -o " + (dir / "lib.so")},
      {"libibt.so", "gcc -O1 -fPIC -shared -fcf-protection -Wl,-z,ibtplt " + lib_src + " -o " + (dir / "libibt.so")},
  };
  for (const Build& b : builds) {
    CAPTURE(b.name);
    REQUIRE(run(b.command));
    const std::string path = dir / b.name;
    auto image = gsym::ElfImage::open(path);
    REQUIRE(image.ok());
    std::map<uint64_t, std::string> ours;
    for (const PltEntry& e : image->plt_entries()) {
      CHECK(ours.emplace(e.address, e.name).second);
      CHECK((e.size == 16 || e.size == 8));
    }
    const std::map<uint64_t, std::string> labels = objdump_plt_labels(path);
    REQUIRE(labels.size() >= 2);  // strlen and __cxa_finalize at least
    for (const auto& [address, name] : labels) {
      CAPTURE(name);
      auto it = ours.find(address);
      REQUIRE(it != ours.end());
      CHECK(it->second == name);
    }
    // Ours beyond objdump's: PLT0 and, with IBT, the lazy stubs in .plt
    // (named after the same symbols as the .plt.sec stubs).
    std::multiset<std::string> label_names;
    for (const auto& [address, name] : labels) label_names.insert(name);
    size_t plt0 = 0, lazy = 0;
    for (const auto& [address, name] : ours) {
      if (labels.count(address)) continue;
      if (name == ".plt") {
        ++plt0;
      } else {
        CAPTURE(name);
        CHECK(label_names.count(name) == 1);
        ++lazy;
      }
    }
    CHECK(plt0 == 1);
    if (b.name.find("ibt") == std::string::npos) CHECK(lazy == 0);
    else CHECK(lazy >= 1);
  }
}

TEST_CASE("ElfImage::plt_entries: libc's stubs, IRELATIVE ones named by their ifunc") {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!run("command -v objdump && test -r " + libc)) return;
  auto image = gsym::ElfImage::open(libc);
  REQUIRE(image.ok());
  std::map<uint64_t, std::string> ours;
  for (const PltEntry& e : image->plt_entries()) ours.emplace(e.address, e.name);
  const std::map<uint64_t, std::string> labels = objdump_plt_labels(libc);
  REQUIRE(labels.size() > 10);
  size_t irelative = 0;
  for (const auto& [address, name] : labels) {
    CAPTURE(name);
    auto it = ours.find(address);
    REQUIRE(it != ours.end());
    if (name.starts_with("*ABS*+")) {
      // objdump prints the resolver address; we print the ifunc there.
      ++irelative;
      CHECK(it->second.ends_with("@plt"));
      CHECK_FALSE(it->second.starts_with("*ABS*"));
    } else {
      CHECK(it->second == name);
    }
  }
  CHECK(irelative > 0);
}

TEST_CASE("convert: profiler names on PLT stubs and ld.so's entry, only when asked") {
  if (!run("command -v gcc")) return;
  test_files::TempDir dir("plt_convert");
  const std::string src = dir / "p.c", exe = dir / "p";
  const std::string code =
      "#include <string.h>\nint main(int argc, char** argv) { return (int)strlen(argv[argc - 1]); }\n";
  test_files::write_file(src, std::vector<uint8_t>(code.begin(), code.end()));
  REQUIRE(run("gcc -O1 -g -fcf-protection=none " + src + " -o " + exe));
  auto image = gsym::ElfImage::open(exe);
  REQUIRE(image.ok());
  uint64_t strlen_stub = 0;
  for (const PltEntry& e : image->plt_entries())
    if (e.name == "strlen@plt") strlen_stub = e.address;
  REQUIRE(strlen_stub != 0);

  const std::vector<uint8_t> plain = convert(exe, false), named = convert(exe, true);
  auto plain_reader = gsym::Reader::parse(plain);
  auto named_reader = gsym::Reader::parse(named);
  REQUIRE(plain_reader.ok());
  REQUIRE(named_reader.ok());
  CHECK(name_at(*plain_reader, strlen_stub + 4) == "_init");  // LLVM's answer: the zero-size _init
  CHECK(name_at(*named_reader, strlen_stub + 4) == "strlen@plt");
  CHECK(named_reader->verify().ok());
  // Outside the PLT every address answers as before.
  for (uint64_t addr = strlen_stub + 16; addr < strlen_stub + 0x400; ++addr)
    if (name_at(*plain_reader, addr) != "_init") CHECK(name_at(*plain_reader, addr) == name_at(*named_reader, addr));

  // ld.so: its entry is an untyped local label in libc6-dbg's debug file.
  const std::string ldso = "/lib64/ld-linux-x86-64.so.2";
  auto ld = gsym::ElfImage::open(ldso);
  if (!ld.ok()) return;
  GElf_Ehdr ehdr;
  REQUIRE(gelf_getehdr(ld->elf(), &ehdr));
  const std::vector<uint8_t> ld_plain = convert(ldso, false), ld_named = convert(ldso, true);
  auto ld_plain_reader = gsym::Reader::parse(ld_plain);
  auto ld_named_reader = gsym::Reader::parse(ld_named);
  REQUIRE(ld_named_reader.ok());
  if (name_at(*ld_named_reader, ehdr.e_entry) != "_start") {
    MESSAGE("no debug file with ld.so's _start label (libc6-dbg): entry checks skipped");
    return;
  }
  CHECK(name_at(*ld_named_reader, ehdr.e_entry + 7) == "_start");
  CHECK(name_at(*ld_named_reader, ehdr.e_entry + 8) == "_dl_start_user");
  CHECK(name_at(*ld_plain_reader, ehdr.e_entry + 7).empty());  // LLVM reads STT_FUNC only
}
