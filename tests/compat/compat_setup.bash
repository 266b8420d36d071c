# tests/compat/compat_setup.bash - sourced by every compat test after its
# skip checks (HERE = tests/compat): gsymprof's absolute path, a scratch
# directory that becomes the working directory and is removed at exit, and
# the failure counter with fail().
GSYMPROF=$(realpath "${GSYMPROF:-build/gsymprof}")
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
