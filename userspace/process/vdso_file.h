// userspace/process/vdso_file.h - stage: the kernel's vDSO -> an ELF file on disk.
//
// Code in the vDSO (clock_gettime, gettimeofday, getcpu, ...) runs in every
// process, but the vDSO has no file, so the file-based stages (build ID and
// segments, CFI for unwinding, GSYM conversion) cannot open it. Every process
// of one kernel and ABI maps the same image, so gsymprof's own copy
// (getauxval(AT_SYSINFO_EHDR), as long as its [vdso] mapping) stands for
// the target's; its build ID is checked like any module's, and a [vdso]
// mapping of another size (another ABI) is not taken for it.
#pragma once

#include <cstdint>
#include <string>

#include "gsym/base/expected.h"

namespace gsymprof {

inline constexpr const char* kVdsoPath = "[vdso]";

struct VdsoFile {
  std::string path;   // "/proc/self/fd/N" of a sealed memfd holding the copy
  uint64_t size = 0;  // bytes of the image (= its [vdso] mapping)
};

// gsymprof's own vDSO, written once per run. Thread-safe.
const gsym::Expected<VdsoFile>& own_vdso_file();

// The file to open for a module at `module_path` as /proc/PID/maps names it:
// the vDSO's copy for "[vdso]" ("" when it cannot be made), else the path.
std::string openable_module_path(const std::string& module_path);

}  // namespace gsymprof
