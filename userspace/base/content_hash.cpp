#include "userspace/base/content_hash.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace gsymprof {
namespace {

struct DigestContext {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  void update(const void* data, size_t size) {
    ok = ok && EVP_DigestUpdate(ctx.get(), data, size) == 1;
  }
  bool finish(Sha256& out) {
    unsigned int size = 0;
    ok = ok && EVP_DigestFinal_ex(ctx.get(), out.data(), &size) == 1 && size == out.size();
    return ok;
  }
};

}  // namespace

Sha256 sha256_of(std::span<const uint8_t> bytes) {
  Sha256 out{};
  DigestContext digest;
  digest.update(bytes.data(), bytes.size());
  digest.finish(out);  // fails only without memory; the zero digest then matches nothing real
  return out;
}

gsym::Expected<Sha256> sha256_of_descriptor(int fd) {
  DigestContext digest;
  std::vector<uint8_t> buffer(1 << 20);
  off_t offset = 0;
  for (;;) {
    ssize_t got = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return gsym::Error::from_errno(err, std::string("cannot read for its SHA-256: ") + std::strerror(err));
    }
    if (got == 0) break;
    digest.update(buffer.data(), static_cast<size_t>(got));
    offset += got;
  }
  Sha256 out{};
  if (!digest.finish(out)) return gsym::Error("SHA-256 failed (libcrypto)");
  return out;
}

}  // namespace gsymprof
