// Fuzz target for the ELF/DWARF converter and the module identity rule
// (GNU build ID, Go build ID note, content hash): the bytes are an ELF file
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
