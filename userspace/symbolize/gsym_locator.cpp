#include "userspace/symbolize/gsym_locator.h"

#include "userspace/base/build_id.h"
#include "userspace/base/file_stamp.h"
#include "userspace/symbolize/debuginfod_client.h"
#include "userspace/symbolize/gsym_cache.h"

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

// A path that opens the very file open at `fd`.
std::string descriptor_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

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
      gsym::ElfImage::open(descriptor_path(elf.fd.get()), {}, convert.known_as);
  if (!image) return true;  // the conversion will say what is wrong
  if (image->has_dwarf() || !convert.search_debug_file) return true;
  return !gsym::find_debug_file(*image, gsym::DebugFileSearch{convert.debug_directories}).empty();
}

// The bytes a conversion of `elf` holds, about: the ELF, and its separate
// debug file when it has no DWARF of its own, each with its compressed
// sections as decompressed, into the heap (distributions compress debug
// files' DWARF 3-10:1: libc6-dbg's 4 MB file, converted in process, was
// 13 MB of inflated sections at the agent's first window). The converter's
// heap grows with the DWARF. A file others could write is read whole to be
// opened, so its sections are measured only when it is opened anyway.
uint64_t conversion_input_bytes(const gsym::OpenFile& elf, const gsym::ConvertOptions& convert) {
  uint64_t bytes = static_cast<uint64_t>(elf.status.st_size);
  const bool search = convert.debug_file.empty() && convert.search_debug_file;
  std::string debug_file = convert.debug_file;
  if (search || gsym::writable_only_by_us(elf.status)) {
    gsym::Expected<gsym::ElfImage> image =
        gsym::ElfImage::open(descriptor_path(elf.fd.get()), {}, convert.known_as);
    if (image) bytes += image->decompression_growth();
    if (image && search && !image->has_dwarf())
      debug_file = gsym::find_debug_file(*image, gsym::DebugFileSearch{convert.debug_directories});
  }
  struct stat status {};
  if (debug_file.empty() || ::stat(debug_file.c_str(), &status) != 0) return bytes;
  bytes += static_cast<uint64_t>(status.st_size);
  if (gsym::writable_only_by_us(status))
    if (gsym::Expected<gsym::ElfImage> debug = gsym::ElfImage::open(debug_file); debug)
      bytes += debug->decompression_growth();
  return bytes;
}

}  // namespace

struct GsymLocator::State {
  explicit State(LocatorOptions locator_options)
      : options(std::move(locator_options)), cache(options.cache_dir, notes) {}

  LocatorOptions options;
  std::vector<std::string> notes;
  GsymCache cache;  // says what it skips in `notes`

  gsym::Reader::Index index_kind() const {
    return options.lookup_indexes ? gsym::Reader::Index::Build : gsym::Reader::Index::Skip;
  }

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
  uint64_t conversions = 0;
  std::unique_ptr<DebuginfodClient> debuginfod;  // made on first use

  // debuginfod serves GNU build IDs only.
  bool debuginfod_enabled() const { return options.use_debuginfod && DebuginfodClient::configured(); }
  bool debuginfod_serves(const BuildId& id) const {
    return debuginfod_enabled() && id.kind() == BuildId::Kind::Gnu;
  }
  gsym::Expected<DebuginfodClient::Found> ask_debuginfod(DebuginfodClient::Kind kind, const BuildId& id) {
    if (!debuginfod) debuginfod = std::make_unique<DebuginfodClient>(options.progress);
    return debuginfod->find(kind, id);
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
        gsym::Reader::from_descriptor(file.fd.get(), gsym::Reader::safe_load(file.status), index_kind());
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

  std::optional<Outcome> from_cache(const BuildId& id) {
    // A GSYM made from symbols alone is converted again, asking debuginfod
    // for the debug file, while debuginfod is configured.
    if (debuginfod_enabled() && cache.from_symbols_only(id)) return std::nullopt;
    std::optional<gsym::OpenFile> file = cache.open_gsym(id);
    if (!file) return std::nullopt;
    const std::string path = cache.path_of(id, ".gsym");
    std::string problem;
    if (const gsym::Reader* r = load_matching(*file, path, id, problem)) {
      Outcome hit{r, GsymOrigin::Cache, path, "", ""};
      hit.symbols_only = cache.from_symbols_only(id);
      return hit;
    }
    notes.push_back("skipped " + problem);
    return std::nullopt;
  }

  // What a conversion reads: the module's own file, or the executable
  // debuginfod serves for it; what debuginfod gave is said in the note.
  struct ConversionSource {
    const gsym::OpenFile* file = nullptr;
    std::optional<DebuginfodClient::Found> fetched_executable;
    std::string debuginfod_note;
  };

  // Step 1: the file to convert. Without one, false and `out` says why
  // (`local_problem`: why the module's own file is missing).
  bool find_file_to_convert(const BuildId& id, const std::string& local_problem, bool local_missing,
                            ConversionSource& source, Outcome& out) {
    if (!source.file && debuginfod_serves(id)) {
      gsym::Expected<DebuginfodClient::Found> found = ask_debuginfod(DebuginfodClient::Kind::Executable, id);
      if (!found) {
        out.reason = no_gsym_for(id) + "; " + local_problem + "; " + found.error().message;
        if (local_missing) out.problem = ModuleProblem::FileMissing;
        return false;
      }
      source.fetched_executable.emplace(std::move(*found));
      source.file = &source.fetched_executable->file;
      source.debuginfod_note = "executable from debuginfod: " + source.fetched_executable->path;
    }
    if (!source.file) {
      out.reason = no_gsym_for(id) + "; " + local_problem;
      if (local_missing) out.problem = ModuleProblem::FileMissing;
    }
    return source.file != nullptr;
  }

  // Step 2: the file's identity by the same rule as the module's
  // (build_id.h); a GNU build ID is compared without hashing the file.
  static bool identity_matches(const BuildId& id, const gsym::OpenFile& file, const std::string& label,
                               Outcome& out) {
    gsym::Expected<BuildId> file_id = id.kind() == BuildId::Kind::Gnu
                                          ? read_elf_build_id_fd(file.fd.get(), label)
                                          : read_elf_identity_fd(file.fd.get(), label);
    if (!file_id) {
      out.reason = no_gsym_for(id) + "; " + file_id.error().to_string();
      return false;
    }
    if (*file_id == id) return true;
    out.reason = no_gsym_for(id) + (id.kind() == BuildId::Kind::Gnu
                                        ? "; build-ID mismatch (file has " +
                                              (file_id->empty() ? std::string("none") : file_id->hex()) + ")"
                                        : "; identity mismatch (file has " + describe_identity(*file_id) + ")");
    out.problem = ModuleProblem::IdentityMismatch;
    return false;
  }

  // What a cached <id>.<converter version>.gsym means: a conversion with
  // the profiler names. Debug links are looked for beside the module's path.
  gsym::ConvertOptions profiler_convert_options(const std::string& local_path, const std::string& module_path) const {
    gsym::ConvertOptions convert_options = options.convert;
    convert_options.plt_names = convert_options.code_labels = convert_options.entry_name =
        convert_options.signal_frames = true;
    convert_options.known_as = module_path.empty() || module_path.starts_with("[") ? local_path : module_path;
    return convert_options;
  }

  // A failed conversion's reason. A file with nothing to convert is a
  // stripped binary whose debug file is not installed: the usual case for a
  // distribution's programs, not an error of the conversion.
  static void say_failed(const BuildId& id, const gsym::Error& error, bool stripped_possible,
                         const std::string& remembered_in, Outcome& out) {
    if (stripped_possible && error.code == gsym::ErrorCode::NoFunctions) {
      out.reason = no_gsym_for(id) + "; stripped: no function symbols, no DWARF, no debug file found" + remembered_in;
      out.problem = ModuleProblem::Stripped;
    } else {
      out.reason = no_gsym_for(id) + "; conversion failed: " + error.to_string() + remembered_in;
    }
  }

  // Step 3: the debug file debuginfod has for `id`, given to the converter;
  // what it said goes to `debuginfod_note`.
  std::optional<DebuginfodClient::Found> fetch_debuginfo(const BuildId& id, gsym::ConvertOptions& convert_options,
                                                         std::string& debuginfod_note) {
    gsym::Expected<DebuginfodClient::Found> found = ask_debuginfod(DebuginfodClient::Kind::Debuginfo, id);
    const std::string said = found ? "debug file from debuginfod: " + found->path : found.error().message;
    debuginfod_note += (debuginfod_note.empty() ? "" : "; ") + said;
    if (!found) return std::nullopt;
    convert_options.debug_file = descriptor_path(found->file.fd.get());
    return std::move(*found);
  }

  // The converter's output, checked: it parses and carries the header build
  // ID a GSYM of `id` must carry. Else nullopt and `out` says why.
  std::optional<gsym::Reader> parse_converted(const BuildId& id, std::span<const uint8_t> bytes, Outcome& out) const {
    return check_converted(id, gsym::Reader::parse(bytes, index_kind()), out);
  }
  // The same of a child's output, through a mapping of its memfd (only the
  // pages parsing reads are resident).
  std::optional<gsym::Reader> parse_converted(const BuildId& id, const ChildGsym& child, Outcome& out) const {
    return check_converted(id, gsym::Reader::from_descriptor(child.fd.get(), gsym::Reader::Load::Map, index_kind()),
                           out);
  }
  static std::optional<gsym::Reader> check_converted(const BuildId& id, gsym::Expected<gsym::Reader> reader,
                                                     Outcome& out) {
    if (!reader) {
      out.reason = no_gsym_for(id) + "; conversion failed: output does not parse: " + reader.error().to_string();
      return std::nullopt;
    }
    if (BuildId converted(reader->build_id()); converted != header_id_for(id)) {
      out.reason = no_gsym_for(id) + "; conversion failed: output has build ID " +
                   (converted.empty() ? std::string("none") : converted.hex());
      return std::nullopt;
    }
    return std::move(*reader);
  }

  // A conversion's output: the converter's bytes (in process), or the
  // memfd a child wrote them to.
  struct Converted {
    std::vector<uint8_t> bytes;
    std::optional<ChildGsym> child;
  };

  // Step 4: a conversion whose every input only root (or we) could have
  // written is published in the cache; one of a debug file others could
  // write serves that very file only; one of a file others could write is
  // kept in memory only. `out.note` says which.
  void publish(const BuildId& id, const Converted& converted, const gsym::ConvertStats& stats,
               const gsym::OpenFile& file, const std::string& local_path,
               const std::optional<DebuginfodClient::Found>& fetched_debuginfo, Outcome& out) {
    const bool debug_shareable = stats.inputs_writable_only_by_us &&
                                 (!fetched_debuginfo || gsym::writable_only_by_us(fetched_debuginfo->file.status));
    if (!gsym::writable_only_by_us(file.status)) {
      out.note = "not cached: " + local_path + " is " + why_untrusted(file.status);
    } else if (!debug_shareable) {
      out.for_this_file_only = true;
      out.note = "not cached: a debug file it uses" +
                 (stats.debug_file_used.empty() ? std::string() : " (" + stats.debug_file_used + ")") +
                 " could be written by another user";
    } else if (cache.configured()) {
      const bool symbols_only = stats.compile_units == 0;
      gsym::Expected<std::string> path = converted.child
                                             ? cache.publish(id, converted.child->fd.get(), symbols_only)
                                             : cache.publish(id, converted.bytes, symbols_only);
      if (path) out.gsym_path = std::move(*path);
      else out.note = "not cached: " + path.error().to_string();
    }
  }

  // Converts the module's own file (`local`, opened by the caller) when its
  // identity is `id`: identity check -> debuginfod -> convert -> publish.
  // `local_problem` says why `local` is null ("file missing" when
  // `local_missing`).
  Outcome convert(const BuildId& id, const gsym::OpenFile* local, const std::string& local_path,
                  const std::string& module_path, const std::string& local_problem, bool local_missing) {
    Outcome out;
    if (!options.convert_missing || local_path.empty()) {
      out.reason = no_gsym_for(id);
      return out;
    }
    ConversionSource source;
    source.file = local;
    if (!find_file_to_convert(id, local_problem, local_missing, source, out) ||
        !identity_matches(id, *source.file, local_path, out))
      return out;
    const gsym::OpenFile& file = *source.file;
    const bool shareable = gsym::writable_only_by_us(file.status);
    gsym::ConvertOptions convert_options = profiler_convert_options(local_path, module_path);
    const uint64_t input_bytes = conversion_input_bytes(file, convert_options);
    if (options.max_convert_input_bytes != 0 && input_bytes >= options.max_convert_input_bytes) {
      out.reason = no_gsym_for(id) + " yet: " + std::to_string(input_bytes) +
                   " bytes to convert, left to the agent's next window";
      return out;
    }
    // debuginfod may have what the local search lacks, also for a failure
    // remembered from a run without it.
    const bool ask_for_debuginfo = debuginfod_serves(id) && convert_options.debug_file.empty() &&
                                   !has_local_debug_info(file, convert_options);
    if (shareable && !ask_for_debuginfo) {
      if (std::optional<gsym::Error> earlier = cache.remembered_failure(id, options.convert.debug_directories)) {
        say_failed(id, *earlier, !has_local_debug_info(file, convert_options),
                   " (remembered in " + cache.path_of(id, ".failed") + "; delete it to retry)", out);
        return out;
      }
    }
    ++conversions;
    std::optional<DebuginfodClient::Found> fetched_debuginfo;
    if (ask_for_debuginfo) fetched_debuginfo = fetch_debuginfo(id, convert_options, source.debuginfod_note);
    gsym::ConvertStats stats;
    const bool in_child = options.convert_in_child && input_bytes >= options.child_min_input_bytes;
    // A child's GSYM stays in its memfd unless it is kept in memory: checked
    // through a mapping, copied to the cache by the kernel, then served
    // mapped from there (read into the heap, a large binary's GSYM was the
    // agent's peak after each conversion).
    Converted converted;
    std::optional<gsym::Error> failed;
    if (in_child) {
      gsym::Expected<ChildGsym> child = convert_elf_in_child(file.fd.get(), convert_options, &stats, options.child);
      if (child) converted.child = std::move(*child);
      else failed = child.error();
    } else {
      gsym::Expected<std::vector<uint8_t>> bytes =
          gsym::convert_elf(descriptor_path(file.fd.get()), convert_options, &stats);
      if (bytes) converted.bytes = std::move(*bytes);
      else failed = bytes.error();
    }
    if (failed) {
      say_failed(id, *failed, !fetched_debuginfo && !has_local_debug_info(file, convert_options), "", out);
      if (shareable) cache.remember_failure(id, *failed);
      return out;
    }
    std::optional<gsym::Reader> reader =
        converted.child ? parse_converted(id, *converted.child, out) : parse_converted(id, converted.bytes, out);
    if (!reader) return out;
    out.origin = GsymOrigin::Converted;
    out.symbols_only = stats.compile_units == 0;
    publish(id, converted, stats, file, local_path, fetched_debuginfo, out);
    const std::string& said = source.debuginfod_note;
    if (!said.empty()) out.note = out.note.empty() ? said : said + "; " + out.note;
    // Cached, without lookup indexes (the agent): served from the cache
    // file, mapped, as a later run would be, so its pages are the file's
    // (release_pages drops them between windows) rather than heap the
    // allocator may keep. Cheap without an index to build again.
    if (!out.gsym_path.empty() && !options.lookup_indexes) {
      reader.reset();  // its index goes before the mapped reader builds its own
      if (std::optional<gsym::OpenFile> cached = cache.open_gsym(id)) {
        std::string problem;
        if (const gsym::Reader* mapped = load_matching(*cached, out.gsym_path, id, problem)) {
          out.reader = mapped;
          return out;
        }
      }
    }
    // Kept in memory: a child's GSYM is read whole now.
    if (converted.child) {
      reader.reset();  // it maps the memfd
      gsym::Expected<std::vector<uint8_t>> bytes = converted.child->read();
      if (!bytes) {
        out.origin = GsymOrigin::None;
        out.reason = no_gsym_for(id) + "; conversion failed: " + bytes.error().to_string();
        return out;
      }
      converted.bytes = std::move(*bytes);
    }
    if (!reader) reader = parse_converted(id, converted.bytes, out);  // parsed once already: cannot fail
    if (!reader) return out;
    // The reader borrows the bytes; the heap buffer does not move with the vector.
    out.reader = keep(std::move(converted.bytes), std::move(*reader));
    return out;
  }
};

GsymLocator::GsymLocator(LocatorOptions options) : state_(std::make_unique<State>(std::move(options))) {}
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
    gsym::Expected<gsym::Reader> reader = gsym::Reader::from_descriptor(file->fd.get(), load, state_->index_kind());
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
      gsym::Reader::parse(std::span<const uint8_t>(bytes.data(), bytes.size()), state_->index_kind());
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

size_t GsymLocator::reader_memory_bytes() const {
  size_t bytes = 0;
  for (const auto& entry : state_->loaded) bytes += entry->bytes.capacity() + entry->reader->memory_bytes();
  return bytes;
}

void GsymLocator::release_pages() {
  for (const auto& entry : state_->loaded) entry->reader->release_pages();
}

uint64_t GsymLocator::conversions_attempted() const { return state_->conversions; }

void GsymLocator::set_conversion_threads(unsigned threads) { state_->options.convert.threads = threads; }

}  // namespace gsymprof
