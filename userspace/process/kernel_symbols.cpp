#include "userspace/process/kernel_symbols.h"

#include <algorithm>
#include <cstring>

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
  BuildId build_id;
  gsym::Expected<KernelSymbolTable> table = gsym::Error("not read");
};

const RunningKernel& running_kernel() {
  static const RunningKernel kernel = [] {
    RunningKernel k;
    if (auto id = read_kernel_build_id()) k.build_id = std::move(*id);
    k.table = KernelSymbolTable::load();
    return k;
  }();
  return kernel;
}

}  // namespace

const BuildId& running_kernel_build_id() { return running_kernel().build_id; }

void attach_running_kernel_symbols(Capture& capture) {
  if (!has_kernel_frames(capture)) return;
  const RunningKernel& kernel = running_kernel();
  if (!kernel.table) {
    attach_kernel_symbols(capture, nullptr, kernel.build_id,
                          "cannot read kernel symbols: " + kernel.table.error().message);
    return;
  }
  if (kernel.table->addresses_hidden()) {
    attach_kernel_symbols(capture, nullptr, kernel.build_id,
                          "/proc/kallsyms shows no addresses (kernel.kptr_restrict is set; "
                          "run as root with sysctl kernel.kptr_restrict=1 or 0)");
    return;
  }
  attach_kernel_symbols(capture, &*kernel.table, kernel.build_id, "");
}

}  // namespace gsymprof
