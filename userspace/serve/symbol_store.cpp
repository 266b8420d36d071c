#include "userspace/serve/symbol_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "userspace/base/private_dir.h"
#include "userspace/process/normalize.h"
#include "userspace/symbolize/debuginfod_client.h"
#include "userspace/symbolize/demangle.h"
#include "userspace/symbolize/gsym_cache.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof {
namespace {

constexpr size_t kMinBuildIdBytes = 4, kMaxBuildIdBytes = 64;
constexpr uint64_t kPage = 4096;

std::string stored_name(const BuildId& id, DebugFileKind kind) { return id.hex() + "." + to_string(kind); }

gsym::Error errno_error(const std::string& what) {
  const int err = errno;
  return gsym::Error::from_errno(err, what + ": " + std::strerror(err));
}

// Removes the temporaries of uploads whose process is gone (killed while
// receiving): ".upload.PID.N.R" in DIR/debug.
void remove_stale_uploads(int dir_fd) {
  const int fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!dir) {
    if (fd >= 0) ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (!name.starts_with(".upload.")) continue;
    const long pid = std::strtol(entry->d_name + 8, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : stale) ::unlinkat(dir_fd, name.c_str(), 0);
}

}  // namespace

std::optional<BuildId> parse_request_build_id(std::string_view hex) {
  if (hex.size() < 2 * kMinBuildIdBytes || hex.size() > 2 * kMaxBuildIdBytes) return std::nullopt;
  return BuildId::from_hex(hex);  // odd lengths and non-hex refused there
}

const char* to_string(DebugFileKind kind) { return kind == DebugFileKind::Debuginfo ? "debuginfo" : "executable"; }

std::optional<uint64_t> gsym_address(const AddressRule& rule, uint64_t memory_start, uint64_t memory_limit,
                                     uint64_t file_offset, uint64_t address) {
  if (address < memory_start || (memory_limit != 0 && address >= memory_limit)) return std::nullopt;
  const uint64_t into = address - memory_start;
  switch (rule.kind) {
    case AddressRule::Segments:
      return unslid_address(rule.segments, file_offset + into, true);
    case AddressRule::ExecutableSegment:
      return rule.text_page + into + (file_offset % kPage);
    case AddressRule::FileOffset:
      return file_offset + into;
  }
  return std::nullopt;
}

std::string_view DemangleCache::get(std::string_view symbol, std::string& spare) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = names_.find(symbol.data()); it != names_.end()) return it->second;
  }
  std::string plain = demangle(symbol);  // outside the lock: the slow part
  if (plain == symbol) plain.clear();
  std::lock_guard lock(mutex_);
  if (kept_in_all_.load(std::memory_order_relaxed) >= kMaxNamesInAll) {
    spare = std::move(plain);
    return spare;
  }
  auto [it, added] = names_.try_emplace(symbol.data(), std::move(plain));
  if (added) kept_in_all_.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

struct SymbolStore::State {
  SymbolStoreOptions options;
  ServeMetrics& metrics;
  gsym::FileDescriptor debug_dir;  // DIR/debug
  std::string cache_dir;           // DIR/cache

  std::mutex mutex;
  // The readers of DIR/*.gsym and DIR/cache, as one locator that never
  // converts; made anew after each conversion (it remembers misses) and
  // when it has opened many. A reader handed out keeps its locator alive.
  std::shared_ptr<GsymLocator> index;
  size_t index_lookups = 0;
  struct Entry {
    BuildId id;
    std::shared_ptr<const gsym::Reader> reader;
    std::shared_ptr<const AddressRule> rule;
    std::shared_ptr<DemangleCache> names;
  };
  std::list<Entry> open;  // most recently used first
  std::map<BuildId, std::list<Entry>::iterator> open_by_id;
  std::map<BuildId, std::chrono::steady_clock::time_point> failed;  // until
  std::set<BuildId> waiting;  // queued or converting
  std::deque<BuildId> queue;
  std::condition_variable wake;
  bool stopping = false;
  std::thread worker;

  State(SymbolStoreOptions o, ServeMetrics& m) : options(std::move(o)), metrics(m) {}

  gsym::Expected<std::shared_ptr<GsymLocator>> make_index() {
    LocatorOptions locator_options;
    locator_options.cache_dir = cache_dir;
    locator_options.convert_missing = false;
    locator_options.use_debuginfod = false;
    auto locator = std::make_shared<GsymLocator>(locator_options);
    gsym::Status added = locator->add_gsym_dir(options.dir);
    if (!added) return added.error();
    return locator;
  }

  bool has_file(const BuildId& id, DebugFileKind kind) {
    struct stat st {};
    return ::fstatat(debug_dir.get(), stored_name(id, kind).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(st.st_mode);
  }

  // The rule for `id`'s addresses from what the store holds.
  std::shared_ptr<const AddressRule> address_rule(const BuildId& id) {
    auto rule = std::make_shared<AddressRule>();
    for (DebugFileKind kind : {DebugFileKind::Executable, DebugFileKind::Debuginfo}) {
      auto file = gsym::open_regular_file_at(debug_dir.get(), stored_name(id, kind), gsym::Symlinks::RefuseFinal, "");
      if (!file) continue;
      auto identity = read_module_identity_fd(file->fd.get());
      if (!identity || identity->build_id != id) continue;
      if (kind == DebugFileKind::Executable) {
        rule->kind = AddressRule::Segments;
        rule->segments = std::move(identity->segments);
        return rule;
      }
      const LoadSegment* text = nullptr;
      size_t executable = 0;
      for (const LoadSegment& segment : identity->segments)
        if (segment.executable) {
          text = &segment;
          ++executable;
        }
      if (executable == 1) {
        rule->kind = AddressRule::ExecutableSegment;
        rule->text_page = text->vaddr & ~(kPage - 1);
        return rule;
      }
    }
    return rule;  // FileOffset
  }

  // Queues `id` unless waiting already; the outcome a request reports.
  FrameOutcome queue_conversion(const BuildId& id) {
    if (waiting.contains(id)) return FrameOutcome::PendingConversion;
    if (waiting.size() >= options.max_waiting) return FrameOutcome::QueueFull;
    waiting.insert(id);
    queue.push_back(id);
    metrics.set_conversions_waiting(waiting.size());
    wake.notify_one();
    return FrameOutcome::PendingConversion;
  }

  void run_worker() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [this] { return stopping || !queue.empty(); });
      if (stopping) return;
      BuildId id = queue.front();
      queue.pop_front();
      lock.unlock();
      std::string error;
      const bool converted = convert(id, error);
      gsym::Expected<std::shared_ptr<GsymLocator>> fresh =
          converted ? make_index() : gsym::Expected<std::shared_ptr<GsymLocator>>(gsym::Error(""));
      lock.lock();
      waiting.erase(id);
      metrics.set_conversions_waiting(waiting.size());
      if (converted && fresh) {
        index = std::move(*fresh);
        index_lookups = 0;
        failed.erase(id);
        metrics.add_conversion(ConversionOutcome::Converted);
      } else {
        failed[id] = std::chrono::steady_clock::now() + options.failure_ttl;
        metrics.add_conversion(ConversionOutcome::Failed);
        if (!error.empty()) std::fprintf(stderr, "gsymprof serve: %s: %s\n", id.hex().c_str(), error.c_str());
      }
    }
  }

  // Fetches what the store lacks from debuginfod into it.
  bool fetch(const BuildId& id, std::string& error, SymbolStore& store) {
    DebuginfodClient client;
    for (auto [kind, file_kind] : {std::pair{DebuginfodClient::Kind::Debuginfo, DebugFileKind::Debuginfo},
                                   std::pair{DebuginfodClient::Kind::Executable, DebugFileKind::Executable}}) {
      auto found = client.find(kind, id);
      if (!found) {
        error = found.error().message;
        continue;
      }
      auto upload = store.begin_upload();
      if (!upload) {
        error = upload.error().message;
        return false;
      }
      char buffer[1 << 16];
      for (;;) {
        const ssize_t n = ::read(found->file.fd.get(), buffer, sizeof buffer);
        if (n <= 0 || !upload->write(buffer, static_cast<size_t>(n))) break;
      }
      gsym::Status stored = commit(std::move(*upload), id, file_kind, false);
      if (stored) return true;
      error = stored.error().message;
    }
    return false;
  }

  bool convert(const BuildId& id, std::string& error) {
    SymbolStore* store = owner;
    if (!has_file(id, DebugFileKind::Debuginfo) && !has_file(id, DebugFileKind::Executable)) {
      if (!options.debuginfod) {
        error = "no debug file in the store";
        return false;
      }
      if (!fetch(id, error, *store)) return false;
    }
    const DebugFileKind kind = has_file(id, DebugFileKind::Debuginfo) ? DebugFileKind::Debuginfo : DebugFileKind::Executable;
    LocatorOptions locator_options;
    locator_options.cache_dir = cache_dir;
    locator_options.convert_missing = true;
    locator_options.use_debuginfod = options.debuginfod;
    locator_options.convert.threads = 1;
    GsymLocator converter(locator_options);
    ModuleReport report;
    const std::string path = options.dir + "/debug/" + stored_name(id, kind);
    report.path = path;
    const gsym::Reader* reader = converter.locate(id, path, report);
    if (!reader || report.gsym_path.empty()) {
      error = report.reason.empty() ? report.note : report.reason;
      return false;
    }
    return true;
  }

  // Renames a checked upload into place; `queue`: convert it next.
  gsym::Status commit(Upload upload, const BuildId& id, DebugFileKind kind, bool queue_it);

  SymbolStore* owner = nullptr;
};

SymbolStore::Upload::Upload(int dir_fd, std::string name, gsym::FileDescriptor fd, uint64_t limit)
    : dir_fd_(dir_fd), name_(std::move(name)), fd_(std::move(fd)), limit_(limit) {}

SymbolStore::Upload::Upload(Upload&& other) noexcept
    : dir_fd_(other.dir_fd_),
      name_(std::move(other.name_)),
      fd_(std::move(other.fd_)),
      size_(other.size_),
      limit_(other.limit_),
      failed_(other.failed_),
      committed_(other.committed_) {
  other.committed_ = true;  // the moved-from one removes nothing
}

SymbolStore::Upload::~Upload() {
  if (!committed_ && !name_.empty()) ::unlinkat(dir_fd_, name_.c_str(), 0);
}

bool SymbolStore::Upload::write(const char* data, size_t size) {
  if (failed_ || size > limit_ - size_) {
    failed_ = true;
    return false;
  }
  while (size > 0) {
    const ssize_t n = ::write(fd_.get(), data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
  return true;
}

gsym::Status SymbolStore::State::commit(Upload upload, const BuildId& id, DebugFileKind kind, bool queue_it) {
  if (upload.failed_) return gsym::Error(gsym::ErrorCode::Refused, "the upload could not be written whole");
  if (::fsync(upload.fd_.get()) != 0) return errno_error("upload");
  gsym::Expected<BuildId> found = read_elf_build_id_fd(upload.fd_.get(), "upload");
  if (!found) return gsym::Error(gsym::ErrorCode::Refused, "not an ELF file: " + found.error().message);
  if (found->empty()) return gsym::Error(gsym::ErrorCode::Refused, "the file has no GNU build ID");
  if (*found != id)
    return gsym::Error(gsym::ErrorCode::Refused, "the file's GNU build ID is " + found->hex() + ", not " + id.hex());
  const std::string name = stored_name(id, kind);
  if (::renameat(debug_dir.get(), upload.name_.c_str(), debug_dir.get(), name.c_str()) != 0)
    return errno_error("store " + name);
  upload.committed_ = true;
  if (queue_it) {
    // What was known of `id` is forgotten: its GSYM is converted again
    // from this file (a debug file names more than an executable did).
    std::vector<std::string> notes;
    GsymCache cache(cache_dir, notes);
    for (const char* suffix : {".gsym", ".failed", ".symbols"}) ::unlink(cache.path_of(id, suffix).c_str());
    std::lock_guard lock(mutex);
    failed.erase(id);
    if (auto it = open_by_id.find(id); it != open_by_id.end()) {
      open.erase(it->second);
      open_by_id.erase(it);
    }
    queue_conversion(id);
  }
  return gsym::Status::success();
}

gsym::Expected<std::unique_ptr<SymbolStore>> SymbolStore::open(SymbolStoreOptions options, ServeMetrics& metrics) {
  auto state = std::make_unique<State>(std::move(options), metrics);
  auto top = open_private_dir(state->options.dir, true);
  if (!top) return top.error().prefixed("--gsym-dir: ");
  auto debug = open_private_dir(state->options.dir + "/debug", true);
  if (!debug) return debug.error().prefixed("--gsym-dir: ");
  state->debug_dir = std::move(*debug);
  remove_stale_uploads(state->debug_dir.get());
  state->cache_dir = state->options.dir + "/cache";
  if (auto cache = open_private_dir(state->cache_dir, true); !cache) return cache.error().prefixed("--gsym-dir: ");
  auto index = state->make_index();
  if (!index) return index.error().prefixed("--gsym-dir: ");
  state->index = std::move(*index);
  auto store = std::unique_ptr<SymbolStore>(new SymbolStore(std::move(state)));
  store->state_->owner = store.get();
  State* raw = store->state_.get();
  raw->worker = std::thread([raw] { raw->run_worker(); });
  return store;
}

SymbolStore::SymbolStore(std::unique_ptr<State> state) : state_(std::move(state)) {}

SymbolStore::~SymbolStore() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
}

StoreLookup SymbolStore::find(const BuildId& id) {
  State& s = *state_;
  StoreLookup result;
  std::lock_guard lock(s.mutex);
  if (auto it = s.open_by_id.find(id); it != s.open_by_id.end()) {
    s.open.splice(s.open.begin(), s.open, it->second);
    s.metrics.add_cache(true);
    result.outcome = FrameOutcome::Named;
    result.reader = it->second->reader;
    result.rule = it->second->rule;
    result.names = it->second->names;
    return result;
  }
  s.metrics.add_cache(false);
  if (s.index_lookups >= 4 * s.options.open_gsyms) {
    if (auto fresh = s.make_index()) {
      s.index = std::move(*fresh);
      s.index_lookups = 0;
    }
  }
  ++s.index_lookups;
  ModuleReport report;
  if (const gsym::Reader* reader = s.index->locate(id, "", report)) {
    // The reader shares ownership of its locator (aliasing constructor).
    State::Entry entry{id, std::shared_ptr<const gsym::Reader>(s.index, reader), s.address_rule(id),
                       std::make_shared<DemangleCache>()};
    s.open.push_front(entry);
    s.open_by_id[id] = s.open.begin();
    while (s.open.size() > s.options.open_gsyms) {
      s.open_by_id.erase(s.open.back().id);
      s.open.pop_back();
    }
    result.outcome = FrameOutcome::Named;
    result.reader = std::move(entry.reader);
    result.rule = std::move(entry.rule);
    result.names = std::move(entry.names);
    return result;
  }
  if (s.waiting.contains(id)) {
    result.outcome = FrameOutcome::PendingConversion;
    return result;
  }
  if (auto it = s.failed.find(id); it != s.failed.end()) {
    if (std::chrono::steady_clock::now() < it->second) {
      result.outcome = FrameOutcome::ConversionFailed;
      return result;
    }
    s.failed.erase(it);
  }
  if (!s.options.debuginfod && !s.has_file(id, DebugFileKind::Debuginfo) && !s.has_file(id, DebugFileKind::Executable)) {
    result.outcome = FrameOutcome::NoSymbols;
    return result;
  }
  // Bounded: expired failures go first, then all of them.
  if (s.failed.size() > 4096) std::erase_if(s.failed, [now = std::chrono::steady_clock::now()](const auto& f) { return f.second <= now; });
  if (s.failed.size() > 4096) s.failed.clear();
  result.outcome = s.queue_conversion(id);
  return result;
}

gsym::Expected<gsym::OpenFile> SymbolStore::open_file(const BuildId& id, DebugFileKind kind) {
  return gsym::open_regular_file_at(state_->debug_dir.get(), stored_name(id, kind), gsym::Symlinks::RefuseFinal,
                                    stored_name(id, kind));
}

gsym::Expected<SymbolStore::Upload> SymbolStore::begin_upload() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 random(std::random_device{}());
  const std::string name = ".upload." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
                           std::to_string(random() & 0xffffffff);
  const int fd = ::openat(state_->debug_dir.get(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error("upload");
  return Upload(state_->debug_dir.get(), name, gsym::FileDescriptor(fd), state_->options.max_file_bytes);
}

gsym::Status SymbolStore::commit_upload(Upload upload, const BuildId& id, DebugFileKind kind) {
  return state_->commit(std::move(upload), id, kind, true);
}

}  // namespace gsymprof
