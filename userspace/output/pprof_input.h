// userspace/output/pprof_input.h - a pprof profile (profile.proto, gzipped as
// gsymprof and Go write it, or plain) read back as folded stacks, for
// `gsymprof diff`.
//
// Frames are named as gsymprof's folded output names them, so a pprof
// written by `--format pprof` reads back as the folded output of the same
// capture: root first, a sample's string label "comm" (gsymprof's) as the
// root frame when there is one, each location's lines outermost first with
// every line but the outermost marked inlined ("_[i]"), frames of the
// "[kernel.kallsyms]" mapping marked "_[k]". A location without lines is
// "MODULE+0xOFFSET" (MODULE the basename of its mapping's file, OFFSET its
// file offset) or "0xADDRESS" without a mapping. Names are sanitized as in
// folded output (sanitize_folded_name: controls escaped, ';' -> ':'). A
// function's name is its name, else its system name, else "[unknown]".
//
// The value read is the sample type named "samples" (gsymprof's and Go's CPU
// profiles: a count), else the profile's default_sample_type, else the last
// (what `go tool pprof` shows by default).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/output/folded_output.h"

namespace gsymprof {

struct PprofStacks {
  std::vector<FoldedLine> stacks;  // sorted bytewise by stack, equal stacks summed, no zero counts
  std::string sample_type;         // "TYPE/UNIT" of the value read ("samples/count")
};

// Whether `bytes` start with gzip's magic (1f 8b).
bool is_gzip(std::string_view bytes);

// `bytes` (gzip, concatenated members read as one) decompressed, to at most
// `max_bytes`, gsym::decompressed_bound of the input and 1 GiB, whichever is
// least. Errors are one line: corrupt, truncated, over the bound.
gsym::Expected<std::string> gunzip_bytes(std::string_view bytes, uint64_t max_bytes);

// Errors are one line without the file name: not gzip/protobuf, a
// decompressed size beyond the bound (gsym::decompressed_bound, at most 1
// GiB), a reference to a missing location, function, mapping or string, a
// negative value, counts overflowing 64 bits.
gsym::Expected<PprofStacks> folded_from_pprof(std::string_view bytes);

}  // namespace gsymprof
