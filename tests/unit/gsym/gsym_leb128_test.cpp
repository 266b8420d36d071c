// The LEB128 codec (gsym/leb128.h): round trips, the one overflow rule, the
// byte limit each use chooses, truncation, and the fast variants agreeing
// with the checked decoders.
#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "gsym/format/leb128.h"

using namespace gsym;
using Bytes = std::vector<uint8_t>;

namespace {

// Decodes `bytes` as one ULEB (T unsigned) or SLEB (T signed); `used` = bytes consumed.
template <class T, unsigned MaxBytes = kMaxLebBytes>
leb128::Result decode(const Bytes& bytes, T& value, size_t& used) {
  const uint8_t* p = bytes.data();
  const uint8_t* end = bytes.data() + bytes.size();
  leb128::Result r;
  if constexpr (std::is_signed_v<T>)
    r = leb128::decode_sleb<MaxBytes>(p, end, value);
  else
    r = leb128::decode_uleb<MaxBytes>(p, end, value);
  used = static_cast<size_t>(p - bytes.data());
  return r;
}

}  // namespace

// Every value encodes, decodes (checked and fast) to itself, using every byte.
template <class T, class Append, class Decode, class Fast>
void check_round_trips(std::initializer_list<T> values, Append append, Decode decode, Fast fast) {
  for (T v : values) {
    CAPTURE(v);
    Bytes b;
    append(b, v);
    T out = 0;
    size_t used = 0;
    CHECK(decode(b, out, used) == leb128::Result::Ok);
    CHECK(out == v);
    CHECK(used == b.size());
    const uint8_t* p = b.data();
    T fast_out = 0;
    CHECK(fast(p, b.data() + b.size(), fast_out));
    CHECK(fast_out == v);
    CHECK(p == b.data() + b.size());
  }
}

TEST_CASE("leb128: shortest encodings round trip, fast and checked alike") {
  check_round_trips<uint64_t>({0, 1, 0x7f, 0x80, 300, 0x3fff, 0x4000, uint64_t{1} << 35,
                               (uint64_t{1} << 63) - 1, uint64_t{1} << 63,
                               std::numeric_limits<uint64_t>::max()},
                              leb128::append_uleb, decode<uint64_t>, leb128::read_uleb_fast);
  check_round_trips<int64_t>({0, 1, -1, 63, 64, -64, -65, 300, -300, int64_t{1} << 40,
                              -(int64_t{1} << 40), std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min()},
                             leb128::append_sleb, decode<int64_t>, leb128::read_sleb_fast);
  Bytes b;
  leb128::append_uleb(b, 300);
  CHECK(b == Bytes{0xac, 0x02});
  b.clear();
  leb128::append_sleb(b, -129);
  CHECK(b == Bytes{0xff, 0x7e});
}

TEST_CASE("leb128: bits past bit 63 are an error, padding is not") {
  uint64_t u = 0;
  int64_t s = 0;
  size_t used = 0;
  // 2^64 - 1 in ten bytes fits; bit 64 set in the tenth byte does not.
  CHECK(decode<uint64_t>({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, u, used) ==
        leb128::Result::Ok);
  CHECK(u == std::numeric_limits<uint64_t>::max());
  CHECK(decode<uint64_t>({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, u, used) ==
        leb128::Result::TooLong);
  CHECK(used == 10);  // after the byte that broke the rule
  // Zero padding within the limit.
  CHECK(decode<uint64_t>({0x82, 0x80, 0x80, 0x00}, u, used) == leb128::Result::Ok);
  CHECK(u == 2);
  // SLEB: the tenth byte may only repeat the sign.
  CHECK(decode<int64_t>({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}, s, used) ==
        leb128::Result::Ok);
  CHECK(s == std::numeric_limits<int64_t>::min());
  CHECK(decode<int64_t>({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, s, used) ==
        leb128::Result::Ok);
  CHECK(s == std::numeric_limits<int64_t>::max());
  CHECK(decode<int64_t>({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, s, used) ==
        leb128::Result::TooLong);
  CHECK(decode<int64_t>({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x3f}, s, used) ==
        leb128::Result::TooLong);
}

TEST_CASE("leb128: the byte limit, truncation, and skipping") {
  uint64_t u = 0;
  int64_t s = 0;
  size_t used = 0;
  const Bytes eleven = {0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
  CHECK(decode<uint64_t>(eleven, u, used) == leb128::Result::TooLong);
  CHECK(used == kMaxLebBytes);
  CHECK(decode<uint64_t, kMaxLebBytes + 1>(eleven, u, used) == leb128::Result::Ok);
  CHECK(u == 2);
  // With the longer limit the eleventh byte carries no value bits.
  CHECK(decode<uint64_t, kMaxLebBytes + 1>({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, u,
                               used) == leb128::Result::TooLong);
  CHECK(decode<int64_t, kMaxLebBytes + 1>({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, s,
                               used) == leb128::Result::Ok);
  CHECK(s == -1);
  // Truncated: the position ends at the end of the data.
  CHECK(decode<uint64_t>({0x80, 0x80}, u, used) == leb128::Result::Truncated);
  CHECK(used == 2);
  CHECK(decode<int64_t>({}, s, used) == leb128::Result::Truncated);
  const Bytes cut = {0x80};
  const uint8_t* p = cut.data();
  CHECK_FALSE(leb128::read_uleb_fast(p, cut.data() + cut.size(), u));
  // skip: ends within the limit, value unchecked.
  const Bytes big = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x05};
  p = big.data();
  CHECK(leb128::skip<kMaxLebBytes>(p, big.data() + big.size()));
  CHECK(p == big.data() + 10);
  p = eleven.data();
  CHECK_FALSE(leb128::skip<kMaxLebBytes>(p, eleven.data() + eleven.size()));
}
