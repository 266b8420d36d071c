// Transitional forwarders to gsym/file_io.h (the one home for file I/O).
#pragma once

#include <string>
#include <string_view>

#include "gsym/expected.h"

namespace gsymprof {

gsym::Status write_file_atomically(const std::string& path, std::string_view bytes);
gsym::Expected<std::string> read_whole_file(const std::string& path,
                                            size_t max_bytes = size_t{1} << 31);

}  // namespace gsymprof
