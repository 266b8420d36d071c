# tests/compat/compat_programs.bash - the compat programs, one home for
# every compat test that converts them (convert_llvm.sh, gsym_v2.sh): gcc and
# clang, DWARF 4 and 5, -O2 -g, PIE and non-PIE, a shared library, C and C++
# (templates, lambdas, namespaces, deep inlining, local classes at -O0),
# two CUs, zlib-compressed debug sections, basic-block sections, a function
# without line rows.
# Needs fail(); run in a scratch directory.

# Writes the sources into the current directory.
write_compat_sources() {
cat > inl.h <<'SRC'
static inline int leaf(int x) { return x * x + 3; }
static inline int middle(int x) { int s = 0; for (int i = 0; i < x; i++) s += leaf(i) ^ i; return s; }
SRC
cat > prog.c <<'SRC'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inl.h"
int lib_entry(int);
__attribute__((noinline)) int compute(int n) { return middle(n) + middle(n / 2); }
static int cmp(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }
static __attribute__((noinline)) int rarely(int x) {
  if (__builtin_expect(x == 12345, 0)) { fprintf(stderr, "rare %d\n", x); abort(); }
  return x + 1;
}
static inline int deep3(int x) { return rarely(x) * 3; }
static inline int deep2(int x) { return deep3(x + 1) + deep3(x - 1); }
static inline int deep1(int x) { return deep2(x) ^ deep2(x * 2); }
int main(int argc, char** argv) {
  int v[64];
  for (int i = 0; i < 64; i++) v[i] = rand() % 100;
  qsort(v, 64, sizeof v[0], cmp);
  char buf[32];
  strncpy(buf, argc > 1 ? argv[1] : "x", sizeof buf - 1);
  printf("%d %d %d %s\n", compute(argc * 100), v[3], deep1(argc), buf);
#ifdef WITH_LIB
  printf("%d\n", lib_entry(argc));
#endif
  return 0;
}
SRC
cat > lib.c <<'SRC'
#include "inl.h"
static int table[256];
static inline int mix(int a) { return (a << 3) ^ (a >> 2); }
__attribute__((noinline)) int lib_helper(int x) { for (int i = 0; i < 256; i++) table[i] = mix(i + x); return table[x & 255]; }
int lib_entry(int x) { return lib_helper(x) + middle(x & 7); }
SRC
cat > prog.cpp <<'SRC'
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>
namespace geo {
template <typename T> struct Vec { T x, y; };
template <typename T> inline T dot(const Vec<T>& a, const Vec<T>& b) { return a.x * b.x + a.y * b.y; }
template <typename T> inline T norm2(const Vec<T>& a) { return dot(a, a); }
class Shape {
 public:
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
class Poly : public Shape {
 public:
  explicit Poly(std::vector<Vec<double>> p) : pts_(std::move(p)) {}
  double area() const override {
    double s = 0;
    for (size_t i = 0; i < pts_.size(); ++i) {
      const auto& a = pts_[i]; const auto& b = pts_[(i + 1) % pts_.size()];
      s += a.x * b.y - b.x * a.y + 1e-9 * norm2(a);
    }
    return s / 2;
  }
 private:
  std::vector<Vec<double>> pts_;
};
}  // namespace geo
namespace {
template <int N> struct Depth { static inline int run(int x) { return Depth<N - 1>::run(x * 3 + N) ^ N; } };
template <> struct Depth<0> { static inline int run(int x) { return x; } };
__attribute__((noinline)) int deep(int x) { return Depth<12>::run(x); }
}
extern "C" __attribute__((noinline)) int c_linkage(int x) { return x * 7; }
int main(int argc, char**) {
  std::vector<geo::Vec<double>> pts;
  for (int i = 0; i < 10 + argc; ++i) pts.push_back({double(i), double(i * i % 7)});
  geo::Poly poly(pts);
  std::map<std::string, int> counts;
  auto add = [&counts](const std::string& k) { counts[k] += (int)k.size(); };
  for (const char* w : {"a", "bb", "ccc", "a"}) add(w);
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[i] = (i * 37) % 101;
  std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
  std::function<int(int)> f = [&](int x) { return deep(x) + c_linkage(x); };
  std::printf("%f %zu %d %d\n", poly.area(), counts.size(), v[0], f(argc));
  return 0;
}
SRC
# Classes at namespace scope, nested and local ones, lambdas: built -O0
# by g++, which puts the code of a local class's methods inside the local
# class's DIE (the converter skips only the children of types outside
# functions) and gives every type a DW_AT_sibling.
cat > classes.cpp <<'SRC'
#include <cstdio>
#include <functional>
#include <map>
#include <string>
namespace zoo {
struct Animal {
  struct Sound { int loud(int x) const { return x * 3; } virtual ~Sound() {} };
  enum Kind { Cat, Dog };
  union Tag { int i; float f; };
  template <class T> T grow(T t) { return t + 1; }
  int speak(int n);
  Kind kind = Dog;
};
int Animal::speak(int n) { return Sound().loud(n) + grow(n) + kind; }
}
int run(int n) {
  struct Local {
    int m(int v) { return v + 7; }
    static int s(int v) { struct Deeper { int d(int q) { return q - 1; } }; return Deeper().d(v * 2); }
  };
  auto lam = [n](int z) { struct InLambda { int l(int q) { return q ^ 5; } }; return InLambda().l(z + n); };
  std::map<std::string, int> m;
  m["a"] = n;
  std::function<int(int)> fn = lam;
  return Local().m(n) + Local::s(n) + fn(n) + zoo::Animal().speak(n) + (int)m.size();
}
int main(int argc, char**) { std::printf("%d\n", run(argc)); return 0; }
SRC
# shaped: inlined into main and also kept out of line (its address taken);
# the out-of-line copy's DIE names nothing itself, its abstract origin
# carries the name and decl_file/decl_line.
cat > norows.c <<'SRC'
#include <stdio.h>
static inline int shaped(int x) {
  int s = 0;
  for (int i = 0; i < x; i++) s += (i * 7) ^ x;
  return s;
}
int (*volatile keep)(int) = shaped;
int main(int argc, char** argv) {
  (void)argv;
  printf("%d %d\n", shaped(argc * 10), keep(argc));
  return 0;
}
SRC

}

build() {  # compiler flags... -> binary name in $bin
  "$@" 2>build.err || { cat build.err; fail "compile: $*"; return 1; }
}

# Builds every program and calls "$@" BINARY LABEL for each one built.
for_each_compat_program() {
  for cc in gcc clang; do
    for dw in 4 5; do
      for pie in pie no-pie; do
        bin=c_${cc}_dw${dw}_$pie
        flags="-O2 -g -gdwarf-$dw"
        [[ $pie == pie ]] && flags="$flags -fPIE -pie" || flags="$flags -fno-PIE -no-pie"
        build $cc $flags -o $bin prog.c && "$@" $bin "$cc DWARF $dw $pie C"
        cxx=$([[ $cc == gcc ]] && echo g++ || echo clang++)
        bin=cpp_${cc}_dw${dw}_$pie
        build $cxx $flags -o $bin prog.cpp && "$@" $bin "$cxx DWARF $dw $pie C++"
      done
      lib=lib_${cc}_dw${dw}.so
      build $cc -O2 -g -gdwarf-$dw -fPIC -shared -o $lib lib.c && "$@" $lib "$cc DWARF $dw shared library"
      bin=multi_${cc}_dw${dw}
      build $cc -O2 -g -gdwarf-$dw -DWITH_LIB -o $bin prog.c lib.c && "$@" $bin "$cc DWARF $dw two CUs"
    done
  done
  for dw in 4 5; do
    build g++ -O0 -g -gdwarf-$dw -o classes_gcc_O0_dw$dw classes.cpp &&
      "$@" classes_gcc_O0_dw$dw "g++ -O0 DWARF $dw local classes"
  done
  # Compressed debug sections (zlib), which libdw and our line reader inflate.
  build gcc -O2 -g -gz=zlib -o c_gz prog.c && "$@" c_gz "gcc -gz=zlib"
  # Every basic block in its own section (clang): functions and inlined
  # calls in pieces, their DWARF 5 range lists of .debug_addr entries
  # (DW_RLE_startx_length, base_addressx) reached by DW_FORM_rnglistx.
  build clang++ -O2 -g -gdwarf-5 -fbasic-block-sections=all -o cpp_clang_bb_sections prog.cpp &&
    "$@" cpp_clang_bb_sections "clang++ DWARF 5 basic-block sections C++"
  # A function without line rows, whose one row comes from decl_file and
  # decl_line read through its abstract origin.
  for cc in gcc clang; do
    for dw in 4 5; do
      bin=norows_${cc}_dw$dw
      build_without_rows $cc $dw $bin && "$@" $bin "$cc DWARF $dw function without line rows"
    done
  done
}

# build_without_rows COMPILER DWARF_VERSION OUTPUT: norows.c with the line
# rows of shaped's out-of-line copy dropped (its .loc directives; in its own
# section, so no row of another function covers it either). Fails unless
# llvm-gsymutil's file (where LLVM_GSYMUTIL is set) then gives shaped one
# row at its declaration (line 2), the fallback this build is for.
build_without_rows() {
  local cc=$1 dw=$2 out=$3 views=()
  # gcc's location views name labels at .loc directives: none, so none dangle.
  [[ $cc == gcc ]] && views=(-gno-variable-location-views)
  build "$cc" -O2 -g "-gdwarf-$dw" -ffunction-sections "${views[@]}" -S -o "$out.s" norows.c || return 1
  awk '/^[ \t]*\.section[ \t]+\.text\.shaped[,"]/ { inside = 1 }
       inside && /^[ \t]*\.loc[ \t]/ { dropped++; next }
       /\.cfi_endproc/ { inside = 0 }
       { print }
       END { exit dropped ? 0 : 1 }' "$out.s" > "$out.rows-dropped.s" ||
    { fail "$out: no line rows of shaped to drop"; return 1; }
  build "$cc" -o "$out" "$out.rows-dropped.s" || return 1
  [[ -n ${LLVM_GSYMUTIL:-} ]] || return 0
  "$LLVM_GSYMUTIL" --convert "$out" --out-file "$out.check.gsym" --num-threads=1 >/dev/null 2>&1 &&
    "$LLVM_GSYMUTIL" "$out.check.gsym" 2>/dev/null | grep -A2 '"shaped"$' | grep -q 'norows\.c:2$' ||
    { fail "$out: llvm-gsymutil does not give shaped its declaration's row"; return 1; }
}
