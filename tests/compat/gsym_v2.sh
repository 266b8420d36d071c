#!/bin/bash
# GSYM version 2 against version 1 on the compat programs
# (compat_programs.bash). For each program, our version 1 file (the default
# `gsym convert`) is the reference, and on EVERY byte address of every
# function (plus the byte before and after each) `gsymprof gsym lookup`
# answers identically in:
#   - our version 2 file (`gsym convert --gsym-version 2`; --threads 1 and 2
#     give the same bytes);
#   - a big-endian version 2 copy (tests/tools/gsym_reencode.cpp);
#   - version 2 files in both byte orders written by an independent writer
#     (gsym_v2_writer.py, written from the format description: other section
#     order, no alignment, an unknown section type);
# `gsym verify` gives the version 1 counts on each, and `gsym dump` shows
# version 2 and its directory. Damaged version 2 headers and directories
# give one-line errors (exit 1).
# Exit 0 pass, 77 skip (no gcc/clang/python3), 1 fail.
set -u
BUILD=${BUILD:-build}
for tool in gcc g++ clang clang++ python3; do
  command -v $tool >/dev/null || { echo "skip: $tool not installed"; exit 77; }
done
REENCODE=$(realpath "$BUILD/test-tools/gsym_reencode")
[[ -x $REENCODE ]] || { echo "FAIL: $REENCODE not built (make BUILD=$BUILD test-tools)"; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

. "$HERE/compat_programs.bash"

# Every byte address of every function in dump $1, and the bytes around.
every_address() {
  perl -ne 'if (/^FunctionInfo\[\d+\]: \[0x([0-9a-f]+) - 0x([0-9a-f]+)\)/) {
      my ($s, $e) = (hex $1, hex $2);
      printf "0x%x\n", $_ for (($s > 0 ? $s - 1 : 0) .. $e);
    }' "$1" | sort -u
}

total=0
check_v2() {  # binary label
  local bin=$1 label=$2
  "$GSYMPROF" gsym convert "$bin" -o "$bin.v1.gsym" --threads 1 2>/dev/null ||
    { fail "$label: convert"; return; }
  "$GSYMPROF" gsym convert "$bin" -o "$bin.v2.gsym" --threads 1 --gsym-version 2 2>/dev/null ||
    { fail "$label: convert --gsym-version 2"; return; }
  "$GSYMPROF" gsym convert "$bin" -o "$bin.v2t.gsym" --threads=2 --gsym-version=2 2>/dev/null ||
    { fail "$label: convert --threads=2 --gsym-version=2"; return; }
  cmp -s "$bin.v2.gsym" "$bin.v2t.gsym" || fail "$label: version 2 bytes depend on --threads"
  "$REENCODE" --big-endian --gsym-version=2 "$bin.v1.gsym" "$bin.v2be.gsym" ||
    { fail "$label: big-endian version 2 re-encode"; return; }
  python3 "$HERE/gsym_v2_writer.py" "$bin.v1.gsym" "$bin.py.gsym" ||
    { fail "$label: independent writer"; return; }
  python3 "$HERE/gsym_v2_writer.py" --big-endian "$bin.v1.gsym" "$bin.pybe.gsym" ||
    { fail "$label: independent writer (big-endian)"; return; }

  "$GSYMPROF" gsym dump "$bin.v1.gsym" > v1.dump || { fail "$label: dump v1"; return; }
  every_address v1.dump > addrs
  local n; n=$(wc -l < addrs)
  [[ $n -ge 100 ]] || { fail "$label: only $n addresses"; return; }
  "$GSYMPROF" gsym lookup "$bin.v1.gsym" < addrs > v1.txt 2>&1
  "$GSYMPROF" gsym verify "$bin.v1.gsym" > v1.verify 2>&1 || fail "$label: verify v1"
  grep -q ' @ ' v1.txt || { fail "$label: no line information in the answers"; return; }
  local f
  for f in v2 v2be py pybe; do
    "$GSYMPROF" gsym lookup "$bin.$f.gsym" < addrs > $f.txt 2>&1
    if ! cmp -s v1.txt $f.txt; then
      diff v1.txt $f.txt | head -10
      fail "$label: $f lookups differ from version 1"
    fi
    "$GSYMPROF" gsym verify "$bin.$f.gsym" > $f.verify 2>&1 || fail "$label: verify $f: $(head -1 $f.verify)"
    cmp -s v1.verify $f.verify || fail "$label: verify $f counts differ from version 1"
    "$GSYMPROF" gsym dump "$bin.$f.gsym" > $f.dump || fail "$label: dump $f"
    grep -qx '  Version      = 0x0002' $f.dump || fail "$label: dump $f does not show version 2"
    grep -qx 'Global Data:' $f.dump || fail "$label: dump $f has no directory"
    # Past the header, the dumps show the same content.
    cmp -s <(sed '1,/^Address Table:/d' v1.dump) <(sed '1,/^Address Table:/d' $f.dump) ||
      fail "$label: dump $f content differs from version 1"
  done
  grep -q '^unknown 16962 ' py.dump || fail "$label: independent file's unknown section not listed"
  total=$((total + n))
  echo "ok: $label ($n addresses, 4 version 2 files)"
}

write_compat_sources
for_each_compat_program check_v2

# Damaged version 2 headers and directories: exit 1, one line naming the file.
bin=c_gcc_dw5_pie
if [[ -s $bin.v2.gsym ]]; then
  damage() {  # label expected-message python-expression-on-bytearray-b
    python3 -c "import struct,sys; b=bytearray(open(sys.argv[1],'rb').read()); $3; open(sys.argv[2],'wb').write(b)" \
      "$bin.v2.gsym" bad.gsym
    "$GSYMPROF" gsym lookup bad.gsym 0x1000 > out 2> err
    local rc=$?
    [[ $rc == 1 ]] || fail "$1: exit $rc, expected 1"
    [[ $(wc -l < err) == 1 ]] || fail "$1: not one line: $(cat err)"
    grep -qF -- "$2" err || fail "$1: '$(cat err)' does not say '$2'"
    "$GSYMPROF" gsym verify bad.gsym > /dev/null 2> err
    [[ $? == 1 && $(wc -l < err) == 1 ]] || fail "$1: verify: $(cat err)"
  }
  damage "cut header" "not enough data for a GSYM version 2 header" "del b[12:]"
  damage "cut directory" "global data directory has no end" "del b[50:]"
  damage "string encoding" "unsupported string table encoding 7" "b[7] = 7"
  damage "zero-size section" "has size 0" "b[32:40] = bytes(8)"
  damage "section past the end" "extends past the end of the file" "b[24:32] = struct.pack('<Q', len(b))"
  damage "no end entry" "global data directory has no end" "b[20:] = b'\\x09' * (len(b) - 20)"
  damage "cut FunctionInfo" "extends past the end of the file" "del b[-3:]"
  damage "duplicate section" "appears twice" "b[60:64] = b[40:44]"
else
  fail "no version 2 file of $bin for the damage checks"
fi

[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all version 2 files answer like version 1 ($total addresses per file)"
