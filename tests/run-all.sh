#!/bin/bash
# Runs every test: doctest units, fuzz-corpus replays, then each
# tests/checks/*.sh (checks of the source tree), tests/compat/*.sh and
# tests/e2e/*.sh (each exits 0 = pass, 77 = skipped).
# Env: BUILD (build dir, default build), TEST_FILTER (substring of script names).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD GSYMPROF="$PWD/$BUILD/gsymprof"
failed=() passed=0 skipped=()

run() {  # name, command...
  local name=$1; shift
  if [[ -n ${TEST_FILTER:-} && $name != *"$TEST_FILTER"* ]]; then return; fi
  printf '== %s\n' "$name"
  local start=$SECONDS
  "$@"
  local rc=$?
  if [[ $rc == 0 ]]; then passed=$((passed + 1)); printf '   ok (%ds)\n' $((SECONDS - start))
  elif [[ $rc == 77 ]]; then skipped+=("$name")
  else failed+=("$name"); printf '   FAILED (exit %d)\n' $rc; fi
}

run unit "$BUILD/unit_tests"
for bin in "$BUILD"/fuzz-replay/*; do
  [[ -x $bin ]] || continue
  name=$(basename "$bin")
  run "fuzz-replay/$name" "$bin" "tests/fuzz/corpus/$name"
done
for t in tests/checks/*.sh tests/compat/*.sh tests/e2e/*.sh; do
  [[ -f $t ]] || continue
  run "$t" bash "$t"
done

echo "passed: $passed, failed: ${#failed[@]}, skipped: ${#skipped[@]}"
for s in "${skipped[@]}"; do echo "  skipped: $s"; done
for f in "${failed[@]}"; do echo "  FAILED: $f"; done
[[ ${#failed[@]} == 0 ]]
