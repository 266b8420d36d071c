#include "userspace/symbolize/keep_module_gsyms.h"

#include <sys/stat.h>

#include <map>
#include <utility>

#include "gsym/base/file_io.h"

namespace gsymprof {
namespace {

// Whether `path` on this host opens the same file as `local_file`.
bool same_file(const std::string& local_file, const std::string& path) {
  struct stat kept {}, host {};
  if (::stat(local_file.c_str(), &kept) != 0) return false;
  gsym::Expected<gsym::OpenFile> opened = gsym::open_regular_file(path);
  if (!opened) return false;
  host = opened->status;
  return kept.st_dev == host.st_dev && kept.st_ino == host.st_ino;
}

}  // namespace

KeptModuleGsyms keep_module_gsyms(const Capture& capture, GsymLocator& locator) {
  std::vector<bool> used(capture.modules.size(), false);
  for (const CaptureStack& stack : capture.stacks)
    for (const CaptureFrame& frame : stack.frames)
      if (frame.module >= 0 && !frame.kernel && static_cast<size_t>(frame.module) < used.size())
        used[static_cast<size_t>(frame.module)] = true;
  std::map<std::pair<std::string, BuildId>, ModuleReport> reports;
  for (size_t m = 0; m < capture.modules.size(); ++m) {
    const CaptureModule& module = capture.modules[m];
    // The vDSO (a "[vdso]" path) is gsymprof's own copy on every machine.
    if (!used[m] || module.build_id.empty() || module.local_file.empty() || module.path.starts_with("["))
      continue;
    auto key = std::make_pair(module.path, module.build_id);
    if (reports.contains(key) || same_file(module.local_file, module.path)) continue;
    ModuleReport report;
    report.path = module.path;
    locator.locate(module.build_id, module.local_file, report);
    reports.emplace(std::move(key), std::move(report));
  }
  KeptModuleGsyms out;
  for (auto& [key, report] : reports) out.reports.push_back(std::move(report));
  return out;
}

}  // namespace gsymprof
