#include "userspace/atomic_write.h"

#include "gsym/file_io.h"

namespace gsymprof {

gsym::Status write_file_atomically(const std::string& path, std::string_view bytes) {
  return gsym::write_file_atomically(path, bytes, 0666);
}

gsym::Expected<std::string> read_whole_file(const std::string& path, size_t max_bytes) {
  return gsym::read_file_text(path, max_bytes);
}

}  // namespace gsymprof
