#include "userspace/gsym_locator.h"

#include "userspace/module_identity.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

namespace gsymprof {
namespace {


std::string errno_text(int err) { return std::strerror(err); }

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

BuildId build_id_of(const gsym::Reader& reader) { return BuildId(reader.build_id()); }

// Opens (creating when missing, mode 0755) every component of `dir` without
// following symlinks, and checks the final directory: owned by the effective
// user and writable by nobody else. Returns its descriptor.
gsym::Expected<FileDescriptor> open_cache_dir(const std::string& dir) {
  if (dir.empty()) return gsym::Error("no cache directory");
  FileDescriptor current(::open(dir[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.get() < 0) return gsym::Error(dir + ": " + errno_text(errno));
  size_t pos = 0;
  while (pos < dir.size()) {
    size_t slash = dir.find('/', pos);
    if (slash == std::string::npos) slash = dir.size();
    std::string component = dir.substr(pos, slash - pos);
    pos = slash + 1;
    if (component.empty() || component == ".") continue;
    bool created = ::mkdirat(current.get(), component.c_str(), 0755) == 0;
    if (!created && errno != EEXIST) {
      return gsym::Error(dir + ": cannot create " + component + ": " + errno_text(errno));
    }
    FileDescriptor next(::openat(current.get(), component.c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      int err = errno;
      if (err == ELOOP || err == ENOTDIR)
        return gsym::Error(dir + ": " + component + " is a symlink or not a directory");
      return gsym::Error(dir + ": " + errno_text(err));
    }
    // mkdir's mode is cut by the umask; the cache must be readable by all.
    if (created && ::fchmod(next.get(), 0755) != 0)
      return gsym::Error(dir + ": chmod " + component + ": " + errno_text(errno));
    current = std::move(next);
  }
  struct stat st;
  if (::fstat(current.get(), &st) != 0) return gsym::Error(dir + ": " + errno_text(errno));
  if (st.st_uid != ::geteuid())
    return gsym::Error(dir + ": owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                       std::to_string(::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return gsym::Error(dir + ": writable by group or others");
  return current;
}

// temp file + fsync + rename inside the directory `dir_fd`; mode 0644.
gsym::Status write_cache_file(int dir_fd, const std::string& dir, const std::string& name,
                              const std::vector<uint8_t>& bytes) {
  static unsigned counter = 0;
  std::string temp = "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(counter++);
  FileDescriptor fd(::openat(dir_fd, temp.c_str(),
                             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.get() < 0) return gsym::Error(dir + "/" + temp + ": " + errno_text(errno));
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    return gsym::Status(gsym::Error(dir + "/" + temp + ": " + what + ": " + errno_text(err)));
  };
  if (::fchmod(fd.get(), 0644) != 0) return fail("chmod");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail("fsync");
  if (::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) return fail("rename");
  return gsym::Status::success();
}

}  // namespace

std::string default_cache_dir() {
  const char* env = std::getenv("GSYMPROF_CACHE");
  if (env && *env) return env;
  return "/var/cache/gsymprof";
}

const char* to_string(GsymOrigin origin) {
  switch (origin) {
    case GsymOrigin::None: return "none";
    case GsymOrigin::GsymDir: return "gsym-dir";
    case GsymOrigin::Memory: return "memory";
    case GsymOrigin::Cache: return "cache";
    case GsymOrigin::Converted: return "converted";
  }
  return "none";
}

std::string describe(const ModuleReport& report) {
  std::string line = report.path.empty() ? std::string("(no path)") : report.path;
  line += report.build_id.empty() ? " (no build ID): " : " (build ID " + report.build_id.hex() + "): ";
  if (report.resolved()) {
    line += to_string(report.origin);
    if (!report.gsym_path.empty()) line += " " + report.gsym_path;
  } else {
    line += "no symbols: " + report.reason;
  }
  if (!report.note.empty()) line += " (" + report.note + ")";
  return line;
}

struct GsymLocator::State {
  LocatorOptions options;

  // A reader and the bytes it borrows (when not mapped); never moved once
  // created so handed-out pointers stay valid.
  struct Loaded {
    std::vector<uint8_t> bytes;
    std::optional<gsym::Reader> reader;
  };
  std::vector<std::unique_ptr<Loaded>> loaded;

  struct Outcome {
    const gsym::Reader* reader = nullptr;
    GsymOrigin origin = GsymOrigin::None;
    std::string gsym_path, reason, note;
  };

  std::map<BuildId, std::string> dir_index;     // build ID -> file in a --gsym-dir
  std::map<BuildId, const gsym::Reader*> memory_index;
  std::map<BuildId, Outcome> resolved;          // every hit so far, by build ID
  std::map<std::pair<BuildId, std::string>, Outcome> misses;  // by (build ID, local path)
  std::vector<std::string> notes;
  uint64_t conversions = 0;

  // Cache directory descriptor, opened (and created) on first write.
  std::optional<FileDescriptor> cache_fd;
  std::string cache_error;

  const gsym::Reader* keep(std::vector<uint8_t> bytes, gsym::Reader reader) {
    auto entry = std::make_unique<Loaded>();
    entry->bytes = std::move(bytes);
    entry->reader.emplace(std::move(reader));
    loaded.push_back(std::move(entry));
    return &*loaded.back()->reader;
  }

  // Maps `path` and returns its reader when its header build ID is `id`.
  const gsym::Reader* map_matching(const std::string& path, const BuildId& id,
                                   std::string& problem) {
    gsym::Expected<gsym::Reader> reader = gsym::Reader::map(path);
    if (!reader) {
      problem = path + ": " + reader.error().to_string();
      return nullptr;
    }
    BuildId found = build_id_of(*reader);
    if (found != id) {
      problem = path + ": build-ID mismatch (file has " +
                (found.empty() ? std::string("none") : found.hex()) + ")";
      return nullptr;
    }
    return keep({}, std::move(*reader));
  }

  std::optional<Outcome> from_sources(const BuildId& id) {
    std::string problem;
    if (auto it = dir_index.find(id); it != dir_index.end()) {
      if (const gsym::Reader* r = map_matching(it->second, id, problem))
        return Outcome{r, GsymOrigin::GsymDir, it->second, "", ""};
      notes.push_back("skipped " + problem);
    }
    if (auto it = memory_index.find(id); it != memory_index.end())
      return Outcome{it->second, GsymOrigin::Memory, "", "", ""};
    if (!options.cache_dir.empty()) {
      std::string path = options.cache_dir + "/" + id.hex() + ".gsym";
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
          notes.push_back("skipped " + path + ": not a regular file");
        } else if (const gsym::Reader* r = map_matching(path, id, problem)) {
          return Outcome{r, GsymOrigin::Cache, path, "", ""};
        } else {
          notes.push_back("skipped " + problem);
        }
      }
    }
    return std::nullopt;
  }

  Outcome convert(const BuildId& id, const std::string& elf_path) {
    Outcome out;
    std::string miss = "no GSYM for build ID " + id.hex();
    if (!options.convert_missing || elf_path.empty()) {
      out.reason = miss;
      return out;
    }
    gsym::Expected<BuildId> elf_id = read_elf_build_id(elf_path);
    if (!elf_id) {
      out.reason = miss + "; " + elf_id.error().to_string();
      return out;
    }
    if (*elf_id != id) {
      out.reason = miss + "; build-ID mismatch (file has " +
                   (elf_id->empty() ? std::string("none") : elf_id->hex()) + ")";
      return out;
    }
    ++conversions;
    gsym::Expected<std::vector<uint8_t>> bytes = gsym::convert_elf(elf_path, options.convert);
    if (!bytes) {
      out.reason = miss + "; conversion failed: " + bytes.error().to_string();
      return out;
    }
    std::vector<uint8_t> owned = std::move(*bytes);
    gsym::Expected<gsym::Reader> reader =
        gsym::Reader::parse(std::span<const uint8_t>(owned.data(), owned.size()));
    if (!reader) {
      out.reason = miss + "; conversion failed: output does not parse: " +
                   reader.error().to_string();
      return out;
    }
    if (BuildId converted(reader->build_id()); converted != id) {
      out.reason = miss + "; conversion failed: output has build ID " +
                   (converted.empty() ? std::string("none") : converted.hex());
      return out;
    }
    out.origin = GsymOrigin::Converted;
    if (!options.cache_dir.empty()) {
      std::string name = id.hex() + ".gsym";
      if (!cache_fd && cache_error.empty()) {
        gsym::Expected<FileDescriptor> fd = open_cache_dir(options.cache_dir);
        if (fd) cache_fd.emplace(std::move(*fd));
        else cache_error = fd.error().to_string();
      }
      if (!cache_error.empty()) {
        out.note = "not cached: " + cache_error;
      } else if (gsym::Status written =
                     write_cache_file(cache_fd->get(), options.cache_dir, name, owned);
                 !written) {
        out.note = "not cached: " + written.error().to_string();
      } else {
        out.gsym_path = options.cache_dir + "/" + name;
      }
    }
    // The reader borrows `owned`; the heap buffer does not move with the vector.
    out.reader = keep(std::move(owned), std::move(*reader));
    return out;
  }
};

GsymLocator::GsymLocator(LocatorOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}
GsymLocator::GsymLocator(GsymLocator&&) noexcept = default;
GsymLocator& GsymLocator::operator=(GsymLocator&&) noexcept = default;
GsymLocator::~GsymLocator() = default;

gsym::Status GsymLocator::add_gsym_dir(const std::string& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (!handle) return gsym::Error(dir + ": cannot open GSYM directory: " + errno_text(errno));
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(handle)) {
    std::string_view name = entry->d_name;
    if (name.size() > 5 && name.ends_with(".gsym")) names.emplace_back(name);
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    // Mapping only parses the header and checks section bounds: cheap.
    gsym::Expected<gsym::Reader> reader = gsym::Reader::map(path);
    if (!reader) {
      state_->notes.push_back("skipped " + path + ": " + reader.error().to_string());
      continue;
    }
    BuildId id = build_id_of(*reader);
    if (id.empty()) {
      state_->notes.push_back("skipped " + path + ": no build ID in its header");
      continue;
    }
    auto [it, inserted] = state_->dir_index.emplace(id, path);
    if (!inserted)
      state_->notes.push_back("skipped " + path + ": same build ID as " + it->second);
  }
  return gsym::Status::success();
}

gsym::Status GsymLocator::add_gsym_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  gsym::Expected<gsym::Reader> reader =
      gsym::Reader::parse(std::span<const uint8_t>(bytes.data(), bytes.size()));
  if (!reader) return gsym::Error(name + ": " + reader.error().to_string());
  BuildId id = build_id_of(*reader);
  if (id.empty()) return gsym::Error(name + ": no build ID in its header");
  if (state_->memory_index.contains(id)) {
    state_->notes.push_back("skipped " + name + ": same build ID as an earlier GSYM");
    return gsym::Status::success();
  }
  state_->memory_index.emplace(id, state_->keep(std::move(bytes), std::move(*reader)));
  return gsym::Status::success();
}

const gsym::Reader* GsymLocator::locate(const BuildId& build_id,
                                        const std::string& local_elf_path,
                                        ModuleReport& report) {
  State& s = *state_;
  report.build_id = build_id;
  auto fill = [&](const State::Outcome& outcome) {
    report.origin = outcome.origin;
    report.gsym_path = outcome.gsym_path;
    report.reason = outcome.reason;
    report.note = outcome.note;
    return outcome.reader;
  };
  if (build_id.empty()) return fill(State::Outcome{nullptr, GsymOrigin::None, "", "no build ID", ""});
  if (auto it = s.resolved.find(build_id); it != s.resolved.end()) return fill(it->second);
  auto key = std::make_pair(build_id, local_elf_path);
  if (auto it = s.misses.find(key); it != s.misses.end()) return fill(it->second);

  std::optional<State::Outcome> found = s.from_sources(build_id);
  State::Outcome outcome = found ? std::move(*found) : s.convert(build_id, local_elf_path);
  if (outcome.reader) s.resolved.emplace(build_id, outcome);
  else s.misses.emplace(std::move(key), outcome);
  return fill(outcome);
}

const std::vector<std::string>& GsymLocator::notes() const { return state_->notes; }

uint64_t GsymLocator::conversions_attempted() const { return state_->conversions; }

}  // namespace gsymprof
