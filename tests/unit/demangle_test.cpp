#include <doctest/doctest.h>

#include <string>

#include "userspace/demangle.h"

using gsymprof::demangle;

TEST_CASE("demangle: Itanium C++ names") {
  CHECK(demangle("_Z3fooi") == "foo(int)");
  CHECK(demangle("_ZL3bari") == "bar(int)");
  CHECK(demangle("_ZN2ns3BarIiE3getEv") == "ns::Bar<int>::get()");
  CHECK(demangle("_ZNKSt6vectorIiSaIiEE4sizeEv") == "std::vector<int, std::allocator<int> >::size() const");
  CHECK(demangle("_ZZ4mainENKUlvE_clEv") == "main::{lambda()#1}::operator()() const");
}

TEST_CASE("demangle: gcc clone suffixes") {
  CHECK(demangle("_Z3foov.constprop.0") == "foo() [clone .constprop.0]");
  CHECK(demangle("_Z3barv.cold") == "bar() [clone .cold]");
}

TEST_CASE("demangle: other names are kept raw") {
  CHECK(demangle("main") == "main");
  CHECK(demangle("") == "");
  CHECK(demangle("__libc_start_main") == "__libc_start_main");
  CHECK(demangle("_Zinvalid") == "_Zinvalid");
  CHECK(demangle("_Z") == "_Z");
  CHECK(demangle("compute.constprop.0") == "compute.constprop.0");
  std::string with_nul("_Z3fooi\0x", 9);
  CHECK(demangle(with_nul) == with_nul);
}
