// ELF/DWARF -> GSYM: picks the DWARF source (the ELF or its debug file),
// converts compile units in parallel (one libdw handle per thread), replays
// their results into the Builder in unit order, then adds symbol-table
// functions, as llvm-gsymutil --convert does.
#include "gsym/convert.h"

#include "gsym/atomic_file.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "gsym/builder.h"
#include "gsym/debug_file_locator.h"
#include "gsym/dwarf_unit_converter.h"
#include "gsym/elf_image.h"

namespace gsym {

namespace {

std::string dwarf_error() {
  const char* msg = dwarf_errmsg(-1);
  return msg ? msg : "unknown libdw error";
}

struct DwarfHandle {
  Dwarf* dwarf = nullptr;
  DwarfHandle() = default;
  DwarfHandle(const DwarfHandle&) = delete;
  DwarfHandle& operator=(const DwarfHandle&) = delete;
  ~DwarfHandle() {
    if (dwarf) dwarf_end(dwarf);
  }
};

// The compile units in .debug_info, in section order: unit DIE offsets from
// libdw's unit list (which tells type units apart), unit ends from the unit
// headers.
Expected<std::vector<UnitLocation>> list_units(Dwarf* dwarf, uint64_t* bad_units) {
  struct Extent {
    Dwarf_Off die_offset, header_offset, end_offset;
  };
  std::vector<Extent> extents;
  for (Dwarf_Off off = 0, next = 0;; off = next) {
    size_t header_size = 0;
    if (dwarf_next_unit(dwarf, off, &next, &header_size, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr) != 0)
      break;
    extents.push_back({off + header_size, off, next});
  }
  std::vector<UnitLocation> units;
  Dwarf_CU* cu = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie, subdie;
  for (;;) {
    int rc = dwarf_get_units(dwarf, cu, &next, &version, &unit_type, &cudie, &subdie);
    if (rc == 1) break;
    if (rc < 0) {
      // A unit header we cannot read ends the list: later units cannot be
      // located without it.
      ++*bad_units;
      break;
    }
    cu = next;
    if (unit_type == DW_UT_type || unit_type == DW_UT_split_type) continue;
    const Dwarf_Off die_offset = dwarf_dieoffset(&cudie);
    auto it = std::partition_point(extents.begin(), extents.end(),
                                   [&](const Extent& e) { return e.die_offset < die_offset; });
    if (it == extents.end() || it->die_offset != die_offset) {
      ++*bad_units;
      break;
    }
    units.push_back({it->header_offset, die_offset, it->end_offset});
  }
  return units;
}

class Replayer {
 public:
  Replayer(Builder& builder, const ConvertOptions& options, ConvertStats& stats)
      : builder_(builder), options_(options), stats_(stats) {}

  void replay(UnitOutput& unit) {
    for (const std::string& w : unit.warnings)
      if (options_.warning) options_.warning(w);
    if (unit.skipped) {
      ++stats_.skipped_units;
      return;
    }
    file_remap_.assign(unit.files.size() + 1, UINT32_MAX);
    file_remap_[0] = 0;
    string_offsets_.assign(unit.strings.size(), UINT32_MAX);
    for (const UnitOp& op : unit.ops) {
      switch (op.kind) {
        case UnitOp::String:
          string_offsets_[op.index] = builder_.add_string(unit.strings[op.index]);
          break;
        case UnitOp::File:
          file_remap_[op.index] = builder_.add_file(unit.files[op.index - 1]);
          break;
        case UnitOp::Function:
          add(unit, unit.functions[op.index]);
          break;
      }
    }
    stats_.line_rows += unit.line_rows;
    stats_.inline_nodes += unit.inline_nodes_total;
  }

 private:
  uint32_t global_file(const UnitOutput& unit, uint32_t local) {
    if (local >= file_remap_.size()) return 0;
    if (file_remap_[local] == UINT32_MAX) file_remap_[local] = builder_.add_file(unit.files[local - 1]);
    return file_remap_[local];
  }

  uint32_t string_offset(const UnitOutput& unit, uint32_t local) {
    if (local >= string_offsets_.size()) return 0;
    if (string_offsets_[local] == UINT32_MAX) string_offsets_[local] = builder_.add_string(unit.strings[local]);
    return string_offsets_[local];
  }

  // Local string and file indexes -> the builder's, in place (each unit
  // function is replayed once).
  void add(UnitOutput& unit, const UnitOutput::Function& f) {
    std::span<LineEntry> lines(unit.lines.data() + f.lines_begin, f.lines_count);
    for (LineEntry& row : lines) row.file = global_file(unit, row.file);
    std::span<FlatInlineNode> nodes(unit.inline_nodes.data() + f.nodes_begin, f.nodes_count);
    for (FlatInlineNode& node : nodes) {
      node.name = node.name ? string_offset(unit, node.name - 1) : 0;
      node.call_file = global_file(unit, node.call_file);
    }
    FlatFunction flat;
    flat.range = f.range;
    flat.name = string_offset(unit, f.name);
    flat.lines = lines;
    flat.inline_nodes = nodes;
    flat.inline_ranges = unit.inline_ranges;
    Status s = builder_.add_flat_function(flat);
    if (!s) {
      if (options_.warning)
        options_.warning("function " + std::string(unit.strings[f.name]) + " dropped: " + s.error().message);
      return;
    }
    ++stats_.dwarf_functions;
  }

  Builder& builder_;
  const ConvertOptions& options_;
  ConvertStats& stats_;
  std::vector<uint32_t> file_remap_;
  std::vector<uint32_t> string_offsets_;
};

Status convert_dwarf(const ElfImage& dwarf_image, const UnitConverterOptions& unit_options,
                     const ConvertOptions& options, Builder& builder, ConvertStats& stats) {
  const std::string& path = dwarf_image.path();
  DwarfHandle main_handle;
  main_handle.dwarf = dwarf_begin_elf(dwarf_image.elf(), DWARF_C_READ, nullptr);
  if (!main_handle.dwarf) return Error(path + ": cannot read DWARF: " + dwarf_error());
  uint64_t bad_units = 0;
  Expected<std::vector<UnitLocation>> listed = list_units(main_handle.dwarf, &bad_units);
  if (!listed) return Error(path + ": " + listed.error().message);
  const std::vector<UnitLocation>& units = *listed;
  if (bad_units) {
    if (units.empty()) return Error(path + ": corrupt DWARF: cannot read the first unit header: " + dwarf_error());
    stats.skipped_units += bad_units;
    if (options.warning)
      options.warning(path + ": corrupt unit header after " + std::to_string(units.size()) +
                      " units; the rest of .debug_info is skipped");
  }
  stats.compile_units = units.size();

  DwarfLineSections sections;
  sections.little_endian = dwarf_image.little_endian();
  for (auto [name, target] : {std::pair{".debug_line", &sections.debug_line},
                              std::pair{".debug_line_str", &sections.debug_line_str},
                              std::pair{".debug_str", &sections.debug_str}}) {
    Expected<std::span<const uint8_t>> bytes = dwarf_image.section_bytes(name);
    if (!bytes) return Error(path + ": " + bytes.error().message);
    *target = *bytes;
  }

  UnitConverterOptions tree_options = unit_options;
  for (auto [name, target] : {std::pair{".debug_info", &tree_options.debug_info},
                              std::pair{".debug_abbrev", &tree_options.debug_abbrev}}) {
    Expected<std::span<const uint8_t>> bytes = dwarf_image.section_bytes(name);
    if (!bytes) return Error(path + ": " + bytes.error().message);
    *target = *bytes;
  }

  Replayer replayer(builder, options, stats);
  unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, units.size()));
  auto report = [&](size_t done) {
    if (options.progress && (done % 64 == 0 || done == units.size()))
      options.progress(done, units.size());
  };

  if (threads <= 1) {
    DwarfUnitConverter converter(main_handle.dwarf, sections, tree_options);
    for (size_t i = 0; i < units.size(); ++i) {
      UnitOutput out = converter.convert(units[i]);
      replayer.replay(out);
      report(i + 1);
    }
    return Status::success();
  }

  // Workers take units in order from a shared counter; this thread replays
  // finished units strictly in unit order, so the result never depends on
  // which worker finished first.
  // Every worker gets its own Dwarf handle (libdw handles are not
  // thread-safe), all over the one Elf: its sections were decompressed once,
  // in place, by the first dwarf_begin_elf, and are only read from here on.
  std::vector<std::unique_ptr<DwarfHandle>> handles;
  for (unsigned t = 0; t < threads; ++t) {
    auto h = std::make_unique<DwarfHandle>();
    h->dwarf = t == 0 ? std::exchange(main_handle.dwarf, nullptr)
                      : dwarf_begin_elf(dwarf_image.elf(), DWARF_C_READ, nullptr);
    if (!h->dwarf) return Error(path + ": cannot read DWARF: " + dwarf_error());
    handles.push_back(std::move(h));
  }
  std::vector<std::optional<UnitOutput>> results(units.size());
  std::mutex mutex;
  std::condition_variable ready;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&](Dwarf* dwarf) {
    DwarfUnitConverter converter(dwarf, sections, tree_options);
    for (;;) {
      if (stop) return;
      const size_t i = next.fetch_add(1);
      if (i >= units.size()) return;
      UnitOutput out = converter.convert(units[i]);
      std::lock_guard<std::mutex> lock(mutex);
      results[i] = std::move(out);
      ready.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, handles[t]->dwarf);
  for (size_t i = 0; i < units.size(); ++i) {
    std::optional<UnitOutput> out;
    {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return results[i].has_value() || stop.load(); });
      if (!results[i]) break;
      out = std::move(results[i]);
      results[i].reset();
    }
    replayer.replay(*out);
    report(i + 1);
  }
  stop = true;
  for (std::thread& t : pool) t.join();
  return Status::success();
}

}  // namespace

Expected<std::vector<uint8_t>> convert_elf(const std::string& elf_path,
                                           const ConvertOptions& options, ConvertStats* stats_out) {
  ConvertStats stats;
  Expected<ElfImage> opened = ElfImage::open(elf_path);
  if (!opened) return Error(elf_path + ": " + opened.error().message);
  const ElfImage& image = *opened;

  // Where the DWARF comes from.
  std::optional<ElfImage> debug_image;
  if (!options.debug_file.empty()) {
    Expected<ElfImage> d = ElfImage::open(options.debug_file);
    if (!d) return Error(options.debug_file + ": " + d.error().message);
    const std::vector<uint8_t> want = image.build_id(), have = d->build_id();
    if (!want.empty() && !have.empty() && want != have)
      return Error(options.debug_file + ": build ID " + build_id_hex(have) + " does not match " +
                   elf_path + " (" + build_id_hex(want) + ")");
    if (!d->has_dwarf()) return Error(options.debug_file + ": has no DWARF");
    debug_image = std::move(*d);
  } else if (!image.has_dwarf() && options.search_debug_file) {
    DebugFileSearch search;
    search.debug_directories = options.debug_directories;
    std::vector<std::string> rejected;
    std::string found = find_debug_file(image, search, &rejected);
    if (options.warning)
      for (const std::string& r : rejected) options.warning("debug file candidate rejected: " + r);
    if (!found.empty()) {
      Expected<ElfImage> d = ElfImage::open(found);
      if (!d) return Error(found + ": " + d.error().message);
      debug_image = std::move(*d);
    }
  }
  const ElfImage* dwarf_image = debug_image ? &*debug_image : (image.has_dwarf() ? &image : nullptr);
  if (debug_image) stats.debug_file_used = debug_image->path();

  BuilderOptions builder_options;
  builder_options.endian = image.little_endian() ? Endian::Little : Endian::Big;
  builder_options.build_id = image.build_id();
  if (builder_options.build_id.size() > 20) builder_options.build_id.clear();
  builder_options.base_address = image.first_load_address();
  std::vector<AddressRange> text = image.executable_ranges();
  if (text.empty() && debug_image) text = debug_image->executable_ranges();
  builder_options.text_ranges = text;
  Builder builder(builder_options);

  if (dwarf_image) {
    UnitConverterOptions unit_options;
    unit_options.text_ranges = text;
    unit_options.inline_info = options.inline_info;
    Status s = convert_dwarf(*dwarf_image, unit_options, options, builder, stats);
    if (!s) return s.error();
  }

  // Symbols: the DWARF file's .symtab (what LLVM reads when given the debug
  // file), else the ELF's .symtab, else its .dynsym (LLVM ignores .dynsym).
  bool used_dynsym = false;
  std::vector<ElfSymbol> symbols;
  if (debug_image) symbols = debug_image->function_symbols(&used_dynsym);
  if (symbols.empty() || used_dynsym) symbols = image.function_symbols(&used_dynsym);
  stats.used_dynsym = used_dynsym && !symbols.empty();
  auto in_text = [&](uint64_t addr) {
    auto it = std::upper_bound(text.begin(), text.end(), addr,
                               [](uint64_t a, const AddressRange& r) { return a < r.start; });
    return it != text.begin() && std::prev(it)->contains(addr);
  };
  for (const ElfSymbol& sym : symbols) {
    if (sym.name.empty() || !in_text(sym.value)) continue;
    if (sym.size > UINT32_MAX || sym.value > UINT64_MAX - sym.size) continue;
    FlatFunction f;
    f.range = {sym.value, sym.value + sym.size};
    f.name = builder.add_string(sym.name);
    if (builder.add_flat_function(f)) ++stats.symbol_functions;
  }

  if (builder.function_count() == 0)
    return Error(elf_path + ": no functions found (" +
                 (dwarf_image ? std::string("DWARF and symbol tables describe no code")
                              : std::string("no DWARF, no debug file and no function symbols")) +
                 ")");
  Expected<std::vector<uint8_t>> bytes = builder.encode();
  if (!bytes) return Error(elf_path + ": " + bytes.error().message);
  stats.functions_written = builder.finalized_count();
  if (stats_out) *stats_out = stats;
  return bytes;
}

Status convert_elf_to_file(const std::string& elf_path, const std::string& out_path,
                           const ConvertOptions& options, ConvertStats* stats) {
  Expected<std::vector<uint8_t>> bytes = convert_elf(elf_path, options, stats);
  if (!bytes) return bytes.error();
  return write_file_atomically(out_path, *bytes, 0644);
}

}  // namespace gsym
