// userspace/cli/kernel_symbol_cache.h - the running kernel's image
// text symbols kept in the GSYM cache between runs of one boot
// (process/kernel_symbols.h says when they are used), as
// <kernel build ID>.<converter version>.kallsyms, tied to the boot ID
// inside. The cache's rules hold: private directory, files ours, written
// atomically; anything else is not read. Here, where the process stage's
// interface and the symbolize stage's cache meet.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/process/kernel_symbols.h"
#include "userspace/symbolize/gsym_cache.h"

namespace gsymprof {

class KernelSymbolCache : public KernelSymbolStore {
 public:
  // `dir` "" = no cache.
  explicit KernelSymbolCache(std::string dir);

  std::optional<KernelSymbolTable> load(const BuildId& kernel, std::string_view boot_id) override;
  void save(const BuildId& kernel, std::string_view boot_id, const KernelSymbolTable& image_text) override;

 private:
  // A copy that cannot be used is read from /proc/kallsyms again and
  // rewritten: nothing to tell (the GSYM lookups note a refused cache).
  std::vector<std::string> notes_;
  GsymCache cache_;
};

}  // namespace gsymprof
