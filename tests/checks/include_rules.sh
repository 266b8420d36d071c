#!/bin/bash
# Check: the include rule between the pipeline's stages (userspace/README.md,
# Architecture). Each folder of userspace/ may include only the stages listed
# for it (and itself); gsym/ includes nothing of userspace/ or bpf/; the
# BPF header is shared only by bpf/, the sampler and the counters' name
# table. A new include across stages fails here with the file and the rule.
set -u
cd "$(dirname "$0")/../.." || exit 1

# stage: the stages it may include (base and gsym are everyone's).
declare -A allowed=(
  [base]=""
  [http]=""
  [events]=""
  [capture]=""
  [process]="capture"
  [unwind]="events process"
  [assemble]="events process unwind capture"
  [sample]="events perf_data"
  [perf_data]="events process capture"
  [session]="sample perf_data events assemble process capture"
  [symbolize]="capture"
  [output]="capture symbolize"
  [report]="session capture unwind symbolize"
  [export]="capture symbolize output http"
  [serve]="process capture symbolize output export http"
  [cli]="report session sample process capture symbolize output export serve"
)

bad=0
for dir in userspace/*/; do
  stage=$(basename "$dir")
  if [[ ! -v allowed[$stage] ]]; then
    echo "include rule: userspace/$stage/ is a stage the rule does not know: add it to tests/checks/include_rules.sh and userspace/README.md"
    bad=1
    continue
  fi
  while IFS=: read -r file line text; do
    other=$(sed -n 's|.*#include "userspace/\([a-z_]*\)/.*|\1|p' <<<"$text")
    [[ -z $other || $other == "$stage" || $other == base ]] && continue
    if [[ " ${allowed[$stage]} " != *" $other "* ]]; then
      echo "include rule: $file:$line: $stage may not include $other ($text)"
      bad=1
    fi
  done < <(grep -n '#include "userspace/' "$dir"*.cpp "$dir"*.h 2>/dev/null)
done

# gsym/ is a library of its own: nothing of gsymprof's.
if grep -rn '#include "userspace/\|#include "bpf/' gsym/ --include=*.cpp --include=*.h; then
  echo "include rule: gsym/ includes gsymprof code"
  bad=1
fi
# The BPF record layout is shared by bpf/ and the live source only (and the
# counters' name table, whose enum it is).
while IFS= read -r file; do
  case $file in
    userspace/sample/*|userspace/events/counters.h|userspace/session/target_options.h) ;;
    *) echo "include rule: $file includes bpf/profile.h (only the sampler may)"; bad=1 ;;
  esac
done < <(grep -rl '#include "bpf/profile.h"' userspace)
# symbolize reads captures: never the live session.
if grep -n 'session/profile_session.h' userspace/cli/cmd_symbolize.cpp userspace/cli/cmd_flamegraph.cpp; then
  echo "include rule: symbolize/flamegraph include the live session"
  bad=1
fi

if ((bad)); then exit 1; fi
echo "include rule: $(ls -d userspace/*/ | wc -l) stages, every include allowed"
