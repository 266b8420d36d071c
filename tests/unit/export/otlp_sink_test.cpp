// The OTLP sink's header variable parsing (OTEL_EXPORTER_OTLP_HEADERS format).
#include <doctest/doctest.h>

#include "userspace/export/otlp_sink.h"

using namespace gsymprof;

TEST_CASE("otlp headers: key=value pairs, trimmed, keys lower-cased, values percent-decoded") {
  auto headers = parse_otlp_headers(" X-Api-Key = s3cr%3Dt ,tenant=a%2Cb,, empty=");
  REQUIRE(headers.ok());
  CHECK(*headers == std::vector<std::pair<std::string, std::string>>{
                        {"x-api-key", "s3cr=t"}, {"tenant", "a,b"}, {"empty", ""}});
  CHECK(parse_otlp_headers("")->empty());
  CHECK(parse_otlp_headers("a=%4")->at(0).second == "%4");  // not an escape: kept
}

TEST_CASE("otlp headers: malformed ones are refused, never half taken") {
  CHECK(!parse_otlp_headers("novalue").ok());
  CHECK(!parse_otlp_headers("=value").ok());
  CHECK(!parse_otlp_headers("bad key=v").ok());
  CHECK(!parse_otlp_headers("k=line%0Abreak").ok());  // a decoded newline would split the header
}
