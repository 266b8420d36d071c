// Fuzz target for the ELF/DWARF converter, the module identity rule (GNU
// build ID, Go build ID note, content hash) and the CPython runtime's
// symbols (3.13's debug offsets among them): the bytes are an ELF file
// (given to the converter through a memfd path, as it reads files). Any crash, hang
// or sanitizer report is a finding, and so is an output file that our own
// reader cannot parse and verify.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gsym/convert/convert.h"
#include "gsym/reader/reader.h"
#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/python_runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      close(fd);
      return 0;
    }
    done += static_cast<size_t>(n);
  }
  // The identity read from the descriptor is the one read from the bytes,
  // and any ELF file has one (a note, else its content hash).
  gsym::Expected<gsymprof::BuildId> from_fd = gsymprof::read_elf_identity_fd(fd, "fuzz");
  gsym::Expected<gsymprof::BuildId> from_bytes =
      gsymprof::read_elf_identity(std::span<const uint8_t>(data, size));
  if (from_fd.ok() != from_bytes.ok()) std::abort();
  if (from_fd.ok() && (from_fd->empty() || *from_fd != *from_bytes)) std::abort();
  (void)gsymprof::read_module_identity(std::span<const uint8_t>(data, size));
  // The CPython symbols (and 3.13's debug offsets, a layout taken from the
  // file) read from the descriptor are the ones read from the bytes.
  gsym::Expected<std::optional<gsymprof::PythonSymbols>> python_fd = gsymprof::read_python_symbols_fd(fd);
  gsym::Expected<std::optional<gsymprof::PythonSymbols>> python_bytes =
      gsymprof::read_python_symbols(std::span<const uint8_t>(data, size));
  if (python_fd.ok() != python_bytes.ok()) std::abort();
  if (python_fd.ok() && python_fd->has_value() != python_bytes->has_value()) std::abort();
  if (python_fd.ok() && python_fd->has_value()) {
    const gsymprof::PythonSymbols& a = **python_fd;
    const gsymprof::PythonSymbols& b = **python_bytes;
    if (a.runtime_vaddr != b.runtime_vaddr || a.eval_vaddr != b.eval_vaddr || a.eval_size != b.eval_size ||
        a.hexversion != b.hexversion || a.debug_layout != b.debug_layout)
      std::abort();
    (void)gsymprof::python_layout_for(a);
  }
  gsym::ConvertOptions options;
  options.threads = 1;
  options.search_debug_file = false;  // never wander the file system
  // The profiler names too (PLT stubs, code labels), as the cache converts:
  // a superset of the default path.
  options.plt_names = options.code_labels = options.entry_name = options.signal_frames = true;
  gsym::Expected<std::vector<uint8_t>> bytes =
      gsym::convert_elf("/proc/self/fd/" + std::to_string(fd), options);
  close(fd);
  if (bytes.ok()) {
    gsym::Expected<gsym::Reader> reader = gsym::Reader::parse(*bytes);
    if (!reader.ok() || !reader->verify().ok()) std::abort();
  }
  return 0;
}
