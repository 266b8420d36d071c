// PodArray: contents survive growth from realloc's blocks to a mapped one
// and the mapped one's growth (mremap), one element or a span at a time.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gsym/base/pod_array.h"

using gsym::PodArray;

namespace {

struct Row {
  uint64_t a;
  uint32_t b, c;
};

}  // namespace

TEST_CASE("pod array: elements survive growth past the mapping threshold") {
  PodArray<Row> rows;
  std::vector<Row> chunk;
  for (uint32_t i = 0; i < 1000; ++i) chunk.push_back({uint64_t(i) * 7, i, ~i});
  uint64_t count = 0;
  // 400,000 rows of 16 bytes: 6 MB, through realloc, one mmap and mremaps.
  while (count < 400000) {
    if (count % 3000 == 0) {
      rows.append(chunk);
      count += chunk.size();
    } else {
      rows.push_back({count * 7, uint32_t(count), ~uint32_t(count)});
      ++count;
    }
  }
  REQUIRE(rows.size() == count);
  bool intact = true;
  uint64_t i = 0;
  while (i < rows.size()) {
    if (i % 3000 == 0) {
      for (uint32_t k = 0; k < 1000; ++k, ++i)
        intact = intact && rows[i].a == uint64_t(k) * 7 && rows[i].b == k && rows[i].c == ~k;
    } else {
      intact = intact && rows[i].a == i * 7 && rows[i].b == uint32_t(i) && rows[i].c == ~uint32_t(i);
      ++i;
    }
  }
  CHECK(intact);
  rows.truncate(10);
  CHECK(rows.size() == 10);
  rows.push_back({1, 2, 3});
  CHECK(rows.back().c == 3);
  rows.clear();
  CHECK(rows.empty());
}
