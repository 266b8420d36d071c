// gsym/expected.h - the library's error model: nothing throws across the API;
// fallible calls return Expected<T>, whose Error says what went wrong and, for
// malformed input, at which byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "gsym/hex.h"  // hex_number, for the messages

namespace gsym {

struct Error {
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  std::string message;
  uint64_t offset = kNoOffset;  // byte offset in the input, when meaningful

  Error() = default;
  explicit Error(std::string msg, uint64_t off = kNoOffset)
      : message(std::move(msg)), offset(off) {}

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
