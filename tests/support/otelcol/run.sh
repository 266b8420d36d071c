#!/usr/bin/env bash
# Run the test Collector by hand, in the foreground, until Ctrl-C / SIGTERM:
#   tests/support/otelcol/run.sh OUT_FILE [STATE_DIR]
# prints its endpoints, then stops it cleanly (the file is flushed). Tests
# source otelcol.bash instead (otelcol_start / otelcol_stop); see README.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=otelcol.bash
. "$here/otelcol.bash"
[[ $# -ge 1 ]] || { echo "usage: $0 OUT_FILE [STATE_DIR]" >&2; exit 2; }
rc=0
otelcol_start "$@" || rc=$?
((rc == 0)) || exit "$rc"
trap 'otelcol_stop; exit 0' INT TERM
echo "grpc=$OTELCOL_GRPC http=$OTELCOL_HTTP url=$OTELCOL_HTTP_URL out=$OTELCOL_OUT log=$OTELCOL_LOG pid=$OTELCOL_PID"
while kill -0 "$OTELCOL_PID" 2>/dev/null; do sleep 1; done
echo "run.sh: the Collector exited; see $OTELCOL_LOG" >&2
exit 1
