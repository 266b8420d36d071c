#include "userspace/export/window_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <span>

#include "userspace/base/private_dir.h"

namespace gsymprof {

gsym::Expected<WindowStore> WindowStore::open(const std::string& dir, std::string prefix, std::string suffix,
                                              size_t max_files, uint64_t max_bytes) {
  auto fd = open_private_dir(dir, /*create=*/true);
  if (!fd) return fd.error();
  WindowStore store;
  store.dir_ = std::move(*fd);
  store.path_ = dir;
  store.prefix_ = std::move(prefix);
  store.suffix_ = std::move(suffix);
  store.max_files_ = std::max<size_t>(max_files, 1);
  store.max_bytes_ = max_bytes;
  // Sequence numbers go on from what is there (a restarted agent).
  for (const Entry& entry : store.entries()) {
    const size_t dash = entry.name.rfind('-');
    if (dash != std::string::npos)
      store.sequence_ = std::max<uint64_t>(store.sequence_, std::strtoull(entry.name.c_str() + dash + 1, nullptr, 10));
  }
  return store;
}

std::vector<WindowStore::Entry> WindowStore::entries() const {
  std::vector<Entry> out;
  const int fd = ::openat(dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    ::close(fd);
    return out;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (!name.starts_with(prefix_ + "-") || !name.ends_with(suffix_)) continue;
    struct stat st;
    if (::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({name, static_cast<uint64_t>(st.st_size)});
  }
  ::closedir(dir);
  // The time then the sequence, zero-padded: name order is age order.
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

gsym::Expected<uint64_t> WindowStore::add(uint64_t start_unix_ns, const std::string& bytes) {
  const time_t seconds = static_cast<time_t>(start_unix_ns / 1000000000ull);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
  char sequence[24];
  std::snprintf(sequence, sizeof(sequence), "%06llu", static_cast<unsigned long long>(++sequence_));
  const std::string name = prefix_ + "-" + stamp + "-" + sequence + suffix_;
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (auto written = gsym::write_file_atomically_at(dir_.get(), path_, name, data, 0600); !written)
    return written.error();
  // Over a bound: the oldest go first (never the one just written).
  std::vector<Entry> all = entries();
  uint64_t total = 0;
  for (const Entry& entry : all) total += entry.bytes;
  uint64_t dropped = 0;
  for (size_t i = 0; i + 1 < all.size() && (all.size() - i > max_files_ || total > max_bytes_); ++i) {
    ::unlinkat(dir_.get(), all[i].name.c_str(), 0);
    total -= all[i].bytes;
    ++dropped;
  }
  return dropped;
}

std::vector<std::string> WindowStore::names() const {
  std::vector<std::string> out;
  for (Entry& entry : entries()) out.push_back(std::move(entry.name));
  return out;
}

gsym::Expected<std::string> WindowStore::read(const std::string& name) const {
  auto file = gsym::open_regular_file_at(dir_.get(), name, gsym::Symlinks::RefuseFinal, path_ + "/" + name);
  if (!file) return file.error();
  // A window is a few MB at most; more is not one of ours.
  constexpr uint64_t kMaxWindowBytes = 256ull << 20;
  auto bytes = gsym::read_descriptor(file->fd.get(), kMaxWindowBytes, path_ + "/" + name);
  if (!bytes) return bytes.error();
  return std::string(bytes->begin(), bytes->end());
}

void WindowStore::remove(const std::string& name) { ::unlinkat(dir_.get(), name.c_str(), 0); }

uint64_t WindowStore::bytes() const {
  uint64_t total = 0;
  for (const Entry& entry : entries()) total += entry.bytes;
  return total;
}

}  // namespace gsymprof
