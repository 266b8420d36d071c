#include <doctest/doctest.h>

#include "userspace/base/build_id.h"

using gsymprof::BuildId;

TEST_CASE("BuildId hex round trip") {
  auto id = BuildId::from_hex("00ff10Ab");
  REQUIRE(id.has_value());
  CHECK(id->bytes().size() == 4);
  CHECK(id->hex() == "00ff10ab");
  CHECK_FALSE(BuildId::from_hex("abc").has_value());
  CHECK_FALSE(BuildId::from_hex("zz").has_value());
  CHECK(BuildId::from_hex("")->empty());
}
