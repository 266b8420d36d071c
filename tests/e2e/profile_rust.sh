#!/bin/bash
# e2e: live profiles (2 s at 499 Hz each, as root) of a CPU-bound Rust
# program (tests/e2e/fixtures/rust/prog.rs, rustc -C opt-level=2 -g), built
# twice: rustc's default (its own crate legacy-mangled, std v0-mangled) and
# -C symbol-mangling-version=v0 (everything v0; legacy-only needs nightly's
# -Z, so legacy alone is covered by tests/unit/symbolize/demangle_test.cpp). Every
# frame must be demangled: none starts with _R or _ZN, none keeps a
# "::h<16 hex>" hash or a "$LT$"-style escape, and the hot stack names
# main -> prog::main -> prog::hot_loop -> <prog::Fnv as Hasher>::write under
# std::rt::lang_start. With linux-perf installed, perf's names for the same
# program are compared (informative only). Skipped without rustc.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
RUSTC=${RUSTC:-/root/.cargo/bin/rustc}
[[ -x $RUSTC ]] || RUSTC=$(command -v rustc) || skip "no rustc"
"$RUSTC" --version >/dev/null 2>&1 || skip "$RUSTC does not run"
command -v nm >/dev/null || skip "no nm"
echo "using $("$RUSTC" --version)"

HOT=';prog::main;prog::hot_loop;<prog::Fnv as core::hash::Hasher>::write(;|$)'

# build DIR RUSTC_FLAGS...: DIR/prog (one name for both builds, so comm is prog).
build() {
  local dir=$WORK/$1
  shift
  mkdir -p "$dir"
  "$RUSTC" -C opt-level=2 -g "$@" --crate-name prog "$FIXTURES/rust/prog.rs" -o "$dir/prog" ||
    fail "rustc $* failed"
}

# check_demangled FOLDED: no frame is left mangled, hashed or escaped.
check_demangled() {
  local folded=$1
  awk '{ n = split(substr($0, 1, length($0) - length($NF) - 1), f, ";")
         for (i = 2; i <= n; ++i) if (f[i] ~ /^(_R|_ZN)/) { print "mangled: " f[i]; bad = 1 } }
       END { exit bad }' "$folded" >&2 || fail "mangled frames in $folded"
  if grep -E '::h[0-9a-f]{16}' "$folded" >&2; then fail "a Rust hash is left in $folded"; fi
  if grep -E '\$(LT|GT|LP|RP|C|SP|BP|RF|u[0-9a-f]{2,6})\$' "$folded" >&2; then
    fail "a legacy Rust escape is left in $folded"
  fi
}

# check_hot FOLDED: >= 60% of prog's samples are in the hot stack, under
# main and std::rt::lang_start.
check_hot() {
  awk -v hot="$HOT" '
    { count = $NF; line = substr($0, 1, length($0) - length(count) - 1) }
    line !~ /^prog;/ { next }
    { total += count }
    line ~ hot && line ~ /;main;/ && line ~ /;std::rt::lang_start/ { hit += count }
    END {
      if (total == 0) { print "no samples of prog"; exit 1 }
      printf "  hot stack: %d of %d samples (%.1f%%)\n", hit, total, 100 * hit / total
      exit !(100 * hit >= 60 * total)
    }' "$1" || { cat "$1" >&2; fail "the hot Rust stack carries < 60% of the samples"; }
}

# compare_perf EXE FOLDED: names perf report gives the same program that
# gsymprof's output lacks (informative: perf's and our inlining can differ).
compare_perf() {
  command -v perf >/dev/null || { echo "  (linux-perf not installed: no comparison)"; return; }
  local exe=$1 folded=$2 data=$WORK/perf.data
  if ! timeout 15 perf record -q --all-user -F 499 --call-graph dwarf -o "$data" "$exe" 1 >/dev/null 2>&1; then
    echo "  (perf record failed: no comparison)"
    return
  fi
  perf script -i "$data" -F ip,sym 2>/dev/null |
    sed -nE 's/^[[:space:]]*[0-9a-f]+ (.*)$/\1/p' | sed -E 's/\+0x[0-9a-f]+$//; s/ \(inlined\)$//' |
    grep -v '^\[unknown\]$' | sort -u >"$WORK/perf.names"
  tr ';' '\n' <"$folded" | sed -E 's/ [0-9]+$//; s/_\[i\]$//' | sort -u >"$WORK/ours.names"
  local missing
  missing=$(comm -23 "$WORK/perf.names" "$WORK/ours.names" | head -n 10)
  echo "  perf: $(wc -l <"$WORK/perf.names") distinct names, of them not in gsymprof's output: ${missing:-none}"
  rm -f "$data"
}

echo "default mangling: the program's crate legacy, std v0"
build default
D=$WORK/default/prog
if nm "$D" | grep -Eq ' _ZN4prog8hot_loop17h[0-9a-f]{16}E$'; then
  echo "  prog's own symbols are legacy-mangled"
else
  echo "  (this rustc mangles the program's own symbols as v0 by default)"
fi
nm "$D" | grep -Eq ' _R[A-Za-z0-9_]*3std2rt19lang_start_internal$' ||
  fail "std::rt::lang_start_internal is not v0-mangled in $D"
profile_run "$WORK/default.folded" "$WORK/default.err" -F 499 -- "$D" 2
check_demangled "$WORK/default.folded"
check_hot "$WORK/default.folded"
expect_resolved "$WORK/default.folded" prog
expect_no_loss "$WORK/default.err"
compare_perf "$D" "$WORK/default.folded"

echo "-C symbol-mangling-version=v0: everything v0"
build v0 -C symbol-mangling-version=v0
V=$WORK/v0/prog
nm "$V" | grep -Eq ' _R[A-Za-z0-9_]*4prog8hot_loop$' || fail "prog::hot_loop is not v0-mangled in $V"
profile_run "$WORK/v0.folded" "$WORK/v0.err" -F 499 -- "$V" 2
check_demangled "$WORK/v0.folded"
check_hot "$WORK/v0.folded"
expect_resolved "$WORK/v0.folded" prog
expect_no_loss "$WORK/v0.err"
compare_perf "$V" "$WORK/v0.folded"
echo "ok"
