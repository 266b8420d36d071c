#include "userspace/symbolize/demangle.h"

// libiberty (GCC's demangler, also behind c++filt, gdb and libstdc++'s
// __cxa_demangle) rather than code of our own: it is well kept and decodes
// C++, Rust legacy and Rust v0 through one API. glibc's <string.h> declares
// basename; without this libiberty.h declares a conflicting one.
#define HAVE_DECL_BASENAME 1
#include <libiberty/demangle.h>

#include <cctype>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
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

// Rust v0 names are checked before libiberty sees them. Its demangler
// (Debian 12's, binutils 2.40) loops once per lifetime a binder
// ("G<base-62 number>_") declares, even where it prints nothing (inside an
// impl path), so a 40-byte name in a user's binary (about 5.7e10
// lifetimes) kept it looping past the minute we waited; rustc writes
// binders of a few lifetimes. The check walks the grammar (RFC 2603,
// const generics included), skipping identifiers by their lengths, so that a
// "G" inside one is not taken for a binder. A name with a binder of more
// than kMaxBoundLifetimes, nested deeper than kMaxDepth or not parsed at all
// is left raw (libiberty would have to parse it too).
class RustV0Check {
 public:
  explicit RustV0Check(std::string_view name) : s_(name) {}

  bool symbol() {
    if (!eat('_') || !eat('R')) return false;
    while (next_is_digit()) ++pos_;  // the encoding version
    if (!path(0)) return false;
    if (pos_ < s_.size() && s_[pos_] >= 'A' && s_[pos_] <= 'Z' && !path(0)) return false;  // instantiating crate
    return true;  // anything left is a vendor suffix (".llvm.1234")
  }

 private:
  static constexpr uint64_t kMaxBoundLifetimes = 64;
  static constexpr int kMaxDepth = 500;

  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool next_is_digit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }
  char take() { return pos_ < s_.size() ? s_[pos_++] : '\0'; }

  // "_" is 0, digits then "_" their value plus one; false past 64 bits
  // (disambiguators are 64-bit hashes).
  bool base62(uint64_t& value) {
    value = 0;
    if (eat('_')) return true;
    bool any = false;
    for (char c = take(); c != '_'; c = take()) {
      uint64_t digit;
      if (c >= '0' && c <= '9') digit = uint64_t(c - '0');
      else if (c >= 'a' && c <= 'z') digit = 10 + uint64_t(c - 'a');
      else if (c >= 'A' && c <= 'Z') digit = 36 + uint64_t(c - 'A');
      else return false;
      if (value > (UINT64_MAX - digit) / 62) return false;
      value = value * 62 + digit;
      any = true;
    }
    if (!any || value == UINT64_MAX) return false;
    ++value;
    return true;
  }
  bool base62() {
    uint64_t ignored;
    return base62(ignored);
  }
  bool opt_base62(char tag) { return !eat(tag) || base62(); }
  bool binder() {
    uint64_t lifetimes = 0;
    return !eat('G') || (base62(lifetimes) && lifetimes < kMaxBoundLifetimes);  // "G_": one lifetime
  }
  bool backref() {
    const size_t at = pos_ - 1;  // the 'B'
    uint64_t target = 0;
    return base62(target) && target + 2 < at;  // a reference to what came before ("_R" excluded)
  }

  bool undisambiguated_identifier() {
    eat('u');  // Punycode
    if (!next_is_digit()) return false;
    uint64_t length = 0;
    if (!eat('0')) {  // "0" is the empty identifier; no other length starts with 0
      while (next_is_digit()) {
        length = length * 10 + uint64_t(take() - '0');
        if (length > s_.size()) return false;
      }
    }
    eat('_');
    if (length > s_.size() - pos_) return false;
    pos_ += length;
    return true;
  }
  bool identifier() { return opt_base62('s') && undisambiguated_identifier(); }

  bool path(int depth) {
    if (depth > kMaxDepth) return false;
    switch (take()) {
      case 'C': return identifier();
      case 'M': return opt_base62('s') && path(depth + 1) && type(depth + 1);
      case 'X': return opt_base62('s') && path(depth + 1) && type(depth + 1) && path(depth + 1);
      case 'Y': return type(depth + 1) && path(depth + 1);
      case 'N': {
        const char ns = take();
        if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) return false;
        return path(depth + 1) && identifier();
      }
      case 'I':
        if (!path(depth + 1)) return false;
        while (!eat('E'))
          if (!generic_arg(depth + 1)) return false;
        return true;
      case 'B': return backref();
      default: return false;
    }
  }

  bool generic_arg(int depth) {
    if (eat('L')) return base62();
    if (eat('K')) return constant(depth);
    return type(depth);
  }

  bool type(int depth) {
    if (depth > kMaxDepth || pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (std::string_view("abcdefhijlmnostuvxyzp").find(c) != std::string_view::npos) {
      ++pos_;  // a basic type
      return true;
    }
    switch (c) {
      case 'A': ++pos_; return type(depth + 1) && constant(depth + 1);
      case 'S': case 'P': case 'O': ++pos_; return type(depth + 1);
      case 'T':
        ++pos_;
        while (!eat('E'))
          if (!type(depth + 1)) return false;
        return true;
      case 'R': case 'Q': ++pos_; return opt_base62('L') && type(depth + 1);
      case 'F': {
        ++pos_;
        if (!binder()) return false;
        eat('U');
        if (eat('K') && !eat('C') && !undisambiguated_identifier()) return false;
        while (!eat('E'))
          if (!type(depth + 1)) return false;
        return type(depth + 1);
      }
      case 'D': {
        ++pos_;
        if (!binder()) return false;
        while (!eat('E')) {
          if (!path(depth + 1)) return false;
          while (eat('p'))
            if (!undisambiguated_identifier() || !type(depth + 1)) return false;
        }
        return eat('L') && base62();
      }
      default: return path(depth);  // a path, or a backref ('B')
    }
  }

  // A const generic argument: a value of a basic type (hex digits), a
  // reference, array, tuple or ADT of them, a placeholder or a backref.
  bool constant(int depth) {
    if (depth > kMaxDepth) return false;
    switch (take()) {
      case 'p': return true;
      case 'B': return backref();
      case 'a': case 's': case 'l': case 'x': case 'n': case 'i':
      case 'h': case 't': case 'm': case 'y': case 'o': case 'j':
      case 'b': case 'c': case 'e':
        eat('n');
        while (pos_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        return eat('_');
      case 'R': case 'Q': return constant(depth + 1);
      case 'A': case 'T':
        while (!eat('E'))
          if (!constant(depth + 1)) return false;
        return true;
      case 'V':
        if (!path(depth + 1)) return false;
        if (eat('U')) return true;
        if (eat('T')) {
          while (!eat('E'))
            if (!constant(depth + 1)) return false;
          return true;
        }
        if (!eat('S')) return false;
        while (!eat('E'))
          if (!identifier() || !constant(depth + 1)) return false;
        return true;
      default: return false;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

namespace {

std::string demangle_symbol(std::string_view name) {
  if (!name.starts_with("_Z") && !name.starts_with("_R")) return std::string(name);
  // The demanglers want a NUL-terminated string; an embedded NUL would cut
  // the name short and give a wrong answer, so keep such names raw.
  if (name.find('\0') != std::string_view::npos) return std::string(name);
  if (name.starts_with("_R") && !RustV0Check(name).symbol()) return std::string(name);
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
