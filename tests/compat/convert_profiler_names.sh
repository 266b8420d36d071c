#!/bin/bash
# gsym convert --profiler-names vs the default conversion, which is
# byte-identical to llvm-gsymutil --convert --num-threads=1 (LLVM 22) for the
# programs here (checked) and differs for ld.so only in alias choice
# (convert_libc.sh): every byte of every executable section is looked up in
# both files. Lookups may differ only (a) inside .plt, .plt.sec and .plt.got, where ours name the
# stub (`SYMBOL@plt`, `.plt`) and LLVM's the zero-size `_init` before them,
# and (b) where LLVM finds no function and ours name an untyped code label
# (ld.so's `_start`, `_dl_start_user`). Inputs: gcc programs with a lazy
# .plt, an IBT .plt.sec (-fcf-protection -z ibtplt), a shared library whose
# call goes through .plt.got, and ld.so with libc6-dbg's debug file.
# Without --profiler-names the same inputs convert byte-identically.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
[[ -x $LLVM_GSYMUTIL ]] || { echo "skip: $LLVM_GSYMUTIL not installed"; exit 77; }
command -v gcc >/dev/null || { echo "skip: need gcc"; exit 77; }
FIXTURES=$(cd "$(dirname "$0")/../e2e/fixtures" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

gcc -O1 -g -fPIC -shared "$FIXTURES/libpltcall.c" -o libpltcall.so &&
  gcc -O1 -g -fcf-protection=none "$FIXTURES/plt_loop.c" -L. -lpltcall -o plt_lazy &&
  gcc -O1 -g -fcf-protection -Wl,-z,ibtplt "$FIXTURES/plt_loop.c" -L. -lpltcall -o plt_ibt ||
  { echo "FAIL: cannot build the fixtures"; exit 1; }

# compare ELF [LLVM_INPUT]: LLVM_INPUT is what llvm-gsymutil converts (the
# debug file, for a stripped ELF).
compare() {
  local elf=$1 llvm_input=${2:-$1} label
  label=$(basename "$elf")
  "$LLVM_GSYMUTIL" --convert "$llvm_input" --num-threads=1 -o llvm.gsym > /dev/null 2>&1 ||
    { fail "$label: llvm-gsymutil --convert"; return; }
  "$GSYMPROF" gsym convert "$elf" --threads 1 -o plain.gsym 2> /dev/null || { fail "$label: convert"; return; }
  if [[ $llvm_input == "$elf" ]]; then
    cmp -s plain.gsym llvm.gsym || fail "$label: without --profiler-names the bytes differ from LLVM's"
  fi
  "$GSYMPROF" gsym convert "$elf" --threads 1 --profiler-names -o names.gsym 2> /dev/null ||
    { fail "$label: convert --profiler-names"; return; }
  # Every byte of the executable sections; the PLT sections' ranges apart.
  LC_ALL=C readelf -SW "$elf" | sed -n 's/^ *\[ *[0-9]*\] *//p' |
    awk '$6 ~ /X/ || $7 ~ /X/ { print $1, $3, $5 }' > sections
  perl -ane 'my ($n, $a, $s) = @F; for my $x (hex($a) .. hex($a) + hex($s) - 1) { printf "0x%x\n", $x }' \
    sections > addresses
  perl -ane 'my ($n, $a, $s) = @F; printf "%d %d\n", hex($a), hex($a) + hex($s) if $n =~ /^\.plt/' \
    sections > plt_ranges
  # One line per address: inline frames (continuation lines) joined.
  local join='/^ / { sub(/^ +/, ""); line = line " | " $0; next } { if (NR > 1) print line; line = $0 } END { print line }'
  "$GSYMPROF" gsym lookup plain.gsym < addresses 2>&1 | awk "$join" > llvm.out
  "$GSYMPROF" gsym lookup names.gsym < addresses 2>&1 | awk "$join" > ours.out
  [[ $(wc -l < llvm.out) == $(wc -l < addresses) && $(wc -l < ours.out) == $(wc -l < addresses) ]] ||
    { fail "$label: lookups did not answer every address"; return; }
  local report
  report=$(paste -d '\t' addresses llvm.out ours.out | perl -F'\t' -ane '
    BEGIN { open my $f, "<", "plt_ranges"; while (<$f>) { my ($s, $e) = split; push @plt, [$s, $e] } }
    chomp @F; my ($a, $l, $o) = (hex $F[0], @F[1, 2]);
    next if $l eq $o;
    my $in_plt = grep { $a >= $_->[0] && $a < $_->[1] } @plt;
    if ($in_plt) { $plt++; next if $o =~ /^0x[0-9a-f]+: (\S+\@plt|\.plt)( \+ \d+)?$/ }
    elsif ($l =~ /is not in GSYM/ && $o =~ /^0x[0-9a-f]+: [^.\$\s][^\s]*( \+ \d+)?$/) { $label++; next }
    print "unexpected: $a\n  llvm: $l\n  ours: $o\n" if $bad++ < 5;
    END { printf "%d plt %d label %d bad\n", $plt, $label, $bad }')
  local counts=${report##*$'\n'}
  read -r plt labels bad <<< "$(awk '{print $1, $3, $5}' <<< "$counts")"
  if [[ $bad != 0 ]]; then echo "$report"; fail "$label: $bad lookups differ outside the rule"; return; fi
  (( plt > 0 )) || fail "$label: no PLT address was named differently"
  echo "ok: $label ($(wc -l < addresses) addresses; $plt in PLT stubs, $labels at code labels differ)"
}

compare plt_lazy
compare plt_ibt
compare libpltcall.so
LDSO=$(readlink -f /lib64/ld-linux-x86-64.so.2)
id=$(readelf -n "$LDSO" | awk '/Build ID/ {print $3}')
debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
if [[ -r $debug ]]; then compare "$LDSO" "$debug"; else echo "note: no debug file for $LDSO, skipped"; fi
(( failures == 0 )) || exit 1
echo "profiler names differ from LLVM only in PLT stubs and code labels"
