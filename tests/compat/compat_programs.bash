# tests/compat/compat_programs.bash - the compat programs, one home for
# every compat test that converts them (convert_llvm.sh, gsym_v2.sh): gcc and
# clang, DWARF 4 and 5, -O2 -g, PIE and non-PIE, a shared library, C and C++
# (templates, lambdas, namespaces, deep inlining), two CUs, zlib-compressed
# debug sections. Needs fail(); run in a scratch directory.

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
  # Compressed debug sections (zlib), which libdw and our line reader inflate.
  build gcc -O2 -g -gz=zlib -o c_gz prog.c && "$@" c_gz "gcc -gz=zlib"
}
