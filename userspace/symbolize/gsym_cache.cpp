#include "userspace/symbolize/gsym_cache.h"

#include "gsym/convert/convert.h"
#include "gsym/convert/debug_file_locator.h"
#include "userspace/base/private_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace gsymprof {
namespace {

using gsym::FileDescriptor;



// <buildid-hex>.<converter version><suffix>: a file of another converter
// version is never taken for this one's.
// Identities other than GNU build IDs are named by kind ("go-HEX...",
// "sha256-HEX..."), so no two kinds share a file.
std::string cache_name(const BuildId& id, const char* suffix) {
  const std::string prefix =
      id.kind() == BuildId::Kind::Gnu ? std::string() : std::string(kind_name(id.kind())) + "-";
  return prefix + id.hex() + "." + gsym::kConverterVersion + suffix;
}

// Whether `later` changed at or after `earlier` was last written.
bool changed_since(const struct stat& later, const struct stat& earlier) {
  return later.st_ctim.tv_sec > earlier.st_mtim.tv_sec ||
         (later.st_ctim.tv_sec == earlier.st_mtim.tv_sec && later.st_ctim.tv_nsec >= earlier.st_mtim.tv_nsec);
}

// The text of a .failed file: the message, then "kind: CODE".
std::optional<gsym::Error> parse_failure(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t newline = text.rfind('\n');
  constexpr std::string_view kKind = "kind: ";
  if (newline == std::string::npos || text.compare(newline + 1, kKind.size(), kKind) != 0)
    return std::nullopt;
  std::optional<gsym::ErrorCode> code =
      gsym::error_code_from_name(std::string_view(text).substr(newline + 1 + kKind.size()));
  if (!code) return std::nullopt;
  text.resize(newline);
  return gsym::Error(*code, std::move(text));
}

}  // namespace

std::string why_untrusted(const struct stat& status) {
  if (status.st_uid != 0 && status.st_uid != ::geteuid()) return "owned by uid " + std::to_string(status.st_uid);
  return "writable by group or others";
}

GsymCache::GsymCache(std::string dir, std::vector<std::string>& notes) : dir_(std::move(dir)), notes_(notes) {}

std::string GsymCache::path_of(const BuildId& id, const char* suffix) const {
  return dir_ + "/" + cache_name(id, suffix);
}

int GsymCache::descriptor(bool create) {
  if (dir_.empty()) return -1;
  if (!fd_ && (!tried_ || (create && absent_))) {
    tried_ = true;
    gsym::Expected<FileDescriptor> fd = open_private_dir(dir_, create);
    absent_ = !fd && fd.error().code == gsym::ErrorCode::NotFound;
    if (fd) {
      fd_.emplace(std::move(*fd));
    } else if (!absent_) {
      refused_ = fd.error().to_string();
      notes_.push_back("cache refused, neither read nor written: " + refused_);
    }
  }
  return fd_ ? fd_->get() : -1;
}

std::optional<gsym::OpenFile> GsymCache::open_gsym(const BuildId& id) { return open_entry(id, ".gsym"); }

std::optional<std::string> GsymCache::read_entry(const BuildId& id, const char* suffix, uint64_t max_bytes) {
  std::optional<gsym::OpenFile> file = open_entry(id, suffix);
  if (!file) return std::nullopt;
  gsym::Expected<std::vector<uint8_t>> bytes = gsym::read_descriptor(file->fd.get(), max_bytes, path_of(id, suffix));
  if (!bytes) {
    notes_.push_back("skipped " + bytes.error().to_string());
    return std::nullopt;
  }
  return std::string(bytes->begin(), bytes->end());
}

gsym::Status GsymCache::write_entry(const BuildId& id, const char* suffix, std::string_view bytes) {
  const int dir = descriptor(true);
  if (dir < 0) return gsym::Error(gsym::ErrorCode::Refused, refused_);
  return gsym::write_file_atomically_at(
      dir, dir_, cache_name(id, suffix),
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0600);
}

std::optional<gsym::OpenFile> GsymCache::open_entry(const BuildId& id, const char* suffix) {
  const int dir = descriptor(false);
  if (dir < 0) return std::nullopt;
  const std::string name = cache_name(id, suffix);
  const std::string path = dir_ + "/" + name;
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file_at(dir, name, gsym::Symlinks::RefuseFinal, path);
  if (!file) {
    if (file.error().code != gsym::ErrorCode::NotFound) notes_.push_back("skipped " + file.error().to_string());
    return std::nullopt;
  }
  if (file->status.st_uid != ::geteuid()) {
    notes_.push_back("skipped " + path + ": " + why_untrusted(file->status));
    return std::nullopt;
  }
  // Files of older versions were 0644: private now, like new ones.
  if ((file->status.st_mode & 077) != 0) ::fchmod(file->fd.get(), 0600);
  return std::move(*file);
}

bool GsymCache::from_symbols_only(const BuildId& id) {
  const int dir = descriptor(false);
  struct stat st {};
  return dir >= 0 && ::fstatat(dir, cache_name(id, ".symbols").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void GsymCache::mark_symbols_only(const BuildId& id, bool symbols_only) {
  const int dir = descriptor(symbols_only);
  if (dir < 0) return;
  if (!symbols_only) {
    ::unlinkat(dir, cache_name(id, ".symbols").c_str(), 0);
    return;
  }
  static constexpr uint8_t kNote[] = "converted from symbols only\n";
  (void)gsym::write_file_atomically_at(dir, dir_, cache_name(id, ".symbols"),
                                       std::span<const uint8_t>(kNote, sizeof kNote - 1), 0600);
}

std::optional<gsym::Error> GsymCache::remembered_failure(const BuildId& id,
                                                         const std::vector<std::string>& debug_directories) {
  const int dir = descriptor(false);
  if (dir < 0) return std::nullopt;
  const std::string name = cache_name(id, ".failed");
  gsym::Expected<gsym::OpenFile> file =
      gsym::open_regular_file_at(dir, name, gsym::Symlinks::RefuseFinal, dir_ + "/" + name);
  if (!file || file->status.st_uid != ::geteuid()) return std::nullopt;
  for (const std::string& debug_dir : debug_directories) {
    struct stat st {};
    const std::string debug_file = gsym::build_id_debug_path(debug_dir, id.bytes());
    if (!debug_file.empty() && ::stat(debug_file.c_str(), &st) == 0 && changed_since(st, file->status))
      return std::nullopt;
  }
  gsym::Expected<std::vector<uint8_t>> bytes = gsym::read_descriptor(file->fd.get(), 4096, name);
  if (!bytes) return std::nullopt;
  return parse_failure(std::string(bytes->begin(), bytes->end()));
}

void GsymCache::remember_failure(const BuildId& id, const gsym::Error& error) {
  const int dir = descriptor(true);
  if (dir < 0) return;
  const std::string text = error.to_string() + "\nkind: " + std::string(gsym::to_string(error.code)) + "\n";
  (void)gsym::write_file_atomically_at(
      dir, dir_, cache_name(id, ".failed"),
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), 0600);
}

gsym::Expected<std::string> GsymCache::publish(const BuildId& id, std::span<const uint8_t> gsym_bytes,
                                               bool symbols_only) {
  return publish_with(id, symbols_only, [&](int dir, const std::string& name) {
    return gsym::write_file_atomically_at(dir, dir_, name, gsym_bytes, 0600);
  });
}

gsym::Expected<std::string> GsymCache::publish(const BuildId& id, int gsym_fd, bool symbols_only) {
  return publish_with(id, symbols_only, [&](int dir, const std::string& name) {
    return gsym::write_file_atomically_at(dir, dir_, name, gsym_fd, 0600);
  });
}

gsym::Expected<std::string> GsymCache::publish_with(
    const BuildId& id, bool symbols_only,
    const std::function<gsym::Status(int dir_fd, const std::string& name)>& write) {
  const int dir = descriptor(true);
  if (dir < 0) return gsym::Error(gsym::ErrorCode::Refused, refused_);
  const std::string name = cache_name(id, ".gsym");
  if (gsym::Status written = write(dir, name); !written) return written.error();
  mark_symbols_only(id, symbols_only);
  return dir_ + "/" + name;
}

}  // namespace gsymprof
