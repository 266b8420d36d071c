// gsym/reader/dump.h - the text dump of a GSYM file (`gsymprof gsym dump`): header,
// address table, file table and every function record decoded in full.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "gsym/reader/reader.h"

namespace gsym {

struct DumpOptions {
  // Appends a name, path or message taken from the file to `out` (the CLI
  // escapes control characters for the terminal); unset: appended as is.
  std::function<void(std::string& out, std::string_view text)> append_text;
};

// Writes the dump of `reader` to `out`, in chunks. A record that does not
// decode is dumped as its error and the dump goes on; the first such error
// is returned ("function[i] at 0x…: …"), after everything is written. Write
// errors are left in the stream's state.
Status write_dump(const Reader& reader, std::ostream& out, const DumpOptions& options = {});

}  // namespace gsym
