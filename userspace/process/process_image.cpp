#include "userspace/process/process_image.h"

#include <sys/sysmacros.h>
#include <sys/uio.h>

#include "userspace/process/vdso_file.h"

#include "gsym/base/file_io.h"
#include "userspace/base/pseudo_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

namespace gsymprof {

int32_t ProcessImage::find_map(uint64_t addr) const {
  auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                             [](uint64_t a, const MapEntry& m) { return a < m.start; });
  if (it == maps.begin()) return -1;
  --it;
  return it->contains(addr) ? static_cast<int32_t>(it - maps.begin()) : -1;
}

void ProcessImage::merge(
    std::vector<MapEntry> fresh,
    const std::function<gsym::Expected<ModuleIdentity>(const MapEntry&)>& load) {
  // Keep the old entries no fresh entry overlaps.
  std::vector<MapEntry> kept_maps;
  std::vector<int32_t> kept_modules;
  for (size_t i = 0; i < maps.size(); ++i) {
    bool overlapped = std::any_of(fresh.begin(), fresh.end(), [&](const MapEntry& f) {
      return f.start < maps[i].end && maps[i].start < f.end;
    });
    if (!overlapped) {
      kept_maps.push_back(std::move(maps[i]));
      kept_modules.push_back(map_module[i]);
    }
  }
  // Index modules by (device, inode) to attach the fresh entries.
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, int32_t> by_file;
  for (size_t i = 0; i < modules.size(); ++i)
    by_file[{modules[i].dev_major, modules[i].dev_minor, modules[i].inode}] =
        static_cast<int32_t>(i);
  for (MapEntry& entry : fresh) {
    int32_t module = -1;
    // The vDSO is a module too, though no file backs it (see vdso_file.h).
    const bool vdso = entry.path == kVdsoPath;
    if (entry.file_backed() || vdso) {
      auto key = vdso ? std::make_tuple(UINT32_MAX, UINT32_MAX, UINT64_MAX)
                      : std::make_tuple(entry.dev_major, entry.dev_minor, entry.inode);
      auto it = by_file.find(key);
      if (it != by_file.end()) {
        module = it->second;
      } else {
        ProcessModule m{.path = entry.path, .deleted = entry.deleted, .dev_major = entry.dev_major,
                        .dev_minor = entry.dev_minor, .inode = entry.inode};
        auto identity = load(entry);
        if (identity)
          m.identity = std::move(*identity);
        else
          m.set_error(identity.error());
        module = static_cast<int32_t>(modules.size());
        modules.push_back(std::move(m));
        by_file.emplace(key, module);
      }
    }
    kept_maps.push_back(std::move(entry));
    kept_modules.push_back(module);
  }
  // Sort maps (and their module indexes alongside) by start.
  std::vector<size_t> order(kept_maps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return kept_maps[a].start < kept_maps[b].start; });
  maps.clear();
  map_module.clear();
  for (size_t i : order) {
    maps.push_back(std::move(kept_maps[i]));
    map_module.push_back(kept_modules[i]);
  }
}

namespace {

// Same range, file and permissions: the mapping a side-band event reports
// again (an exec mapping read from /proc and then announced, say).
bool same_mapping(const MapEntry& a, const MapEntry& b) {
  return a.start == b.start && a.end == b.end && a.file_offset == b.file_offset &&
         a.dev_major == b.dev_major && a.dev_minor == b.dev_minor && a.inode == b.inode &&
         a.perms == b.perms;
}

// The entries [first, last) that overlap [entry.start, entry.end).
std::pair<size_t, size_t> overlapping(const std::vector<MapEntry>& maps,
                                             const MapEntry& entry) {
  auto last = std::lower_bound(maps.begin(), maps.end(), entry.end,
                               [](const MapEntry& m, uint64_t end) { return m.start < end; });
  auto first = std::upper_bound(maps.begin(), last, entry.start,
                                [](uint64_t start, const MapEntry& m) { return start < m.start; });
  if (first != maps.begin() && std::prev(first)->end > entry.start) --first;
  return {static_cast<size_t>(first - maps.begin()), static_cast<size_t>(last - maps.begin())};
}

// Whether `entry` gives every address of `old` the meaning `old` gave it:
// the same file (or anonymous memory) at the same offset, the same
// permissions. A VMA that grew over its neighbour (adjacent JIT pages
// merged, say) is such an entry.
bool extends(const MapEntry& entry, const MapEntry& old) {
  return entry.dev_major == old.dev_major && entry.dev_minor == old.dev_minor &&
         entry.inode == old.inode && entry.path == old.path && entry.perms == old.perms &&
         entry.start - entry.file_offset == old.start - old.file_offset;
}

}  // namespace

bool ProcessImage::replaces_mapping(const MapEntry& entry) const {
  auto [first, last] = overlapping(maps, entry);
  for (size_t i = first; i < last; ++i)
    if (!extends(entry, maps[i])) return true;
  return false;
}

void ProcessImage::add_mapping(MapEntry entry, int32_t module) {
  auto [first, last] = overlapping(maps, entry);
  // As the kernel does (MAP_FIXED over part of a mapping): the parts of the
  // old mappings outside the new one stay, the tail at its file offset.
  std::vector<MapEntry> kept;
  std::vector<int32_t> kept_modules;
  for (size_t i = first; i < last; ++i) {
    const MapEntry& old = maps[i];
    if (old.start < entry.start) {
      MapEntry head = old;
      head.end = entry.start;
      kept.push_back(std::move(head));
      kept_modules.push_back(map_module[i]);
    }
    if (entry.end < old.end) {
      MapEntry tail = old;
      tail.start = entry.end;
      if (old.file_backed()) tail.file_offset += entry.end - old.start;
      kept.push_back(std::move(tail));
      kept_modules.push_back(map_module[i]);
    }
  }
  maps.erase(maps.begin() + static_cast<ptrdiff_t>(first), maps.begin() + static_cast<ptrdiff_t>(last));
  map_module.erase(map_module.begin() + static_cast<ptrdiff_t>(first),
                   map_module.begin() + static_cast<ptrdiff_t>(last));
  // In address order: the old mapping's head, the new one, its tail.
  size_t at = first;
  auto insert = [&](MapEntry m, int32_t module_index) {
    maps.insert(maps.begin() + static_cast<ptrdiff_t>(at), std::move(m));
    map_module.insert(map_module.begin() + static_cast<ptrdiff_t>(at), module_index);
    ++at;
  };
  size_t k = 0;
  for (; k < kept.size() && kept[k].start < entry.start; ++k) insert(std::move(kept[k]), kept_modules[k]);
  insert(std::move(entry), module);
  for (; k < kept.size(); ++k) insert(std::move(kept[k]), kept_modules[k]);
}

int32_t ProcessImage::find_module(uint32_t dev_major, uint32_t dev_minor, uint64_t inode) const {
  for (size_t i = 0; i < modules.size(); ++i)
    if (modules[i].inode == inode && modules[i].dev_major == dev_major &&
        modules[i].dev_minor == dev_minor)
      return static_cast<int32_t>(i);
  return -1;
}

bool same_file_contents(const FileStamp& a, const FileStamp& b) {
  return a.dev == b.dev && a.inode == b.inode && a.size == b.size && a.mtime_ns == b.mtime_ns &&
         a.ctime_ns == b.ctime_ns;
}

ProcSource ProcSource::live(const std::string& proc_root) {
  ProcSource source;
  source.read_maps = [proc_root](uint32_t pid) -> gsym::Expected<std::string> {
    std::string path = proc_root + "/" + std::to_string(pid) + "/maps";
    return read_pseudo_file(path, kMaxProcMapsBytes);
  };
  source.load_module = [proc_root](uint32_t pid, const MapEntry& entry) {
    return load_module_identity(pid, entry, proc_root, /*keep_open=*/true);
  };
  source.stamp_mapping = [proc_root](uint32_t pid, const MapEntry& entry, uint64_t mapped_at_ns) {
    return stamp_of_mapped_file(pid, entry, mapped_at_ns, proc_root);
  };
  source.read_memory = [](uint32_t pid, uint64_t addr, std::span<uint8_t> out) -> size_t {
    // process_vm_readv: one system call, no descriptor; a partial read ends
    // at the first page that cannot be read.
    iovec local{out.data(), out.size()};
    iovec remote{reinterpret_cast<void*>(addr), out.size()};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    return n > 0 ? static_cast<size_t>(n) : 0;
  };
  source.load_file = [](const std::string& path,
                        const FileStamp& stamp) -> gsym::Expected<ModuleIdentity> {
    gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(path);
    if (!file) return file.error();
    if (!same_file_contents(FileStamp::of(file->status), stamp))
      return gsym::Error(path + " is not the file that was mapped (replaced since?)");
    auto identity = read_module_identity_fd(file->fd.get());
    if (identity) identity->local_file = keep_module_file_open(file->fd.get(), identity->file);
    return identity;
  };
  return source;
}

bool ProcessTable::runs_image(uint32_t id) const {
  if (!source_.read_memory || id >= images_.size()) return false;
  const Entry& entry = images_[id];
  if (entry.exited) return false;
  // The pid must still run this image, or a later version of the same
  // address space (a dlopen), not a program exec'd or a process at a reused pid.
  auto current = current_.find(entry.image.pid);
  if (current == current_.end()) return false;
  const ProcessImage& now = images_[current->second].image;
  return current->second == id || (entry.image.mm != 0 && now.mm == entry.image.mm);
}

size_t ProcessTable::read_memory(uint32_t id, uint64_t addr, std::span<uint8_t> out) const {
  if (!runs_image(id)) return 0;
  return source_.read_memory(images_[id].image.pid, addr, out);
}

size_t ProcessTable::read_code(uint32_t id, uint64_t addr, std::span<uint8_t> out) const {
  if (!runs_image(id)) return 0;
  const Entry& entry = images_[id];
  const int32_t map = entry.image.find_map(addr);
  if (map < 0 || !entry.image.maps[map].executable()) return 0;
  const size_t size = std::min<uint64_t>(out.size(), entry.image.maps[map].end - addr);
  return source_.read_memory(entry.image.pid, addr, out.first(size));
}

void ProcessTable::read_into(Entry& entry) {
  ++map_reads_;
  entry.last_read = std::chrono::steady_clock::now();
  entry.uncovered_since_read = false;
  const uint32_t pid = entry.image.pid;
  auto text = source_.read_maps(pid);
  if (!text) {
    if (entry.image.maps.empty()) entry.image.error = text.error().message;
    return;
  }
  auto maps = parse_proc_maps(*text);
  if (!maps) {
    if (entry.image.maps.empty())
      entry.image.error = "/proc/" + std::to_string(pid) + "/maps: " + maps.error().message;
    return;
  }
  // With the side-band, only code mappings matter (a sample's address in
  // any other is no mapping), and a process with 60,000 data mappings costs
  // no more than its code.
  if (sideband_lost_)
    std::erase_if(*maps, [](const MapEntry& m) { return !m.executable(); });
  // An exited process has an empty maps file; keep what we had.
  if (maps->empty() && entry.image.maps.empty()) entry.image.error = "process exited";
  if (!maps->empty()) entry.image.error.clear();
  entry.image.merge(std::move(*maps), [&](const MapEntry& m) { return source_.load_module(pid, m); });
}

uint32_t ProcessTable::add_image(Entry entry) {
  const uint32_t id = static_cast<uint32_t>(images_.size());
  current_[entry.image.pid] = id;
  images_.push_back(std::move(entry));
  return id;
}

void ProcessTable::compact(size_t max_stamped_modules) {
  std::vector<Entry> kept;
  std::unordered_map<uint32_t, uint32_t> current;
  for (const auto& [pid, id] : current_) {
    Entry& entry = images_[id];
    if (entry.exited) continue;
    entry.pinned = false;
    current.emplace(pid, static_cast<uint32_t>(kept.size()));
    kept.push_back(std::move(entry));
  }
  images_ = std::move(kept);
  current_ = std::move(current);
  if (modules_by_stamp_.size() > max_stamped_modules) modules_by_stamp_.clear();
}

uint32_t ProcessTable::current_image(uint32_t pid) {
  auto it = current_.find(pid);
  if (it != current_.end()) {
    images_[it->second].pinned = true;
    return it->second;
  }
  Entry entry;
  entry.image.pid = pid;
  read_into(entry);
  entry.pinned = true;
  return add_image(std::move(entry));
}

uint32_t ProcessTable::image_for_event(uint32_t pid, uint64_t mm) {
  auto it = current_.find(pid);
  if (it != current_.end()) {
    ProcessImage& image = images_[it->second].image;
    if (!mm || !image.mm || image.mm == mm) {
      if (!image.mm) image.mm = mm;
      return it->second;
    }
    // Another address space without its exec event (lost): start anew.
  }
  // A process the side-band has not told of (it predates the session, or
  // its exec event was lost): what /proc says now.
  Entry entry;
  entry.image.pid = pid;
  entry.image.mm = mm;
  read_into(entry);
  return add_image(std::move(entry));
}

void ProcessTable::note_exec(uint32_t pid, uint64_t mm) {
  Entry entry;
  entry.image.pid = pid;
  entry.image.mm = mm;
  entry.last_read = std::chrono::steady_clock::now();
  add_image(std::move(entry));
}

void ProcessTable::note_fork(uint32_t parent, uint32_t child, uint64_t child_mm) {
  Entry entry;
  entry.image = images_[image_for_event(parent, 0)].image;  // a copy: the child's own from now on
  entry.image.pid = child;
  entry.image.mm = child_mm;
  entry.last_read = std::chrono::steady_clock::now();
  add_image(std::move(entry));
}

void ProcessTable::note_exit(uint32_t pid) {
  // Samples taken while it exits (exit_mmap) follow the event: they keep the
  // image. A process that reuses the pid is announced by its fork event.
  auto it = current_.find(pid);
  if (it != current_.end()) images_[it->second].exited = true;
}

gsym::Expected<ModuleIdentity> ProcessTable::load_mapped_module(uint32_t pid,
                                                               const MapEntry& entry,
                                                               const FileStamp& stamp,
                                                               bool path_complete) {
  auto identity = source_.load_module(pid, entry);
  // A source that cannot open a file by path (a recording) says why itself.
  if (identity || entry.path == kVdsoPath || !source_.load_file) return identity;
  // Gone already (a process that lived a few ms): the file at the path the
  // kernel reported, if it is still the very file that was mapped.
  std::string why = identity.error().message;
  if (path_complete && stamp.known() && source_.load_file) {
    auto by_path = source_.load_file(entry.path, stamp);
    if (by_path) return by_path;
    why += "; " + by_path.error().message;
  }
  return gsym::Error("process exited before its module could be read (" + why + ")");
}

namespace {

constexpr uint64_t kPage = 4096;

// The code segments of an ELF file the kernel's loader mapped, one of them
// as `entry`: each PF_X PT_LOAD at the load bias `entry` shows, page
// aligned, as binfmt_elf maps it. Empty when `entry` matches no segment.
std::vector<MapEntry> loader_code_mappings(const ModuleIdentity& identity, const MapEntry& entry) {
  std::vector<MapEntry> out;
  const LoadSegment* own = nullptr;
  for (const LoadSegment& seg : identity.segments)
    if (seg.executable && seg.file_offset / kPage * kPage == entry.file_offset) own = &seg;
  if (!own) return out;
  const uint64_t bias = entry.start - own->vaddr / kPage * kPage;  // wraps as the kernel's does
  for (const LoadSegment& seg : identity.segments) {
    if (!seg.executable || &seg == own || seg.mem_size == 0 || seg.mem_size > (uint64_t{1} << 40) ||
        seg.vaddr > (uint64_t{1} << 47))
      continue;
    MapEntry m = entry;
    m.start = bias + seg.vaddr / kPage * kPage;
    m.end = bias + (seg.vaddr + seg.mem_size + kPage - 1) / kPage * kPage;
    m.file_offset = seg.file_offset / kPage * kPage;
    if (m.start < m.end) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

void ProcessTable::note_mapping(uint32_t pid, uint64_t mm, MapEntry entry, const FileStamp& stamp,
                                bool path_complete, bool elf_loader) {
  uint32_t id = image_for_event(pid, mm);
  {
    const ProcessImage& image = images_[id].image;
    auto [first, last] = overlapping(image.maps, entry);
    if (last == first + 1 && same_mapping(image.maps[first], entry)) return;  // known already
    if (images_[id].pinned && image.replaces_mapping(entry)) {
      // Samples were taken with the mappings this one replaces: they keep
      // that version, later samples get a new one.
      Entry version = images_[id];
      version.pinned = false;
      id = add_image(std::move(version));
      ++versions_;
    }
  }
  ProcessImage& image = images_[id].image;
  int32_t module = -1;
  const bool vdso = entry.path == kVdsoPath;
  if (entry.file_backed() || vdso) {
    module = vdso ? -1 : image.find_module(entry.dev_major, entry.dev_minor, entry.inode);
    if (vdso)
      for (size_t i = 0; i < image.modules.size() && module < 0; ++i)
        if (image.modules[i].path == kVdsoPath) module = static_cast<int32_t>(i);
    if (module < 0) {
      const std::string stamp_key = vdso ? std::string(kVdsoPath) : stamp.known() ? stamp.key() : "";
      auto cached = stamp_key.empty() ? modules_by_stamp_.end() : modules_by_stamp_.find(stamp_key);
      ProcessModule m;
      if (cached != modules_by_stamp_.end()) {
        m = cached->second;
        if (path_complete) m.path = entry.path;
      } else {
        m.path = entry.path;
        m.deleted = entry.deleted;
        m.dev_major = entry.dev_major;
        m.dev_minor = entry.dev_minor;
        m.inode = entry.inode;
        auto identity = load_mapped_module(pid, entry, stamp, path_complete);
        if (identity) {
          // Shared with later processes only when it is the file the kernel
          // stamped (not rewritten in between).
          const bool same = vdso || same_file_contents(identity->file, stamp);
          m.identity = std::move(*identity);
          if (same && !stamp_key.empty()) modules_by_stamp_.emplace(stamp_key, m);
        } else {
          m.set_error(identity.error());
        }
      }
      module = static_cast<int32_t>(image.modules.size());
      image.modules.push_back(std::move(m));
    }
  }
  std::vector<MapEntry> more;
  if (elf_loader && module >= 0 && image.modules[static_cast<size_t>(module)].error.empty())
    more = loader_code_mappings(image.modules[static_cast<size_t>(module)].identity, entry);
  image.add_mapping(std::move(entry), module);
  for (MapEntry& m : more) {
    auto [first, last] = overlapping(image.maps, m);
    if (first == last) image.add_mapping(std::move(m), module);  // never over a known mapping
  }
  image.error.clear();  // a /proc read that failed (exited) no longer describes it
}

bool ProcessTable::cover(uint32_t id, std::span<const uint64_t> lookup_addrs) {
  Entry& entry = images_[id];
  // Code runs only from executable mappings: an address inside a data
  // mapping means that mapping is stale (ld.so maps ld.so.cache, unmaps it,
  // and dlopen() then maps a library at the same address).
  auto all_covered = [&] {
    return std::all_of(lookup_addrs.begin(), lookup_addrs.end(), [&](uint64_t a) {
      int32_t map = entry.image.find_map(a);
      return map >= 0 && entry.image.maps[static_cast<size_t>(map)].executable();
    });
  };
  if (all_covered()) return true;
  // The side-band keeps every image complete: an address outside all of
  // them is no mapping (a bad return address), not a mapping missed.
  if (!may_reread()) return false;
  if (std::chrono::steady_clock::now() - entry.last_read < min_interval) {
    entry.uncovered_since_read = true;
    return false;
  }
  read_into(entry);
  if (all_covered()) return true;
  return false;
}

FileStamp ProcessTable::stamp_of_mapping(uint32_t pid, const MapEntry& entry,
                                         uint64_t mapped_at_ns) const {
  if (!entry.inode) return {};
  if (source_.stamp_mapping) return source_.stamp_mapping(pid, entry, mapped_at_ns);
  FileStamp stamp;
  stamp.dev = makedev(entry.dev_major, entry.dev_minor);
  stamp.inode = entry.inode;
  return stamp;
}

void ProcessTable::refresh_stale() {
  if (!may_reread()) return;
  for (uint32_t id = 0; id < images_.size(); ++id) {
    Entry& entry = images_[id];
    auto current = current_.find(entry.image.pid);
    // An image replaced by exec must not take the new program's mappings.
    if (entry.uncovered_since_read && current != current_.end() && current->second == id)
      read_into(entry);
  }
}

}  // namespace gsymprof
