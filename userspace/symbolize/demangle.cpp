#include "userspace/symbolize/demangle.h"

// libiberty (GCC's demangler, also behind c++filt, gdb and libstdc++'s
// __cxa_demangle) rather than code of our own: it is well kept and decodes
// C++, Rust legacy and Rust v0 through one API. glibc's <string.h> declares
// basename; without this libiberty.h declares a conflicting one.
#define HAVE_DECL_BASENAME 1
#include <libiberty/demangle.h>

#include <csetjmp>
#include <cstddef>
#include <new>

namespace gsymprof {
namespace {

// Generous for real names (the longest in libLLVM, libstdc++ and Rust's std
// demangle to < 5 KB; rustc-demangle's own limit is 1 MB), yet it bounds a
// crafted 300-byte name whose back-references double at each level.
constexpr std::size_t kMaxDemangled = std::size_t{1} << 20;

// Parameter lists and cv-qualifiers, as __cxa_demangle prints them; no
// DMGL_VERBOSE, so Rust hashes and crate disambiguators are left out.
constexpr int kOptions = DMGL_PARAMS | DMGL_ANSI;

struct Sink {
  std::string text;
  std::jmp_buf stop;
};

extern "C" {
// The callback demanglers allocate nothing (their state is on the stack), so
// leaving one by longjmp is safe; nothing else stops an exponential print.
static void append_demangled(const char* piece, std::size_t size, void* opaque) {
  Sink& sink = *static_cast<Sink*>(opaque);
  bool full = size > kMaxDemangled - sink.text.size();
  if (!full) {
    // An exception must not unwind through libiberty's C frames.
    try {
      sink.text.append(piece, size);
    } catch (const std::bad_alloc&) {
      full = true;
    }
  }
  if (full) std::longjmp(sink.stop, 1);
}
}

using CallbackDemangler = int (*)(const char*, int, demangle_callbackref, void*);

// True with sink.text set if `demangler` decodes `mangled` within the limit.
// No local of this frame changes after setjmp, so none is indeterminate.
bool run(CallbackDemangler demangler, const char* mangled, Sink& sink) {
  sink.text.clear();
  if (setjmp(sink.stop) != 0) return false;
  return demangler(mangled, kOptions, append_demangled, &sink) != 0;
}

}  // namespace

namespace {

std::string demangle_symbol(std::string_view name) {
  if (!name.starts_with("_Z") && !name.starts_with("_R")) return std::string(name);
  // The demanglers want a NUL-terminated string; an embedded NUL would cut
  // the name short and give a wrong answer, so keep such names raw.
  if (name.find('\0') != std::string_view::npos) return std::string(name);
  std::string mangled(name);
  Sink sink;
  // cplus_demangle(DMGL_AUTO)'s order, through its reentrant, allocation-free
  // callback engines: Rust first, since a legacy Rust name ("_ZN...17h<hash>E")
  // is also valid Itanium C++ (which would print the hash and the escapes).
  // rust_demangle_callback accepts only Rust names (legacy: a hash of 16 hex
  // digits, at least 5 distinct) and reads no global style; nor does the v3
  // engine, which with kOptions (no DMGL_TYPES) accepts only "_Z" encodings.
  if (run(rust_demangle_callback, mangled.c_str(), sink)) return std::move(sink.text);
  if (name.starts_with("_Z") && run(cplus_demangle_v3_callback, mangled.c_str(), sink))
    return std::move(sink.text);
  return mangled;
}

}  // namespace

std::string demangle(std::string_view name) {
  // A PLT stub is named after what it calls (`_Znwm@plt`, gsym/convert/plt_table.h):
  // that name demangled, the suffix kept, as objdump -C and perf print it.
  if (constexpr std::string_view kPlt = "@plt"; name.ends_with(kPlt))
    return demangle_symbol(name.substr(0, name.size() - kPlt.size())) + std::string(kPlt);
  return demangle_symbol(name);
}

}  // namespace gsymprof
