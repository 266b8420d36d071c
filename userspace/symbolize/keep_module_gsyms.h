// userspace/symbolize/keep_module_gsyms.h - `record`: GSYMs of the modules
// that `symbolize` could not open later, made while this process still holds
// their files.
//
// A live capture's modules carry a descriptor of the very file mapped
// (CaptureModule::local_file, kept open since the process was first seen).
// `symbolize` opens a module by its path on the host, which for a file only a
// container could see, a deleted file, or one replaced since, is missing or
// another file. Those modules' GSYMs are located or converted now, through
// the kept descriptor, into the cache (by identity), where `symbolize` on
// this machine finds them.
#pragma once

#include <string>
#include <vector>

#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof {

struct KeptModuleGsyms {
  // One per module that needed it (distinct path + identity), sorted:
  // where its GSYM is now, or why `symbolize` will not find one.
  std::vector<ModuleReport> reports;
};

// Modules some stack uses whose local_file is not the file at their path
// (by device and inode): located or converted through local_file.
KeptModuleGsyms keep_module_gsyms(const Capture& capture, GsymLocator& locator);

}  // namespace gsymprof
