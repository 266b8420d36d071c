#!/bin/bash
# gsym convert on bad input: not ELF, truncated ELF, no functions, corrupt
# DWARF without function symbols -> exit 1, exactly one line on stderr naming
# the file, no output file. DWARF that cannot be used (corrupt first unit
# header, a compressed section claiming far more than it can hold) costs the
# DWARF only: the symbol table still converts, with one warning (exit 0). A
# malformed compile unit among good ones is skipped with a warning and counted
# (exit 0). Usage errors exit 2; --help exits 0.
set -u
command -v gcc >/dev/null || { echo "skip: no gcc"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

expect_error() {  # file phrase
  local file=$1 phrase=$2
  "$GSYMPROF" gsym convert "$file" -o out.gsym 2>err
  local rc=$?
  [[ $rc == 1 ]] || fail "$file: exit $rc, want 1"
  [[ $(wc -l <err) == 1 ]] || { cat err; fail "$file: want exactly one line on stderr"; }
  grep -q -- "$file: .*$phrase" err || { cat err; fail "$file: message lacks '$phrase'"; }
  [[ ! -e out.gsym ]] || fail "$file: an output file was written"
  ls | grep -q 'out.gsym.tmp' && fail "$file: a temporary file was left"
  rm -f out.gsym
}

cat > a.c <<'SRC'
int helper(int x);
int main(int argc, char** argv) { (void)argv; return helper(argc); }
SRC
cat > b.c <<'SRC'
static inline int sq(int x) { return x * x; }
__attribute__((noinline)) int helper(int x) { return sq(x) + 1; }
SRC
gcc -O2 -g -gdwarf-5 -o good a.c b.c || { fail "compile"; exit 1; }
"$GSYMPROF" gsym convert good -o good.gsym 2>/dev/null || fail "the good input does not convert"

printf 'hello\n' >text;               expect_error text "not an ELF file"
: >empty;                             expect_error empty "not an ELF file"
expect_error missing "cannot open"
head -c $(( $(stat -c %s good) / 2 )) good >half; expect_error half "truncated ELF"
head -c 64 good >header_only;         expect_error header_only "truncated ELF"
printf 'int data[16] = {1};\n' >data.c
gcc -shared -nostdlib -o data.so data.c && expect_error data.so "no functions found"

# .debug_info offsets of the two units (file offset of the section + unit offsets).
info=$(readelf -SW good | awk '$2 == ".debug_info" { print $5 }')
info=$((16#$info))
second=$(readelf --debug-dump=info good 2>/dev/null | awk '/Compilation Unit @ offset/ { n++; if (n == 2) { sub(":", "", $NF); print $NF } }')
second=$((second))
poke() {  # file offset bytes...
  local f=$1 o=$2; shift 2
  printf "$@" | dd of="$f" bs=1 seek="$o" conv=notrunc status=none
}
cp good bad_version; poke bad_version $((info + 4)) '\x63\x00'

# expect_symbols_only FILE PHRASE: exit 0, one warning naming FILE and
# PHRASE, functions from the symbol table only, a valid output.
expect_symbols_only() {
  local file=$1 phrase=$2
  "$GSYMPROF" gsym convert "$file" -o "$file.gsym" 2>err; local rc=$?
  [[ $rc == 0 ]] || { cat err; fail "$file: exit $rc, want 0"; }
  [[ $(grep -c 'warning:' err) == 1 ]] || { cat err; fail "$file: want exactly one warning"; }
  grep -q "warning: $file: .*$phrase.*; functions come from the symbol table only" err ||
    { cat err; fail "$file: warning lacks '$phrase'"; }
  grep -Eq "$file -> $file.gsym: [1-9][0-9]* functions \(0 from DWARF, [1-9][0-9]* from symbols\)" err ||
    { cat err; fail "$file: not converted from the symbol table"; }
  "$GSYMPROF" gsym verify "$file.gsym" >/dev/null 2>&1 || fail "$file: output does not verify"
  "$GSYMPROF" gsym lookup "$file.gsym" 0x$(nm good | awk '$3 == "helper" { print $1 }') 2>/dev/null |
    grep -q helper || fail "$file: helper not named from .symtab"
}
expect_symbols_only bad_version "corrupt DWARF: cannot read the first unit header"
# No function symbols either: the DWARF error is the error.
strip --strip-all --keep-section='.debug_*' -o bad_version_bare bad_version
expect_error bad_version_bare "corrupt DWARF"

# Decompression bomb: .debug_info's Elf64_Chdr.ch_size (8 bytes at offset 8
# of the section) patched to claim 2 GiB. Refused before any allocation.
objcopy --compress-debug-sections=zlib good bomb
zinfo=$((16#$(readelf -SW bomb | awk '$2 == ".debug_info" { print $5 }')))
poke bomb $((zinfo + 8)) '\x00\x00\x00\x80\x00\x00\x00\x00'
expect_symbols_only bomb "compressed section .debug_info claims 2147483648 bytes"

# Garbage DIEs in the second unit: that unit is skipped, the rest converts.
cp good bad_dies; head -c 40 /dev/zero | tr '\0' '\377' | dd of=bad_dies bs=1 seek=$((info + second + 12)) conv=notrunc status=none
"$GSYMPROF" gsym convert bad_dies -o bad_dies.gsym 2>err; rc=$?
[[ $rc == 0 ]] || { cat err; fail "bad_dies: exit $rc, want 0"; }
grep -q "warning: unit at 0x$(printf %x $((second + 12))) skipped: malformed DWARF" err || { cat err; fail "bad_dies: no skip warning"; }
grep -q "2 units (1 skipped)" err || { cat err; fail "bad_dies: skipped unit not counted"; }
"$GSYMPROF" gsym verify bad_dies.gsym >/dev/null 2>&1 || fail "bad_dies: output does not verify"
/usr/lib/llvm-22/bin/llvm-gsymutil bad_dies.gsym >/dev/null 2>&1 || [[ ! -x /usr/lib/llvm-22/bin/llvm-gsymutil ]] ||
  fail "bad_dies: output does not dump"

# Usage.
"$GSYMPROF" gsym convert >/dev/null 2>&1; [[ $? == 2 ]] || fail "no argument: want exit 2"
"$GSYMPROF" gsym convert good --bogus >/dev/null 2>&1; [[ $? == 2 ]] || fail "unknown option: want exit 2"
"$GSYMPROF" gsym convert good --threads 0 >/dev/null 2>&1; [[ $? == 2 ]] || fail "--threads 0: want exit 2"
"$GSYMPROF" gsym convert good a b >/dev/null 2>&1; [[ $? == 2 ]] || fail "two inputs: want exit 2"
"$GSYMPROF" gsym convert --help | grep -q '^usage: gsymprof gsym convert' || fail "--help"

[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "bad inputs rejected cleanly"
