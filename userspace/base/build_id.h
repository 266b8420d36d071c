// userspace/base/build_id.h - a GNU build ID: bytes; hex only at I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gsymprof {

class BuildId {
 public:
  BuildId() = default;
  explicit BuildId(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  static std::optional<BuildId> from_hex(std::string_view hex);

  bool empty() const { return bytes_.empty(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  std::string hex() const;

  bool operator==(const BuildId&) const = default;
  auto operator<=>(const BuildId&) const = default;

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace gsymprof
