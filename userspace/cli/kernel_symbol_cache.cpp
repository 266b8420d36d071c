#include "userspace/cli/kernel_symbol_cache.h"

#include <utility>

namespace gsymprof {
namespace {

constexpr const char* kSuffix = ".kallsyms";
// The image's text of a distribution kernel is about 2 MB here; no kernel's is 64 MiB.
constexpr uint64_t kMaxBytes = uint64_t{64} << 20;

}  // namespace

KernelSymbolCache::KernelSymbolCache(std::string dir) : cache_(std::move(dir), notes_) {}

std::optional<KernelSymbolTable> KernelSymbolCache::load(const BuildId& kernel, std::string_view boot_id) {
  std::optional<std::string> bytes = cache_.read_entry(kernel, kSuffix, kMaxBytes);
  if (!bytes) return std::nullopt;
  gsym::Expected<KernelSymbolTable> table = KernelSymbolTable::deserialize(*bytes, boot_id);
  // Another boot's, damaged, or not an image table (which would claim every
  // address): read again and rewritten.
  if (!table || !table->is_image_text()) return std::nullopt;
  return std::move(*table);
}

void KernelSymbolCache::save(const BuildId& kernel, std::string_view boot_id, const KernelSymbolTable& image_text) {
  (void)cache_.write_entry(kernel, kSuffix, image_text.serialize(boot_id));
}

}  // namespace gsymprof
