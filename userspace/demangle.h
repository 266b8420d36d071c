// userspace/demangle.h - symbol name -> human-readable name.
//
// Input: a raw (possibly mangled) symbol name. Output: the C++ Itanium
// demangling (abi::__cxa_demangle) for names starting with "_Z", including
// clone suffixes ("_Z3foov.constprop.0" -> "foo() [clone .constprop.0]");
// any other name, or one that fails to demangle, is returned unchanged.
#pragma once

#include <string>
#include <string_view>

namespace gsymprof {

std::string demangle(std::string_view name);

}  // namespace gsymprof
