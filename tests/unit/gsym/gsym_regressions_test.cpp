// Regressions found by review of the DIE walker and the flat builder: a ULEB
// whose value bits pass bit 63, and a builder finalized halfway.
#include <doctest/doctest.h>

#include <dwarf.h>

#include <cstdint>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/convert/dwarf_die_walker.h"

using namespace gsym;

TEST_CASE("DIE walker: an abbreviation code with bits past 64 is an error, not another code") {
  const std::vector<uint8_t> abbrevs = {1, DW_TAG_compile_unit, 1, 0, 0, 2, DW_TAG_variable, 0, 0, 0, 0};
  // Code 1, then code 2 + 2^64 (bit 64 set in the tenth byte), then the end
  // of the unit DIE's children.
  const std::vector<uint8_t> unit = {1, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0};
  DwarfDieWalker walker;
  REQUIRE(walker.start(abbrevs, 0, unit, 0x100, {}));
  CHECK(walker.next().kind == DwarfDieWalker::Step::Die);
  CHECK(walker.next().kind == DwarfDieWalker::Step::End);
  CHECK_FALSE(walker.ok());

  SUBCASE("the largest code that fits, and zero padding, are fine") {
    // 2^63 + 2 in ten bytes is too large for the table, not overlong.
    const std::vector<uint8_t> big = {1, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0};
    REQUIRE(walker.start(abbrevs, 0, big, 0x100, {}));
    walker.next();
    CHECK(walker.next().kind == DwarfDieWalker::Step::End);
    CHECK(walker.error().find("undefined abbreviation") != std::string::npos);
    // Code 2 with three padding bytes.
    const std::vector<uint8_t> padded = {1, 0x82, 0x80, 0x80, 0x00, 0};
    REQUIRE(walker.start(abbrevs, 0, padded, 0x100, {}));
    walker.next();
    const DwarfDieWalker::Step step = walker.next();
    CHECK(step.kind == DwarfDieWalker::Step::Die);
    CHECK(step.tag == DW_TAG_variable);
    CHECK(walker.next().kind == DwarfDieWalker::Step::EndOfChildren);
    CHECK(walker.next().kind == DwarfDieWalker::Step::End);
    CHECK(walker.ok());
  }
}

TEST_CASE("builder: finalizing between adds does not change the result") {
  // A trailing zero-size function is extended to the end of its text range
  // when finalized; once another function follows it, it must not be.
  for (bool flat : {true, false}) {
    CAPTURE(flat);
    std::vector<std::vector<uint8_t>> outputs;
    for (bool finalize_in_between : {false, true}) {
      BuilderOptions options;
      options.text_ranges = {{0x1000, 0x2000}};
      Builder b(options);
      auto add = [&](const char* name, AddressRange range) {
        if (flat) {
          FlatFunction f;
          f.range = range;
          f.name = b.add_string(name);
          REQUIRE(b.add_flat_function(f).ok());
        } else {
          Function f;
          f.range = range;
          f.name = name;
          REQUIRE(b.add_function(f).ok());
        }
      };
      add("a", {0x1000, 0x1000});
      if (finalize_in_between) {
        CHECK(b.finalized_count() == 1);
        CHECK(b.finalize()[0].range == AddressRange{0x1000, 0x2000});
      }
      add("b", {0x1800, 0x1810});
      REQUIRE(b.finalize().size() == 2);
      CHECK(b.finalize()[0].range == AddressRange{0x1000, 0x1000});
      auto bytes = b.encode();
      REQUIRE(bytes.ok());
      outputs.push_back(*bytes);
    }
    CHECK(outputs[0] == outputs[1]);
  }
}
