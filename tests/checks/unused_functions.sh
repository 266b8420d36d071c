#!/bin/bash
# No dead functions: cppcheck --enable=unusedFunction over the product code
# (gsym/ and userspace/, sources and headers), with every test, fuzz target,
# test tool and benchmark read as callers too (a function the tests call is
# not dead). Any function nothing calls fails the test, except the entry
# points listed below, each with the reason cppcheck cannot see its caller.
#
# How it sees: cppcheck matches functions by name across all the files it
# reads, so an unused overload whose name another function shares goes
# unseen; headers are listed as inputs of their own, because cppcheck only
# reports functions defined in the files it is given. It runs serially:
# cppcheck 2.10 switches unusedFunction off under -j. About 7 s on 2 cores.
# A file cppcheck cannot parse would hide callers, so that fails too.
set -u
cd "$(dirname "$0")/../.."
command -v cppcheck >/dev/null || { echo "skip: no cppcheck (scripts/install-deps.sh installs it)"; exit 77; }

# Entry points: "NAME FILES REASON" (FILES a shell pattern). main,
# doctest's test cases and LLVMFuzzerTestOneInput need no entry: cppcheck
# knows main; it reads each TEST_CASE(...) { } as a function named TEST_CASE,
# and a name defined many times is never reported; tests/fuzz/replay_main.cpp
# calls the fuzz entry.
ALLOWED=(
  # nlohmann::json::sax_parse calls the capture reader's SAX handler through
  # its json_sax interface (in nlohmann's headers, not read here).
  "null             userspace/capture/*  nlohmann json_sax callback"
  "boolean          userspace/capture/*  nlohmann json_sax callback"
  "number_integer   userspace/capture/*  nlohmann json_sax callback"
  "number_unsigned  userspace/capture/*  nlohmann json_sax callback"
  "number_float     userspace/capture/*  nlohmann json_sax callback"
  "string           userspace/capture/*  nlohmann json_sax callback"
  "binary           userspace/capture/*  nlohmann json_sax callback"
  "start_object     userspace/capture/*  nlohmann json_sax callback"
  "key              userspace/capture/*  nlohmann json_sax callback"
  "end_object       userspace/capture/*  nlohmann json_sax callback"
  "start_array      userspace/capture/*  nlohmann json_sax callback"
  "end_array        userspace/capture/*  nlohmann json_sax callback"
  "parse_error      userspace/capture/*  nlohmann json_sax callback"
)

allowed() {  # name file
  local entry name pattern
  for entry in "${ALLOWED[@]}"; do
    read -r name pattern _ <<<"$entry"
    # shellcheck disable=SC2053
    [[ $1 == "$name" && $2 == $pattern ]] && return 0
  done
  return 1
}

mapfile -t product < <(find gsym userspace \( -name '*.cpp' -o -name '*.h' \) | LC_ALL=C sort)
mapfile -t callers < <({ find tests/unit tests/support tests/tools \( -name '*.cpp' -o -name '*.h' \)
                         find tests/fuzz tests/bench -maxdepth 1 \( -name '*.cpp' -o -name '*.h' \)
                       } | LC_ALL=C sort)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$SECONDS
cppcheck --enable=unusedFunction --std=c++20 --language=c++ -I. --quiet \
  --template='{id}|{file}|{line}|{message}' "${product[@]}" "${callers[@]}" 2>"$out"
rc=$?
echo "  cppcheck read ${#product[@]} product and ${#callers[@]} caller files in $((SECONDS - start)) s"
[[ $rc == 0 ]] || { cat "$out"; echo "FAIL: cppcheck exited $rc"; exit 1; }

status=0
while IFS='|' read -r id file line message; do
  case $id in
    unusedFunction)
      name=$(sed -n "s/^The function '\(.*\)' is never used\.\$/\1/p" <<<"$message")
      allowed "$name" "$file" && continue
      echo "  unused: $file:$line: $name"
      status=1
      ;;
    syntaxError | unknownMacro | internalAstError | internalError | cppcheckError | preprocessorErrorDirective)
      echo "  cppcheck could not read $file:$line ($id: $message): its calls are not seen"
      status=1
      ;;
  esac
done <"$out"
[[ $status == 0 ]] || { echo "FAIL: remove the unused functions above (or list a true entry point in $0)"; exit 1; }
echo "ok"
