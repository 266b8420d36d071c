// userspace/symbolize/demangle.h - symbol name -> human-readable name.
//
// Input: a raw (possibly mangled) symbol name. Output, by language:
//  - C++ Itanium ("_Z..."): what abi::__cxa_demangle and c++filt print,
//    clone suffixes included ("_Z3foov.constprop.0" -> "foo() [clone .constprop.0]");
//  - Rust legacy ("_ZN...17h<16 hex>E"): the path without the hash, "$..$"
//    escapes decoded, as rustfilt and perf print
//    ("_ZN3std2rt10lang_start17h0123456789abcdefE" -> "std::rt::lang_start");
//  - Rust v0 ("_R..."): the path with generic arguments, without crate
//    disambiguators ("_RNvNtCs1234_7mycrate3foo3bar" -> "mycrate::foo::bar").
// Rust ".llvm.<hash>" and other "." suffixes are dropped. A PLT stub's name
// ("_Znwm@plt", gsym/convert/plt_table.h) is the callee's name demangled, "@plt"
// kept ("operator new(unsigned long)@plt"). Any other name, one
// that fails to demangle, one whose demangling would exceed 1 MiB (a
// crafted name can expand exponentially), or a Rust v0 name with a binder
// of more than 64 lifetimes (libiberty loops over them even where it prints
// nothing) is returned unchanged.
// Reentrant: safe to call from several threads at once.
#pragma once

#include <string>
#include <string_view>

namespace gsymprof {

std::string demangle(std::string_view name);

}  // namespace gsymprof
