// gsym/base/expected.h - the library's error model: nothing throws across the
// API; fallible calls return Expected<T>, whose Error says what went wrong
// (a message for people), what kind of failure it is (a code for programs,
// set where the error starts) and, for malformed input, at which byte offset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "gsym/base/hex.h"  // hex_number, for the messages

namespace gsym {

// What kind of failure an Error is. Callers decide by the code, never by the
// message text (messages are for people and may change).
enum class ErrorCode : uint8_t {
  Unspecified = 0,  // no caller decides on it (an error made from a message alone)
  NotFound,         // no such file or directory (ENOENT, ENOTDIR), or no such entry
  Io,               // another failed system call; Error::sys_errno says which
  Refused,          // a file not taken: not a regular file, a symlink not followed, too large
  Malformed,        // bytes that break their format; what an Error with an offset is
  Unsupported,      // well formed, but a version or kind this code does not read
  NoFunctions,      // conversion: the input describes no code at all
};

// Stable names ("not-found", "malformed", ...), for files that keep an
// error's kind; error_code_from_name(to_string(c)) == c.
std::string_view to_string(ErrorCode code);
std::optional<ErrorCode> error_code_from_name(std::string_view name);

struct Error {
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  std::string message;
  uint64_t offset = kNoOffset;  // byte offset in the input, when meaningful
  ErrorCode code = ErrorCode::Unspecified;
  int sys_errno = 0;            // errno of the failed call (NotFound, Io, Refused), else 0

  Error() = default;
  explicit Error(std::string msg) : message(std::move(msg)) {}
  // Malformed input at byte `off` (kNoOffset: no offset, Unspecified).
  explicit Error(std::string msg, uint64_t off)
      : message(std::move(msg)),
        offset(off),
        code(off == kNoOffset ? ErrorCode::Unspecified : ErrorCode::Malformed) {}
  explicit Error(ErrorCode c, std::string msg, uint64_t off = kNoOffset)
      : message(std::move(msg)), offset(off), code(c) {}

  // A failed system call: NotFound for ENOENT and ENOTDIR, else Io; the
  // message is the caller's ("PATH: cannot open: " + strerror(err)).
  static Error from_errno(int err, std::string msg);

  // The same error (code, errno, offset) with `prefix` put before its message.
  Error prefixed(std::string_view prefix) const&;
  Error prefixed(std::string_view prefix) &&;

  // "message" or "message at offset 0x1c"
  std::string to_string() const;
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Expected<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}
  static Status success() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace gsym
