// userspace/base/content_hash.h - SHA-256 of a file's bytes: the identity of
// a module that has neither a GNU nor a Go build ID (build_id.h).
//
// SHA-256 (OpenSSL's libcrypto, Debian libssl-dev): collision-resistant, so
// a content identity stands for exactly one file content (a forged file
// cannot take another file's identity, unlike with xxhash or CRC), and fast
// here with the CPU's SHA instructions (1.8 GB/s measured with
// `openssl speed -evp sha256` on the 2-vCPU test VM: a 20 MB Go binary
// hashes in about 11 ms).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "gsym/base/expected.h"

namespace gsymprof {

using Sha256 = std::array<uint8_t, 32>;

Sha256 sha256_of(std::span<const uint8_t> bytes);
// Reads the descriptor from offset 0 to its end (pread: the file position
// is left alone); an error says what failed.
gsym::Expected<Sha256> sha256_of_descriptor(int fd);

}  // namespace gsymprof
