// The running kernel's image text kept in the GSYM cache (KernelSymbolCache):
// a real cache directory, real files.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gsym/convert/convert.h"
#include "tests/unit/test_files.h"
#include "userspace/cli/kernel_symbol_cache.h"

using namespace gsymprof;

namespace {

KernelSymbolTable image_table() {
  auto all = KernelSymbolTable::parse(
      "ffffffff81000000 T _stext\n"
      "ffffffff81000100 t do_one\n"
      "ffffffff81000200 T do_two\n"
      "ffffffff81000400 T _etext\n"
      "ffffffffc0000000 t ext4_read\t[ext4]\n");
  REQUIRE(all.ok());
  std::optional<KernelSymbolTable> image = all->image_text();
  REQUIRE(image);
  return std::move(*image);
}

}  // namespace

TEST_CASE("kernel symbol cache: saved for a kernel and boot, read back for them only") {
  test_files::TempDir dir;
  const std::string cache_dir = dir / "cache";
  const BuildId kernel = *BuildId::from_hex("32a7f3bacee6bf69da94f497a8a076483baea20e");
  const BuildId other = *BuildId::from_hex("0011223344");
  KernelSymbolCache cache(cache_dir);
  CHECK(!cache.load(kernel, "boot-1"));  // nothing yet, and no directory made for reading
  CHECK(::access(cache_dir.c_str(), F_OK) != 0);
  cache.save(kernel, "boot-1", image_table());

  KernelSymbolCache later(cache_dir);  // another run
  std::optional<KernelSymbolTable> back = later.load(kernel, "boot-1");
  REQUIRE(back);
  REQUIRE(back->find(0xffffffff81000210));
  CHECK(back->find(0xffffffff81000210)->name == "do_two");
  CHECK(!back->covers(0xffffffffc0000010));
  CHECK(!later.load(kernel, "boot-2"));  // rebooted since
  CHECK(!later.load(other, "boot-1"));   // another kernel

  // Private: the directory 0700, the file 0600.
  struct stat status {};
  REQUIRE(::stat(cache_dir.c_str(), &status) == 0);
  CHECK((status.st_mode & 077) == 0);
  const std::string file = cache_dir + "/32a7f3bacee6bf69da94f497a8a076483baea20e." + gsym::kConverterVersion + ".kallsyms";
  REQUIRE(::stat(file.c_str(), &status) == 0);
  CHECK((status.st_mode & 077) == 0);

  // A damaged copy is not used (and a new save replaces it).
  test_files::write_file(file, {'G', 'S', 'P', 'K', 'S', 'Y', 'M', 1, 9, 9});
  CHECK(!KernelSymbolCache(cache_dir).load(kernel, "boot-1"));
  KernelSymbolCache(cache_dir).save(kernel, "boot-1", image_table());
  CHECK(KernelSymbolCache(cache_dir).load(kernel, "boot-1"));

  // A whole table (no image range: it would claim every address) is not used.
  auto whole = KernelSymbolTable::parse("ffffffff81000000 T _stext\nffffffffc0000000 t ext4_read\t[ext4]\n");
  REQUIRE(whole.ok());
  test_files::write_file(file, [&] {
    const std::string bytes = whole->serialize("boot-1");
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }());
  CHECK(!KernelSymbolCache(cache_dir).load(kernel, "boot-1"));
  KernelSymbolCache(cache_dir).save(kernel, "boot-1", image_table());

  // A file another user owns is not read (root can make one to test).
  if (::geteuid() == 0) {
    REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
    CHECK(!KernelSymbolCache(cache_dir).load(kernel, "boot-1"));
  }
}
