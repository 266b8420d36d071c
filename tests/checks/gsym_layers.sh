#!/bin/bash
# gsym/'s parts include one way (gsym/README.md, Layout):
#   base <- format <- reader, builder <- convert
# reader and builder never include each other, and nothing in gsym/ includes
# anything outside it (it is a library on its own: no userspace/, bpf/,
# tests/ or generated headers).
set -u
cd "$(dirname "$0")/../.."

declare -A may_include=(
  [base]="base"
  [format]="base format"
  [reader]="base format reader"
  [builder]="base format builder"
  [convert]="base format builder convert"
)

status=0
for dir in gsym/*/; do
  part=$(basename "$dir")
  if [[ -z ${may_include[$part]+set} ]]; then
    echo "  gsym/$part/: a part this check does not know: add it to $0 and to gsym/README.md"
    status=1
    continue
  fi
  while IFS=: read -r file line text; do
    target=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")
    [[ -n $target ]] || continue
    if [[ $target != gsym/*/* ]]; then
      echo "  $file:$line: includes \"$target\", outside gsym/'s parts"
      status=1
      continue
    fi
    to=${target#gsym/}
    to=${to%%/*}
    if [[ " ${may_include[$part]} " != *" $to "* ]]; then
      echo "  $file:$line: $part/ includes $to/ (\"$target\"); $part/ may include: ${may_include[$part]}"
      status=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir"* /dev/null)
done
[[ $status == 0 ]] || { echo "FAIL: gsym/ includes against its layers"; exit 1; }
echo "ok"
