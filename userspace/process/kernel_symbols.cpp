#include "userspace/process/kernel_symbols.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>

#include "gsym/format/byte_writer.h"
#include "gsym/format/data_cursor.h"
#include "userspace/base/parse_number.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/base/text_fields.h"

namespace gsymprof {
namespace {

// kallsyms is ~10 MB on distribution kernels; 256 MiB is no kernel's.
constexpr size_t kMaxKallsymsBytes = size_t{256} << 20;
constexpr size_t kMaxNotesBytes = size_t{1} << 20;

bool is_function_type(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

}  // namespace

gsym::Expected<KernelSymbolTable> KernelSymbolTable::parse(std::string_view text) {
  KernelSymbolTable table;
  bool any_address = false;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (line.empty()) continue;
    std::string_view address_text = next_field(line);
    std::string_view type = next_field(line);
    std::string_view name = next_field(line);
    std::string_view module = next_field(line);
    std::optional<uint64_t> address = parse_unsigned<uint64_t>(address_text, 16);
    if (!address || type.size() != 1 || name.empty() || !next_field(line).empty() ||
        (!module.empty() && (module.size() < 3 || module.front() != '[' || module.back() != ']')))
      return gsym::Error("kallsyms line " + std::to_string(line_number) + ": not \"ADDRESS TYPE NAME [MODULE]\"");
    if (!is_function_type(type[0])) continue;
    if (*address != 0) any_address = true;
    if (!module.empty()) module = module.substr(1, module.size() - 2);
    if (table.names_.size() + name.size() + module.size() > UINT32_MAX)
      return gsym::Error("kallsyms: too large");
    Entry entry;
    entry.address = *address;
    entry.name = static_cast<uint32_t>(table.names_.size());
    entry.name_size = static_cast<uint32_t>(name.size());
    table.names_ += name;
    entry.module = static_cast<uint32_t>(table.names_.size());
    entry.module_size = static_cast<uint32_t>(module.size());
    table.names_ += module;
    table.symbols_.push_back(entry);
  }
  table.addresses_hidden_ = !table.symbols_.empty() && !any_address;
  // Aliases at one address: the first listed names it (stable sort).
  std::stable_sort(table.symbols_.begin(), table.symbols_.end(),
                   [](const Entry& a, const Entry& b) { return a.address < b.address; });
  return table;
}

gsym::Expected<KernelSymbolTable> KernelSymbolTable::load(const std::string& path) {
  auto text = read_pseudo_file(path, kMaxKallsymsBytes);
  if (!text) return text.error();
  auto table = parse(*text);
  if (!table) return gsym::Error(path + ": " + table.error().message);
  return table;
}

std::optional<KernelSymbol> KernelSymbolTable::find(uint64_t address) const {
  if (addresses_hidden_) return std::nullopt;
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.address; });
  if (it == symbols_.begin()) return std::nullopt;
  auto next = it;
  --it;
  // Skip aliases: the symbol's end is the next higher address.
  while (next != symbols_.end() && next->address == it->address) ++next;
  // The last symbol has no known end: a frame beyond it is not named.
  if (next == symbols_.end()) return std::nullopt;
  // The first of the aliases at this address names it.
  auto first = it;
  while (first != symbols_.begin() && (first - 1)->address == it->address) --first;
  KernelSymbol symbol;
  symbol.start = first->address;
  symbol.end = next->address;
  symbol.name = names_.substr(first->name, first->name_size);
  symbol.module = names_.substr(first->module, first->module_size);
  return symbol;
}

std::optional<KernelSymbolTable> KernelSymbolTable::image_text() const {
  if (addresses_hidden_) return std::nullopt;
  std::optional<uint64_t> start, end;
  for (const Entry& entry : symbols_) {
    if (entry.module_size != 0) continue;
    const std::string_view name(names_.data() + entry.name, entry.name_size);
    if (name == "_stext") start = entry.address;
    if (name == "_etext") end = entry.address;
  }
  if (!start || !end || *start >= *end) return std::nullopt;
  KernelSymbolTable image;
  image.covered_ = {*start, *end};
  for (const Entry& entry : symbols_) {
    if (entry.module_size != 0 || entry.address < *start || entry.address > *end) continue;
    Entry copy = entry;
    copy.name = static_cast<uint32_t>(image.names_.size());
    copy.module = copy.name + entry.name_size;
    copy.module_size = 0;
    image.names_.append(names_, entry.name, entry.name_size);
    image.symbols_.push_back(copy);
  }
  return image;
}

bool KernelSymbolTable::covers(uint64_t address) const {
  return !covered_ || (address >= covered_->first && address < covered_->second);
}

namespace {

constexpr std::string_view kSerializedMagic("GSPKSYM\x01", 8);
constexpr size_t kMaxBootIdBytes = 64;
constexpr size_t kSerializedEntryBytes = 24;  // address, name, name size, module, module size

}  // namespace

// Written and read with the GSYM library's byte writer and bounds-checked
// cursor (little-endian, the cursor's first failure sticky).
std::string KernelSymbolTable::serialize(std::string_view boot_id) const {
  gsym::ByteWriter out(gsym::Endian::Little);
  out.raw(kSerializedMagic);
  out.u32(static_cast<uint32_t>(boot_id.size()));
  out.raw(boot_id);
  out.u64(covered_ ? covered_->first : 0);
  out.u64(covered_ ? covered_->second : 0);
  out.u64(symbols_.size());
  out.u64(names_.size());
  for (const Entry& entry : symbols_) {
    out.u64(entry.address);
    out.u32(entry.name);
    out.u32(entry.name_size);
    out.u32(entry.module);
    out.u32(entry.module_size);
  }
  out.raw(names_);
  return std::string(out.bytes().begin(), out.bytes().end());
}

gsym::Expected<KernelSymbolTable> KernelSymbolTable::deserialize(std::string_view bytes, std::string_view boot_id) {
  auto bad = [](const std::string& why) { return gsym::Error("kernel symbol copy: " + why); };
  if (bytes.substr(0, kSerializedMagic.size()) != kSerializedMagic) return bad("not one (magic)");
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  gsym::detail::DataCursor in(data + kSerializedMagic.size(), data + bytes.size(), kSerializedMagic.size(),
                              /*swap=*/std::endian::native != std::endian::little);
  const uint32_t boot_size = in.u32();
  if (!in.ok() || boot_size > kMaxBootIdBytes || in.remaining() < boot_size) return bad("truncated boot ID");
  if (std::string_view(reinterpret_cast<const char*>(in.position()), boot_size) != boot_id)
    return bad("of another boot");
  in.skip(boot_size);
  const uint64_t first = in.u64(), end = in.u64(), count = in.u64(), names_size = in.u64();
  if (!in.ok()) return bad("truncated header");
  const size_t left = in.remaining();
  if (count > left / kSerializedEntryBytes || names_size != left - count * kSerializedEntryBytes ||
      names_size > UINT32_MAX)
    return bad("sizes do not match the file");
  KernelSymbolTable table;
  if (first != 0 || end != 0) {
    if (first >= end) return bad("empty range");
    table.covered_ = {first, end};
  }
  table.symbols_.resize(count);
  for (Entry& entry : table.symbols_) {
    entry.address = in.u64();
    entry.name = in.u32();
    entry.name_size = in.u32();
    entry.module = in.u32();
    entry.module_size = in.u32();
    if (uint64_t{entry.name} + entry.name_size > names_size || uint64_t{entry.module} + entry.module_size > names_size ||
        entry.name_size == 0)
      return bad("a name outside the names");
    if (table.covered_ && (entry.address < first || entry.address > end)) return bad("a symbol outside its range");
    if (&entry != &table.symbols_.front() && entry.address < (&entry - 1)->address) return bad("not sorted");
  }
  table.names_.assign(reinterpret_cast<const char*>(in.position()), in.remaining());
  return table;
}

BuildId build_id_from_notes(std::string_view notes) {
  constexpr uint32_t kNtGnuBuildId = 3;
  size_t offset = 0;
  auto align4 = [](uint64_t n) { return (n + 3) & ~uint64_t{3}; };
  while (notes.size() - offset >= 12) {
    uint32_t name_size, desc_size, type;
    std::memcpy(&name_size, notes.data() + offset, 4);
    std::memcpy(&desc_size, notes.data() + offset + 4, 4);
    std::memcpy(&type, notes.data() + offset + 8, 4);
    offset += 12;
    const uint64_t name_end = offset + align4(name_size);
    const uint64_t desc_end = name_end + align4(desc_size);
    if (desc_end > notes.size()) break;
    std::string_view name = notes.substr(offset, name_size);
    if (type == kNtGnuBuildId && name == std::string_view("GNU\0", 4) && desc_size > 0 &&
        desc_size <= 64) {
      auto bytes = reinterpret_cast<const uint8_t*>(notes.data() + name_end);
      return BuildId(std::span<const uint8_t>(bytes, desc_size));
    }
    offset = static_cast<size_t>(desc_end);
  }
  return BuildId();
}

gsym::Expected<BuildId> read_kernel_build_id(const std::string& notes_path) {
  auto notes = read_pseudo_file(notes_path, kMaxNotesBytes);
  if (!notes) return notes.error();
  return build_id_from_notes(*notes);
}

void attach_kernel_symbols(Capture& capture, const KernelSymbolTable* table,
                           const BuildId& build_id, const std::string& error) {
  capture.kernel = {};
  capture.kernel.build_id = build_id;
  capture.kernel.error = error;
  if (!table) return;
  std::vector<uint64_t> addresses;
  for (const CaptureStack& stack : capture.stacks)
    for (const CaptureFrame& frame : stack.frames)
      if (frame.kernel) addresses.push_back(frame.address);
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  std::vector<KernelSymbol>& symbols = capture.kernel.symbols;
  for (uint64_t address : addresses) {
    if (!symbols.empty() && address < symbols.back().end) continue;  // sorted: same symbol
    if (std::optional<KernelSymbol> symbol = table->find(address))
      symbols.push_back(std::move(*symbol));
  }
}

namespace {

// The running kernel's symbols and build ID, read once per process: every
// capture built here (a profile, each perf.data file symbolized) names its
// frames from the same kernel, and kallsyms takes tens of milliseconds.
struct RunningKernel {
  std::mutex mutex;
  BuildId build_id;
  std::string boot_id;  // "" when unreadable: nothing is kept in the store
  std::unique_ptr<KernelSymbolStore> store;
  std::optional<gsym::Expected<KernelSymbolTable>> all;  // /proc/kallsyms, once read
  std::optional<std::optional<KernelSymbolTable>> image;  // the image's text, once looked for

  RunningKernel() {
    if (auto id = read_kernel_build_id()) build_id = std::move(*id);
    if (auto text = read_pseudo_file("/proc/sys/kernel/random/boot_id", 256)) {
      boot_id = std::move(*text);
      while (!boot_id.empty() && boot_id.back() == '\n') boot_id.pop_back();
    }
  }
  bool can_keep() const { return store && !build_id.empty() && !boot_id.empty(); }

  const gsym::Expected<KernelSymbolTable>& all_symbols() {
    if (!all) {
      all = KernelSymbolTable::load();
      // Kept for the next run of this boot, unless it came from there.
      if (*all && can_keep() && !(image && *image)) {
        if (std::optional<KernelSymbolTable> text = (*all)->image_text()) store->save(build_id, boot_id, *text);
      }
      // The whole table answers everything from now on: the image's copy
      // is not kept beside it (a long-running agent would hold both).
      if (*all) image.emplace(std::nullopt);
    }
    return *all;
  }

  // The image's text when it names every kernel frame of `capture`.
  const KernelSymbolTable* image_text_for(const Capture& capture) {
    if (!image) image = can_keep() ? store->load(build_id, boot_id) : std::nullopt;
    if (!*image) return nullptr;
    for (const CaptureStack& stack : capture.stacks)
      for (const CaptureFrame& frame : stack.frames)
        if (frame.kernel && !(*image)->covers(frame.address)) return nullptr;
    return &**image;
  }
};

RunningKernel& running_kernel() {
  static RunningKernel kernel;
  return kernel;
}

}  // namespace

const BuildId& running_kernel_build_id() { return running_kernel().build_id; }

void keep_running_kernel_symbols_in(std::unique_ptr<KernelSymbolStore> store) {
  RunningKernel& kernel = running_kernel();
  std::lock_guard lock(kernel.mutex);
  kernel.store = std::move(store);
}

void attach_running_kernel_symbols(Capture& capture) {
  if (!has_kernel_frames(capture)) return;
  RunningKernel& kernel = running_kernel();
  std::lock_guard lock(kernel.mutex);
  if (const KernelSymbolTable* image = kernel.image_text_for(capture)) {
    attach_kernel_symbols(capture, image, kernel.build_id, "");
    return;
  }
  const gsym::Expected<KernelSymbolTable>& table = kernel.all_symbols();
  if (!table) {
    attach_kernel_symbols(capture, nullptr, kernel.build_id,
                          "cannot read kernel symbols: " + table.error().message);
    return;
  }
  if (table->addresses_hidden()) {
    attach_kernel_symbols(capture, nullptr, kernel.build_id,
                          "/proc/kallsyms shows no addresses (kernel.kptr_restrict is set; "
                          "run as root with sysctl kernel.kptr_restrict=1 or 0)");
    return;
  }
  attach_kernel_symbols(capture, &*table, kernel.build_id, "");
}

}  // namespace gsymprof
