#include "userspace/symbolize/gsym_cache.h"

#include "gsym/convert/convert.h"
#include "gsym/convert/debug_file_locator.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace gsymprof {
namespace {

using gsym::FileDescriptor;

std::string errno_text(int err) { return std::strerror(err); }

// Opens (creating when missing) every component of `dir` without following
// symlinks. The cache itself is made private: created 0700, an existing one
// of ours tightened to 0700 (it holds symbols of root-only programs). It must
// be owned by the effective user; the same checks hold for reading.
// With `create` unset a missing cache is not made: an error coded NotFound
// (a cache not there yet, no problem to report). Every other error is
// Refused: the cache is then neither read nor written.
gsym::Expected<FileDescriptor> open_cache_dir(const std::string& dir, bool create) {
  auto refused = [&](std::string message, int err = 0) {
    gsym::Error e(gsym::ErrorCode::Refused, dir + ": " + std::move(message));
    e.sys_errno = err;
    return e;
  };
  auto refused_errno = [&](std::string what) {  // what + strerror(errno)
    const int err = errno;
    return refused(std::move(what) + errno_text(err), err);
  };
  if (dir.empty()) return gsym::Error(gsym::ErrorCode::Refused, "no cache directory");
  FileDescriptor current(::open(dir[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.get() < 0) return refused_errno("");
  size_t pos = 0;
  while (pos < dir.size()) {
    size_t slash = dir.find('/', pos);
    if (slash == std::string::npos) slash = dir.size();
    std::string component = dir.substr(pos, slash - pos);
    pos = slash + 1;
    if (component.empty() || component == ".") continue;
    const bool last = dir.find_first_not_of('/', pos) == std::string::npos;
    bool created = create && ::mkdirat(current.get(), component.c_str(), last ? 0700 : 0755) == 0;
    if (!create && ::faccessat(current.get(), component.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
        errno == ENOENT)
      return gsym::Error::from_errno(ENOENT, dir + ": " + component + ": " + errno_text(ENOENT));
    if (create && !created && errno != EEXIST) {
      const int err = errno;
      return refused("cannot create " + component + ": " + errno_text(err), err);
    }
    FileDescriptor next(::openat(current.get(), component.c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      int err = errno;
      if (err == ELOOP || err == ENOTDIR) return refused(component + " is a symlink or not a directory", err);
      return refused(errno_text(err), err);
    }
    // Intermediate directories made here are like /var/cache: 0755 whatever
    // the umask.
    if (created && !last && ::fchmod(next.get(), 0755) != 0)
      return refused_errno("chmod " + component + ": ");
    current = std::move(next);
  }
  struct stat st;
  if (::fstat(current.get(), &st) != 0) return refused_errno("");
  if (st.st_uid != ::geteuid())
    return refused("owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                   std::to_string(::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return refused("writable by group or others");
  if ((st.st_mode & 07777) != 0700 && ::fchmod(current.get(), 0700) != 0)
    return refused_errno("chmod 0700: ");
  return current;
}

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
    gsym::Expected<FileDescriptor> fd = open_cache_dir(dir_, create);
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

std::optional<gsym::OpenFile> GsymCache::open_gsym(const BuildId& id) {
  const int dir = descriptor(false);
  if (dir < 0) return std::nullopt;
  const std::string name = cache_name(id, ".gsym");
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
  const int dir = descriptor(true);
  if (dir < 0) return gsym::Error(gsym::ErrorCode::Refused, refused_);
  const std::string name = cache_name(id, ".gsym");
  if (gsym::Status written = gsym::write_file_atomically_at(dir, dir_, name, gsym_bytes, 0600); !written)
    return written.error();
  mark_symbols_only(id, symbols_only);
  return dir_ + "/" + name;
}

}  // namespace gsymprof
