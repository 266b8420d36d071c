#include "userspace/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace gsymprof {

std::string demangle(std::string_view name) {
  if (!name.starts_with("_Z")) return std::string(name);
  // __cxa_demangle wants a NUL-terminated string; an embedded NUL would cut
  // the name short and give a wrong answer, so keep such names raw.
  if (name.find('\0') != std::string_view::npos) return std::string(name);
  std::string mangled(name);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !demangled) return mangled;
  return std::string(demangled.get());
}

}  // namespace gsymprof
