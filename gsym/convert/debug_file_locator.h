// gsym/convert/debug_file_locator.h - finds the separate debug file of an ELF the way
// gdb does: by build ID under each debug directory
// (DIR/.build-id/xx/rest.debug), then by .gnu_debuglink next to the file, in
// its .debug/ subdirectory and under DIR/<the file's directory>. A candidate
// is trusted only if it has DWARF and its build ID equals the ELF's (or, when
// either has no build ID, its CRC-32 equals the debuglink's).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gsym/convert/elf_image.h"

namespace gsym {

struct DebugFileSearch {
  std::vector<std::string> debug_directories = {"/usr/lib/debug"};
};

// Returns the path of the debug file, or "" when none qualifies. `rejected`
// (optional) collects one line per candidate found but not trusted.
std::string find_debug_file(const ElfImage& image, const DebugFileSearch& search,
                            std::vector<std::string>* rejected = nullptr);

// Checks that `candidate` may stand for `image`'s DWARF (same build ID, or
// CRC when build IDs are unavailable). Error says why not.
Status check_debug_file(const ElfImage& image, const ElfImage& candidate,
                        const std::string& candidate_path);

// A DWARF 5 .debug_sup (section 7.3.6): version 5, is_supplementary, a file
// name and a checksum. In a file whose DIEs refer to a supplementary file
// (dwz -5) it names that file (is_supplementary 0, a name required); the
// supplementary file carries its own (is_supplementary 1) with the same
// checksum, which is how it is recognized. nullopt when malformed or of
// another version. Untrusted input: bounded reads only.
struct SupplementaryLink {
  bool is_supplementary = false;
  std::string name;
  std::vector<uint8_t> checksum;
};
std::optional<SupplementaryLink> parse_debug_sup(std::span<const uint8_t> section, bool little_endian);

// DIR/.build-id/xx/rest.debug for a build ID of at least 2 bytes ("" for a
// shorter one): where gdb, libdw and Debian's -dbgsym packages put it.
std::string build_id_debug_path(const std::string& debug_dir, std::span<const uint8_t> id);

}  // namespace gsym
