// Tests for the process table's side-band (process_image.h): images built
// from exec/mmap/fork/exit events, versions pinned by samples, pid reuse,
// files opened at the event, and no /proc re-reads while nothing was lost.
#include <doctest/doctest.h>

#include <sys/sysmacros.h>

#include <map>
#include <string>

#include "userspace/process/process_image.h"

using namespace gsymprof;

namespace {

// A fake /proc whose files are known by (dev, inode); the identity's build
// ID is the inode, its stamp what the kernel would report.
struct FakeFiles {
  std::map<uint32_t, std::string> maps;  // pid -> maps text
  std::map<uint32_t, bool> alive;        // pid -> map_files opens
  int maps_reads = 0, module_loads = 0, path_loads = 0;

  static FileStamp stamp_of(uint64_t inode) {
    FileStamp stamp;
    stamp.dev = makedev(8, 1);
    stamp.inode = inode;
    stamp.size = 4096 * inode;
    stamp.mtime_ns = 1000 + static_cast<int64_t>(inode);
    stamp.ctime_ns = 2000 + static_cast<int64_t>(inode);
    return stamp;
  }
  static ModuleIdentity identity_of(uint64_t inode) {
    ModuleIdentity id;
    id.build_id = BuildId(std::vector<uint8_t>{static_cast<uint8_t>(inode)});
    id.segments = {{0x1000, 0x1000, 0x1000, 0x1000, true}};
    // Inode 20: node's layout, code in two PT_LOADs with a hole between.
    if (inode == 20)
      id.segments = {{0, 0x400000, 0x800, 0x800, false},
                     {0x1000, 0x401000, 0x1000, 0x1000, true},
                     {0x3000, 0x403000, 0x800, 0x800, true}};
    id.file = stamp_of(inode);
    return id;
  }

  ProcSource source() {
    ProcSource s;
    s.read_maps = [this](uint32_t pid) -> gsym::Expected<std::string> {
      ++maps_reads;
      auto it = maps.find(pid);
      if (it == maps.end()) return gsym::Error("/proc/" + std::to_string(pid) + "/maps: gone");
      return it->second;
    };
    s.load_module = [this](uint32_t pid, const MapEntry& m) -> gsym::Expected<ModuleIdentity> {
      ++module_loads;
      if (!alive[pid]) return gsym::Error("map_files: gone");
      return identity_of(m.inode);
    };
    s.load_file = [this](const std::string& path, const FileStamp& stamp) -> gsym::Expected<ModuleIdentity> {
      ++path_loads;
      if (path != "/usr/bin/tool" || !same_file_contents(stamp, stamp_of(5)))
        return gsym::Error(path + " is not the file that was mapped");
      return identity_of(5);
    };
    return s;
  }
};

MapEntry code(uint64_t start, uint64_t inode, const std::string& path) {
  MapEntry m;
  m.start = start;
  m.end = start + 0x1000;
  m.file_offset = 0x1000;
  m.dev_major = 8;
  m.dev_minor = 1;
  m.inode = inode;
  m.perms = "r-xp";
  m.path = path;
  return m;
}

// The build ID byte of the module covering `addr` in image `id`, or -1.
int module_at(const ProcessTable& table, uint32_t id, uint64_t addr) {
  const ProcessImage& image = table.image(id);
  int32_t map = image.find_map(addr);
  if (map < 0) return -1;
  int32_t module = image.map_module[static_cast<size_t>(map)];
  if (module < 0) return -1;
  const ProcessModule& m = image.modules[static_cast<size_t>(module)];
  return m.identity.build_id.empty() ? -1 : m.identity.build_id.bytes()[0];
}

}  // namespace

TEST_CASE("side-band: exec and its mappings make the image; /proc is never read") {
  FakeFiles files;
  files.alive[10] = true;
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_exec(10, 0xa);
  table.note_mapping(10, 0xa, code(0x400000, 5, "/app"), FakeFiles::stamp_of(5), true);
  table.note_mapping(10, 0xa, code(0x7f0000000000, 6, "/lib.so"), FakeFiles::stamp_of(6), true);
  uint32_t id = table.current_image(10);
  CHECK(module_at(table, id, 0x400010) == 5);
  CHECK(module_at(table, id, 0x7f0000000010) == 6);
  uint64_t nowhere[] = {0x10};
  CHECK(!table.cover(id, nowhere));  // a bad address: no re-read
  CHECK(files.maps_reads == 0);
  // The same mapping reported again changes nothing.
  table.note_mapping(10, 0xa, code(0x400000, 5, "/app"), FakeFiles::stamp_of(5), true);
  CHECK(table.current_image(10) == id);
  CHECK(table.image(id).maps.size() == 2);
}

TEST_CASE("side-band: lost events bring /proc re-reads back") {
  FakeFiles files;
  files.alive[10] = true;
  files.maps[10] = "400000-401000 r-xp 00001000 08:01 5 /app\n";
  ProcessTable table(files.source());
  table.min_interval = std::chrono::milliseconds(0);
  uint64_t lost = 0;
  table.use_sideband([&] { return lost; });
  uint32_t id = table.current_image(10);  // predates the session: read once
  CHECK(files.maps_reads == 1);
  uint64_t in_lib[] = {0x7f0000000010};
  CHECK(!table.cover(id, in_lib));
  CHECK(files.maps_reads == 1);
  lost = 1;
  files.maps[10] += "7f0000000000-7f0000001000 r-xp 00001000 08:01 6 /lib.so\n";
  CHECK(table.cover(id, in_lib));
  CHECK(files.maps_reads == 2);
}

TEST_CASE("side-band: a library mapped where another was gets a new version once sampled") {
  FakeFiles files;
  files.alive[10] = true;
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_exec(10, 0xa);
  table.note_mapping(10, 0xa, code(0x400000, 5, "/app"), FakeFiles::stamp_of(5), true);
  table.note_mapping(10, 0xa, code(0x7f0000000000, 6, "/liba.so"), FakeFiles::stamp_of(6), true);
  const uint32_t with_a = table.current_image(10);  // a sample pins it
  // dlclose(a), dlopen(b) at the same address.
  table.note_mapping(10, 0xa, code(0x7f0000000000, 7, "/libb.so"), FakeFiles::stamp_of(7), true);
  const uint32_t with_b = table.current_image(10);
  CHECK(with_b != with_a);
  CHECK(module_at(table, with_a, 0x7f0000000010) == 6);
  CHECK(module_at(table, with_b, 0x7f0000000010) == 7);
  CHECK(module_at(table, with_b, 0x400010) == 5);
  CHECK(table.image_versions() == 1);
  // A new mapping elsewhere: no new version, though with_b is pinned.
  table.note_mapping(10, 0xa, code(0x7f0000100000, 8, "/libc.so"), FakeFiles::stamp_of(8), true);
  CHECK(table.current_image(10) == with_b);
  // One replacement after a sample makes one version; more replacements
  // that no sample saw change that version in place.
  table.note_mapping(10, 0xa, code(0x7f0000100000, 6, "/liba.so"), FakeFiles::stamp_of(6), true);
  table.note_mapping(10, 0xa, code(0x7f0000100000, 7, "/libb.so"), FakeFiles::stamp_of(7), true);
  const uint32_t last = table.current_image(10);
  CHECK(last != with_b);
  CHECK(table.image_versions() == 2);
  CHECK(module_at(table, with_b, 0x7f0000100010) == 8);
  CHECK(module_at(table, last, 0x7f0000100010) == 7);
}

TEST_CASE("side-band: a forked child shares its parent's image; a reused pid starts anew") {
  FakeFiles files;
  files.alive[10] = files.alive[11] = files.alive[20] = true;
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_exec(10, 0xa);
  table.note_mapping(10, 0xa, code(0x400000, 5, "/app"), FakeFiles::stamp_of(5), true);
  table.note_fork(10, 11, 0xb);
  const uint32_t child = table.current_image(11);
  CHECK(table.image(child).pid == 11);
  CHECK(module_at(table, child, 0x400010) == 5);
  // The child execs another program at the same address.
  table.note_exec(11, 0xc);
  table.note_mapping(11, 0xc, code(0x400000, 9, "/other"), FakeFiles::stamp_of(9), true);
  const uint32_t exec_d = table.current_image(11);
  CHECK(module_at(table, exec_d, 0x400010) == 9);
  // It exits: samples of its exit still belong to it.
  table.note_exit(11);
  CHECK(table.current_image(11) == exec_d);
  // Pid 11 is reused by a child of process 20.
  table.note_exec(20, 0xd);
  table.note_mapping(20, 0xd, code(0x400000, 12, "/third"), FakeFiles::stamp_of(12), true);
  table.note_fork(20, 11, 0xe);
  const uint32_t reused = table.current_image(11);
  CHECK(reused != exec_d);
  CHECK(module_at(table, reused, 0x400010) == 12);
  CHECK(module_at(table, exec_d, 0x400010) == 9);
  CHECK(files.maps_reads == 0);
}

TEST_CASE("side-band: a module of an exited process comes from a file with the same stamp") {
  FakeFiles files;
  files.alive[10] = true;
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_exec(10, 0xa);
  table.note_mapping(10, 0xa, code(0x7f0000000000, 6, "/lib.so"), FakeFiles::stamp_of(6), true);
  CHECK(files.module_loads == 1);
  // Process 11 lived 2 ms: gone when its events are read.
  table.note_exec(11, 0xb);
  // lib.so: the module opened for process 10 (same stamp), not opened again.
  table.note_mapping(11, 0xb, code(0x7f0000000000, 6, "/lib.so"), FakeFiles::stamp_of(6), true);
  CHECK(files.module_loads == 1);
  // tool: never seen; opened at the reported path, whose stamp matches.
  table.note_mapping(11, 0xb, code(0x400000, 5, "/usr/bin/tool"), FakeFiles::stamp_of(5), true);
  CHECK(files.path_loads == 1);
  // other: the file at the path is not the one mapped (another stamp).
  FileStamp changed = FakeFiles::stamp_of(5);
  changed.ctime_ns += 1;
  table.note_mapping(11, 0xb, code(0x500000, 5, "/usr/bin/tool"), changed, true);
  const uint32_t id = table.current_image(11);
  CHECK(module_at(table, id, 0x7f0000000010) == 6);
  CHECK(module_at(table, id, 0x400010) == 5);
  // (0x500000 maps inode 5 too: the module known by (dev, inode) is used.)
  CHECK(module_at(table, id, 0x500010) == 5);

  // A file first seen in an exited process, with a stamp that matches nothing.
  table.note_mapping(11, 0xb, code(0x600000, 13, "/usr/bin/gone"), FakeFiles::stamp_of(13), true);
  const ProcessImage& image = table.image(table.current_image(11));
  int32_t map = image.find_map(0x600010);
  REQUIRE(map >= 0);
  const ProcessModule& m = image.modules[static_cast<size_t>(image.map_module[static_cast<size_t>(map)])];
  CHECK(m.error.find("process exited before its module could be read") == 0);
  CHECK(m.path == "/usr/bin/gone");
}

TEST_CASE("side-band: an unknown process is read from /proc at its first event") {
  FakeFiles files;
  files.alive[10] = true;
  files.maps[10] = "400000-401000 r-xp 00001000 08:01 5 /app\n";
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_mapping(10, 0xa, code(0x7f0000000000, 6, "/lib.so"), FakeFiles::stamp_of(6), true);
  CHECK(files.maps_reads == 1);
  const uint32_t id = table.current_image(10);
  CHECK(module_at(table, id, 0x400010) == 5);
  CHECK(module_at(table, id, 0x7f0000000010) == 6);
  // Another address space without an exec event (it was lost): a new image.
  files.maps[10] = "400000-401000 r-xp 00001000 08:01 9 /other\n";
  table.note_mapping(10, 0xf, code(0x7f0000000000, 6, "/lib.so"), FakeFiles::stamp_of(6), true);
  const uint32_t after = table.current_image(10);
  CHECK(after != id);
  CHECK(module_at(table, after, 0x400010) == 9);
}

TEST_CASE("side-band: the ELF loader's mapping brings the file's other code segments") {
  FakeFiles files;
  files.alive[10] = true;
  ProcessTable table(files.source());
  table.use_sideband([] { return uint64_t{0}; });
  table.note_exec(10, 0xa);
  MapEntry text = code(0x401000, 20, "/usr/bin/node");
  text.file_offset = 0x1000;
  table.note_mapping(10, 0xa, text, FakeFiles::stamp_of(20), true, /*elf_loader=*/true);
  const uint32_t id = table.current_image(10);
  const ProcessImage& image = table.image(id);
  REQUIRE(image.maps.size() == 2);
  CHECK(image.maps[1].start == 0x403000);
  CHECK(image.maps[1].end == 0x404000);
  CHECK(image.maps[1].file_offset == 0x3000);
  CHECK(module_at(table, id, 0x403010) == 20);
  CHECK(image.find_map(0x402010) < 0);  // the hole stays a hole
  // A mapping made by a system call brings nothing more.
  table.note_exec(11, 0xb);
  files.alive[11] = true;
  table.note_mapping(11, 0xb, text, FakeFiles::stamp_of(20), true);
  CHECK(table.image(table.current_image(11)).maps.size() == 1);
}
