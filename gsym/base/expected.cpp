// gsym/base/expected.cpp - Error: codes, their names, formatting.
#include "gsym/base/expected.h"

#include <cerrno>

namespace gsym {

namespace {

constexpr std::pair<ErrorCode, std::string_view> kCodeNames[] = {
    {ErrorCode::Unspecified, "unspecified"}, {ErrorCode::NotFound, "not-found"},
    {ErrorCode::Io, "io"},                   {ErrorCode::Refused, "refused"},
    {ErrorCode::Malformed, "malformed"},     {ErrorCode::Unsupported, "unsupported"},
    {ErrorCode::NoFunctions, "no-functions"},
};

}  // namespace

std::string_view to_string(ErrorCode code) {
  for (const auto& [c, name] : kCodeNames)
    if (c == code) return name;
  return "unspecified";
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) {
  for (const auto& [c, n] : kCodeNames)
    if (n == name) return c;
  return std::nullopt;
}

Error Error::from_errno(int err, std::string msg) {
  Error e(err == ENOENT || err == ENOTDIR ? ErrorCode::NotFound : ErrorCode::Io, std::move(msg));
  e.sys_errno = err;
  return e;
}

Error Error::prefixed(std::string_view prefix) const& {
  Error e = *this;
  e.message.insert(0, prefix);
  return e;
}

Error Error::prefixed(std::string_view prefix) && {
  message.insert(0, prefix);
  return std::move(*this);
}

std::string Error::to_string() const {
  if (offset == kNoOffset) return message;
  return message + " at offset " + hex_number(offset);
}

}  // namespace gsym
