#include "userspace/symbolize/gsym_locator.h"

#include "userspace/base/build_id.h"
#include "userspace/base/file_stamp.h"
#include "userspace/symbolize/debuginfod_client.h"

#include "gsym/convert/debug_file_locator.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/file_io.h"

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

using gsym::FileDescriptor;

BuildId build_id_of(const gsym::Reader& reader) { return BuildId(reader.build_id()); }

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

// "owned by uid N" / "writable by group or others": why a file's results are
// not shared.
std::string why_untrusted(const struct stat& st) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) return "owned by uid " + std::to_string(st.st_uid);
  return "writable by group or others";
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

// The header build ID a GSYM of module `id` carries: the GNU build ID
// itself; none for the other kinds (the converter writes the file's GNU build
// ID, which such a file lacks). Only a GSYM found by identity (cache names,
// conversions of the very file) serves those kinds, never a header alone.
BuildId header_id_for(const BuildId& id) {
  return id.kind() == BuildId::Kind::Gnu ? id : BuildId();
}

// The miss that starts every reason: "no GSYM for build ID X" (or "Go
// build ID", "SHA-256").
std::string no_gsym_for(const BuildId& id) { return "no GSYM for " + describe_identity(id); }



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
  line += report.identified ? " (" + describe_identity(report.build_id) + "): " : " (not identified): ";
  if (report.resolved()) {
    line += to_string(report.origin);
    if (!report.gsym_path.empty()) line += " " + report.gsym_path;
  } else {
    line += "no symbols: " + report.reason;
  }
  if (!report.note.empty()) line += " (" + report.note + ")";
  return line;
}

namespace {

// Whether converting `elf` would find DWARF without help: in the file
// itself or in a separate debug file the local search finds.
bool has_local_debug_info(const gsym::OpenFile& elf, const gsym::ConvertOptions& convert) {
  gsym::Expected<gsym::ElfImage> image =
      gsym::ElfImage::open("/proc/self/fd/" + std::to_string(elf.fd.get()), {}, convert.known_as);
  if (!image) return true;  // the conversion will say what is wrong
  if (image->has_dwarf() || !convert.search_debug_file) return true;
  return !gsym::find_debug_file(*image, gsym::DebugFileSearch{convert.debug_directories}).empty();
}

}  // namespace

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
    bool for_this_file_only = false;  // derived from a file others could write
    ModuleProblem problem = ModuleProblem::None;
    bool symbols_only = false;  // converted without DWARF
  };

  // A --gsym-dir file: mapped again on use, or (files others may write,
  // which a mapping could not survive) read whole at indexing.
  struct DirFile {
    std::string path;
    const gsym::Reader* reader = nullptr;
  };
  std::map<BuildId, DirFile> dir_index;
  std::map<BuildId, const gsym::Reader*> memory_index;
  // Hits that any module with the build ID may use: sources looked up by
  // build ID, and conversions of files only root could have written.
  std::map<BuildId, Outcome> resolved;
  // Conversions of files others can write: only for that very file.
  std::map<std::pair<BuildId, std::string>, Outcome> resolved_for_file;  // (id, stamp key)
  std::map<std::pair<BuildId, std::string>, Outcome> misses;  // by (build ID, local path)
  std::vector<std::string> notes;
  uint64_t conversions = 0;
  std::unique_ptr<DebuginfodClient> debuginfod;  // made on first use

  bool debuginfod_enabled() const { return options.use_debuginfod && DebuginfodClient::configured(); }
  gsym::Expected<DebuginfodClient::Found> ask_debuginfod(DebuginfodClient::Kind kind, const BuildId& id) {
    if (!debuginfod) debuginfod = std::make_unique<DebuginfodClient>(options.progress);
    return debuginfod->find(kind, id);
  }

  // Cache directory descriptor, opened (and created) on first use; a refused
  // cache is neither read nor written, and said once.
  std::optional<FileDescriptor> cache_fd;
  std::string cache_error;
  bool cache_tried = false, cache_absent = false;

  // The cache's descriptor, or -1; made only when `create` (to write).
  int cache(bool create) {
    if (options.cache_dir.empty()) return -1;
    if (!cache_fd && (!cache_tried || (create && cache_absent))) {
      cache_tried = true;
      gsym::Expected<FileDescriptor> fd = open_cache_dir(options.cache_dir, create);
      cache_absent = !fd && fd.error().code == gsym::ErrorCode::NotFound;
      if (fd) {
        cache_fd.emplace(std::move(*fd));
      } else if (!cache_absent) {
        cache_error = fd.error().to_string();
        notes.push_back("cache refused, neither read nor written: " + cache_error);
      }
    }
    return cache_fd ? cache_fd->get() : -1;
  }

  const gsym::Reader* keep(std::vector<uint8_t> bytes, gsym::Reader reader) {
    auto entry = std::make_unique<Loaded>();
    entry->bytes = std::move(bytes);
    entry->reader.emplace(std::move(reader));
    loaded.push_back(std::move(entry));
    return &*loaded.back()->reader;
  }

  // The reader of an open GSYM file when its header build ID is `id`.
  const gsym::Reader* load_matching(const gsym::OpenFile& file, const std::string& path,
                                    const BuildId& id, std::string& problem) {
    gsym::Expected<gsym::Reader> reader =
        gsym::Reader::from_descriptor(file.fd.get(), gsym::Reader::safe_load(file.status));
    if (!reader) {
      problem = path + ": " + reader.error().to_string();
      return nullptr;
    }
    BuildId found = build_id_of(*reader);
    if (found != header_id_for(id)) {
      problem = path + ": build-ID mismatch (file has " +
                (found.empty() ? std::string("none") : found.hex()) + ")";
      return nullptr;
    }
    return keep({}, std::move(*reader));
  }

  std::optional<Outcome> from_dirs_and_memory(const BuildId& id) {
    if (auto it = dir_index.find(id); it != dir_index.end()) {
      if (it->second.reader) return Outcome{it->second.reader, GsymOrigin::GsymDir, it->second.path, "", ""};
      std::string problem;
      gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(it->second.path);
      if (!file) problem = file.error().to_string();
      else if (const gsym::Reader* r = load_matching(*file, it->second.path, id, problem))
        return Outcome{r, GsymOrigin::GsymDir, it->second.path, "", ""};
      notes.push_back("skipped " + problem);
    }
    if (auto it = memory_index.find(id); it != memory_index.end())
      return Outcome{it->second, GsymOrigin::Memory, "", "", ""};
    return std::nullopt;
  }

  // A cached GSYM made from symbols alone is marked; while debuginfod is
  // configured it is converted again, asking for the debug file.
  bool cached_from_symbols_only(int dir, const BuildId& id) {
    struct stat st {};
    return ::fstatat(dir, cache_name(id, ".symbols").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }
  void mark_symbols_only(const BuildId& id, bool symbols_only) {
    const int dir = cache(symbols_only);
    if (dir < 0) return;
    if (!symbols_only) {
      ::unlinkat(dir, cache_name(id, ".symbols").c_str(), 0);
      return;
    }
    static constexpr uint8_t kNote[] = "converted from symbols only\n";
    (void)gsym::write_file_atomically_at(dir, options.cache_dir, cache_name(id, ".symbols"),
                                         std::span<const uint8_t>(kNote, sizeof kNote - 1), 0600);
  }

  std::optional<Outcome> from_cache(const BuildId& id) {
    const int dir = cache(false);
    if (dir < 0) return std::nullopt;
    if (debuginfod_enabled() && cached_from_symbols_only(dir, id)) return std::nullopt;
    const std::string name = cache_name(id, ".gsym");
    const std::string path = options.cache_dir + "/" + name;
    gsym::Expected<gsym::OpenFile> file =
        gsym::open_regular_file_at(dir, name, gsym::Symlinks::RefuseFinal, path);
    if (!file) {
      if (file.error().code != gsym::ErrorCode::NotFound)
        notes.push_back("skipped " + file.error().to_string());
      return std::nullopt;
    }
    if (file->status.st_uid != ::geteuid()) {
      notes.push_back("skipped " + path + ": " + why_untrusted(file->status));
      return std::nullopt;
    }
    // Files of older versions were 0644: private now, like new ones.
    if ((file->status.st_mode & 077) != 0) ::fchmod(file->fd.get(), 0600);
    std::string problem;
    if (const gsym::Reader* r = load_matching(*file, path, id, problem)) {
      Outcome hit{r, GsymOrigin::Cache, path, "", ""};
      hit.symbols_only = cached_from_symbols_only(dir, id);
      return hit;
    }
    notes.push_back("skipped " + problem);
    return std::nullopt;
  }

  // A conversion that failed earlier with this converter version: its error
  // as it was said and its code. The file holds the message, then a line
  // "kind: CODE" (gsym::to_string(ErrorCode)); a file without that line
  // (written before it existed) is not trusted, so that module is converted
  // again once and the file rewritten.
  std::optional<gsym::Error> remembered_failure(const BuildId& id) {
    const int dir = cache(false);
    if (dir < 0) return std::nullopt;
    const std::string name = cache_name(id, ".failed");
    gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file_at(
        dir, name, gsym::Symlinks::RefuseFinal, options.cache_dir + "/" + name);
    if (!file || file->status.st_uid != ::geteuid()) return std::nullopt;
    // A debug file that appeared since (the -dbgsym package installed, the
    // usual fix) is a reason to try again.
    for (const std::string& debug_dir : options.convert.debug_directories) {
      struct stat st {};
      const std::string debug_file = gsym::build_id_debug_path(debug_dir, id.bytes());
      if (!debug_file.empty() && ::stat(debug_file.c_str(), &st) == 0 &&
          (st.st_ctim.tv_sec > file->status.st_mtim.tv_sec ||
           (st.st_ctim.tv_sec == file->status.st_mtim.tv_sec &&
            st.st_ctim.tv_nsec >= file->status.st_mtim.tv_nsec)))
        return std::nullopt;
    }
    gsym::Expected<std::vector<uint8_t>> bytes = gsym::read_descriptor(file->fd.get(), 4096, name);
    if (!bytes) return std::nullopt;
    std::string text(bytes->begin(), bytes->end());
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

  void remember_failure(const BuildId& id, const gsym::Error& error) {
    const int dir = cache(true);
    if (dir < 0) return;
    const std::string text =
        error.to_string() + "\nkind: " + std::string(gsym::to_string(error.code)) + "\n";
    (void)gsym::write_file_atomically_at(
        dir, options.cache_dir, cache_name(id, ".failed"),
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), 0600);
  }

  // Converts the module's own file (`local`, opened by the caller) when its
  // build ID is `id`. Results of a file others could have written are kept
  // in memory for that file only, never cached.
  // `local_problem` says why `local` is null ("file missing" when
  // `local_missing`).
  Outcome convert(const BuildId& id, const gsym::OpenFile* local, const std::string& local_path,
                  const std::string& module_path, const std::string& local_problem,
                  bool local_missing) {
    Outcome out;
    std::string miss = no_gsym_for(id);
    // debuginfod serves GNU build IDs only.
    const bool debuginfod_for_id = debuginfod_enabled() && id.kind() == BuildId::Kind::Gnu;
    if (!options.convert_missing || local_path.empty()) {
      out.reason = miss;
      return out;
    }
    std::optional<DebuginfodClient::Found> fetched_executable;
    std::string debuginfod_note;
    if (!local && debuginfod_for_id) {
      auto found = ask_debuginfod(DebuginfodClient::Kind::Executable, id);
      if (!found) {
        out.reason = miss + "; " + local_problem + "; " + found.error().message;
        if (local_missing) out.problem = ModuleProblem::FileMissing;
        return out;
      }
      fetched_executable.emplace(std::move(*found));
      local = &fetched_executable->file;
      debuginfod_note = "executable from debuginfod: " + fetched_executable->path;
    }
    if (!local) {
      out.reason = miss + "; " + local_problem;
      if (local_missing) out.problem = ModuleProblem::FileMissing;
      return out;
    }
    // The file's identity by the same rule as the module's (build_id.h); a
    // GNU build ID is compared without hashing the file.
    gsym::Expected<BuildId> elf_id = id.kind() == BuildId::Kind::Gnu
                                         ? read_elf_build_id_fd(local->fd.get(), local_path)
                                         : read_elf_identity_fd(local->fd.get(), local_path);
    if (!elf_id) {
      out.reason = miss + "; " + elf_id.error().to_string();
      return out;
    }
    if (*elf_id != id) {
      out.reason = miss + (id.kind() == BuildId::Kind::Gnu
                               ? "; build-ID mismatch (file has " +
                                     (elf_id->empty() ? std::string("none") : elf_id->hex()) + ")"
                               : "; identity mismatch (file has " + describe_identity(*elf_id) + ")");
      out.problem = ModuleProblem::IdentityMismatch;
      return out;
    }
    bool shareable = gsym::writable_only_by_us(local->status);
    // The descriptor, not the path: the file converted is the file checked.
    // Debug links are looked for beside the module's own path.
    gsym::ConvertOptions convert_options = options.convert;
    // What a cached <id>.<converter version>.gsym means: with profiler names.
    convert_options.plt_names = convert_options.code_labels = convert_options.entry_name =
        convert_options.signal_frames = true;
    convert_options.known_as = module_path.empty() || module_path.starts_with("[") ? local_path : module_path;
    // debuginfod may have what the local search lacks, also for a failure
    // remembered from a run without it.
    const bool ask_for_debuginfo = debuginfod_for_id && convert_options.debug_file.empty() &&
                                   !has_local_debug_info(*local, convert_options);
    bool fetched_debuginfo_any = false;
    // A file with nothing to convert is a stripped binary whose debug file
    // is not installed: the usual case for a distribution's programs, not
    // an error of the conversion.
    auto failed = [&](const gsym::Error& error, const std::string& remembered_in) {
      if (!fetched_debuginfo_any && !has_local_debug_info(*local, convert_options) &&
          error.code == gsym::ErrorCode::NoFunctions) {
        out.reason = miss + "; stripped: no function symbols, no DWARF, no debug file found" + remembered_in;
        out.problem = ModuleProblem::Stripped;
      } else {
        out.reason = miss + "; conversion failed: " + error.to_string() + remembered_in;
      }
    };
    if (shareable && !ask_for_debuginfo) {
      if (std::optional<gsym::Error> earlier = remembered_failure(id)) {
        failed(*earlier, " (remembered in " + options.cache_dir + "/" + cache_name(id, ".failed") +
                             "; delete it to retry)");
        return out;
      }
    }
    ++conversions;
    std::optional<DebuginfodClient::Found> fetched_debuginfo;
    if (ask_for_debuginfo) {
      auto found = ask_debuginfod(DebuginfodClient::Kind::Debuginfo, id);
      if (found) {
        fetched_debuginfo_any = true;
        fetched_debuginfo.emplace(std::move(*found));
        convert_options.debug_file = "/proc/self/fd/" + std::to_string(fetched_debuginfo->file.fd.get());
      }
      const std::string said = found ? "debug file from debuginfod: " + fetched_debuginfo->path
                                     : found.error().message;
      debuginfod_note += (debuginfod_note.empty() ? "" : "; ") + said;
    }
    gsym::ConvertStats stats;
    gsym::Expected<std::vector<uint8_t>> bytes = gsym::convert_elf(
        "/proc/self/fd/" + std::to_string(local->fd.get()), convert_options, &stats);
    if (!bytes) {
      failed(bytes.error(), "");
      if (shareable) remember_failure(id, bytes.error());
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
    if (BuildId converted(reader->build_id()); converted != header_id_for(id)) {
      out.reason = miss + "; conversion failed: output has build ID " +
                   (converted.empty() ? std::string("none") : converted.hex());
      return out;
    }
    out.origin = GsymOrigin::Converted;
    out.symbols_only = stats.compile_units == 0;
    // A debug or alt file someone else could write makes the result theirs.
    const bool debug_shareable = stats.inputs_writable_only_by_us && (!fetched_debuginfo ||
                                 gsym::writable_only_by_us(fetched_debuginfo->file.status));
    if (!shareable) {
      out.note = "not cached: " + local_path + " is " + why_untrusted(local->status);
    } else if (!debug_shareable) {
      out.for_this_file_only = true;
      out.note = "not cached: a debug file it uses" +
                 (stats.debug_file_used.empty() ? std::string() : " (" + stats.debug_file_used + ")") +
                 " could be written by another user";
    } else if (!options.cache_dir.empty()) {
      std::string name = cache_name(id, ".gsym");
      if (cache(true) < 0) {
        out.note = "not cached: " + cache_error;
      } else if (gsym::Status written =
                     gsym::write_file_atomically_at(cache_fd->get(), options.cache_dir, name, owned, 0600);
                 !written) {
        out.note = "not cached: " + written.error().to_string();
      } else {
        out.gsym_path = options.cache_dir + "/" + name;
      }
    }
    if (!out.gsym_path.empty()) mark_symbols_only(id, stats.compile_units == 0);
    if (!debuginfod_note.empty()) out.note = out.note.empty() ? debuginfod_note : debuginfod_note + "; " + out.note;
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
  FileDescriptor dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) {
    const int err = errno;
    return gsym::Error::from_errno(err, dir + ": cannot open GSYM directory: " + errno_text(err));
  }
  DIR* handle = ::fdopendir(::fcntl(dir_fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!handle) {
    const int err = errno;
    return gsym::Error::from_errno(err, dir + ": cannot open GSYM directory: " + errno_text(err));
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(handle)) {
    std::string_view name = entry->d_name;
    if (name.size() > 5 && name.ends_with(".gsym")) names.emplace_back(name);
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string path = dir + "/" + name;
    // Opened by descriptor, never blocking: a FIFO or device is skipped.
    gsym::Expected<gsym::OpenFile> file =
        gsym::open_regular_file_at(dir_fd.get(), name, gsym::Symlinks::Follow, path);
    if (!file) {
      state_->notes.push_back("skipped " + file.error().to_string());
      continue;
    }
    // Mapping only parses the header and checks section bounds: cheap. A
    // file others may truncate is read whole instead and kept.
    const gsym::Reader::Load load = gsym::Reader::safe_load(file->status);
    gsym::Expected<gsym::Reader> reader = gsym::Reader::from_descriptor(file->fd.get(), load);
    if (!reader) {
      state_->notes.push_back("skipped " + path + ": " + reader.error().to_string());
      continue;
    }
    BuildId id = build_id_of(*reader);
    if (id.empty()) {
      state_->notes.push_back("skipped " + path + ": no build ID in its header");
      continue;
    }
    if (state_->dir_index.contains(id)) {
      state_->notes.push_back("skipped " + path + ": same build ID as " + state_->dir_index[id].path);
      continue;
    }
    const gsym::Reader* kept =
        load == gsym::Reader::Load::Read ? state_->keep({}, std::move(*reader)) : nullptr;
    state_->dir_index.emplace(id, State::DirFile{path, kept});
  }
  return gsym::Status::success();
}

gsym::Status GsymLocator::add_gsym_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  gsym::Expected<gsym::Reader> reader =
      gsym::Reader::parse(std::span<const uint8_t>(bytes.data(), bytes.size()));
  if (!reader) return reader.error().prefixed(name + ": ");
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
    report.symbols_only = outcome.symbols_only;
    report.problem = outcome.reader ? ModuleProblem::None
                     : outcome.problem != ModuleProblem::None ? outcome.problem
                                                              : ModuleProblem::Other;
    return outcome.reader;
  };
  if (build_id.empty()) {
    State::Outcome none{nullptr, GsymOrigin::None, "", "no build ID", ""};
    none.problem = ModuleProblem::NoIdentity;
    return fill(none);
  }

  // The module's own file decides what may stand for it: one that only root
  // could have written shares results by build ID; any other file gets only
  // --gsym-dir files, in-memory GSYMs and its own conversion, never what was
  // made from another file claiming the same build ID (and vice versa).
  std::optional<gsym::OpenFile> local;
  std::string local_problem;
  bool local_missing = false;
  if (!local_elf_path.empty()) {
    gsym::Expected<gsym::OpenFile> opened = gsym::open_regular_file(local_elf_path);
    if (opened) {
      local.emplace(std::move(*opened));
    } else {
      local_missing = opened.error().code == gsym::ErrorCode::NotFound;
      local_problem = local_missing ? "file missing" : opened.error().message;
    }
  }
  const bool own_file_only = local && !gsym::writable_only_by_us(local->status);
  const std::string stamp = local ? FileStamp::of(local->status).key() : "";
  if (own_file_only) {
    if (auto it = s.resolved_for_file.find({build_id, stamp}); it != s.resolved_for_file.end())
      return fill(it->second);
  } else if (auto it = s.resolved.find(build_id); it != s.resolved.end()) {
    return fill(it->second);
  }
  auto key = std::make_pair(build_id, local_elf_path);
  if (auto it = s.misses.find(key); it != s.misses.end()) return fill(it->second);

  std::optional<State::Outcome> found = s.from_dirs_and_memory(build_id);
  if (found) {
    // A source looked up by build ID serves every module with that ID.
    s.resolved.emplace(build_id, *found);
    return fill(*found);
  }
  if (!own_file_only) found = s.from_cache(build_id);
  State::Outcome outcome =
      found ? std::move(*found)
            : s.convert(build_id, local ? &*local : nullptr, local_elf_path, report.path, local_problem,
                        local_missing);
  if (!outcome.reader) s.misses.emplace(std::move(key), outcome);
  else if (own_file_only || outcome.for_this_file_only) s.resolved_for_file.emplace(std::make_pair(build_id, stamp), outcome);
  else s.resolved.emplace(build_id, outcome);
  return fill(outcome);
}

const std::vector<std::string>& GsymLocator::notes() const { return state_->notes; }

uint64_t GsymLocator::conversions_attempted() const { return state_->conversions; }

void GsymLocator::set_conversion_threads(unsigned threads) { state_->options.convert.threads = threads; }

}  // namespace gsymprof
