#include "userspace/process/process_image.h"

#include "userspace/process/vdso_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
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
        ProcessModule m;
        m.path = entry.path;
        m.deleted = entry.deleted;
        m.dev_major = entry.dev_major;
        m.dev_minor = entry.dev_minor;
        m.inode = entry.inode;
        auto identity = load(entry);
        if (identity)
          m.identity = std::move(*identity);
        else
          m.error = identity.error().message;
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

ProcSource ProcSource::live(const std::string& proc_root) {
  ProcSource source;
  source.read_maps = [proc_root](uint32_t pid) -> gsym::Expected<std::string> {
    std::string path = proc_root + "/" + std::to_string(pid) + "/maps";
    std::ifstream in(path);
    if (!in) return gsym::Error(path + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return gsym::Error(path + ": read error");
    return text.str();
  };
  source.load_module = [proc_root](uint32_t pid, const MapEntry& entry) {
    return load_module_identity(pid, entry, proc_root, /*keep_open=*/true);
  };
  return source;
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
  // An exited process has an empty maps file; keep what we had.
  if (maps->empty() && entry.image.maps.empty()) entry.image.error = "process exited";
  if (!maps->empty()) entry.image.error.clear();
  entry.image.merge(std::move(*maps), [&](const MapEntry& m) { return source_.load_module(pid, m); });
}

uint32_t ProcessTable::current_image(uint32_t pid) {
  auto it = current_.find(pid);
  if (it != current_.end()) return it->second;
  Entry entry;
  entry.image.pid = pid;
  read_into(entry);
  uint32_t id = static_cast<uint32_t>(images_.size());
  images_.push_back(std::move(entry));
  current_[pid] = id;
  return id;
}

void ProcessTable::note_exec(uint32_t pid) { current_.erase(pid); }

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
  if (std::chrono::steady_clock::now() - entry.last_read < min_interval) {
    entry.uncovered_since_read = true;
    return false;
  }
  read_into(entry);
  if (all_covered()) return true;
  return false;
}

void ProcessTable::refresh_stale() {
  for (uint32_t id = 0; id < images_.size(); ++id) {
    Entry& entry = images_[id];
    auto current = current_.find(entry.image.pid);
    // An image replaced by exec must not take the new program's mappings.
    if (entry.uncovered_since_read && current != current_.end() && current->second == id)
      read_into(entry);
  }
}

}  // namespace gsymprof
