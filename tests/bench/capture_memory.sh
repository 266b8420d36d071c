#!/bin/bash
# tests/bench/capture_memory.sh - memory and time of reading a big capture
# (security finding 10: reading must stay within a small multiple of the
# capture's size). Not part of `make test`; needs python3 and /usr/bin/time
# (Debian package `time`).
#
#   tests/bench/capture_memory.sh                 # a ~200 MB recorded-like capture
#   SIZE_MB=1000 tests/bench/capture_memory.sh
#   SHAPES="recorded tiny-stacks tiny-modules long-string" tests/bench/capture_memory.sh
#
# For each shape it writes a valid capture of ~SIZE_MB (module paths that do
# not exist, so `symbolize` converts nothing) and reports peak RSS (and its
# ratio to the file size) and wall time of
#   read:      read_capture_file alone ($BUILD/test-tools/read_capture, from
#              tests/tools/read_capture.cpp)
#   symbolize: `gsymprof symbolize CAPTURE -o /dev/null` (reading + symbolizing)
# Shapes: recorded (many stacks of 20-60 frames over 64 modules, the default),
# and hostile ones: tiny-stacks, tiny-modules, tiny-processes, long-string,
# repeated-indexes (one process listing module 0 over and over), junk (a huge
# unknown field), reordered (stacks before processes before modules: passes),
# python-stack (two stacks of nothing but Python frames, the densest frame:
# 13 bytes of text, 32 in memory).
#
# Environment: BUILD (default build), GSYMPROF (default $BUILD/gsymprof),
# SIZE_MB (default 200), SHAPES, WORK (default a temporary directory, removed),
# SKIP_SYMBOLIZE=1 (only the read column).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
GSYMPROF=${GSYMPROF:-$BUILD/gsymprof}
SIZE_MB=${SIZE_MB:-200}
SHAPES=${SHAPES:-recorded}
die() { echo "capture_memory: $*" >&2; exit 1; }
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (apt-get install time)"
command -v python3 > /dev/null || die "python3 missing"
READ_CAPTURE=$BUILD/test-tools/read_capture
[[ -x $GSYMPROF && -x $READ_CAPTURE ]] || die "build first: make BUILD=${BUILD#$ROOT/} all test-tools"
if [[ -n ${WORK:-} ]]; then
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
export GSYMPROF_CACHE=$WORK/cache  # an empty cache: nothing found, nothing converted

# make_capture SHAPE BYTES OUT
make_capture() {
  python3 - "$@" <<'EOF'
import random, sys
shape, target, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rnd = random.Random(1)
f = open(out, "w")
def header(samples, host='"bench"', version=1):
    f.write('{\n"format": "gsymprof-capture",\n"version": %d,\n"host": %s,\n"kernel_release": "6.1.0",\n'
            '"frequency_hz": 999,\n"start_time_unix_ns": 1,\n"duration_ns": 2,\n"call_graph": "fp",\n'
            '"samples": %d,\n"lost": {"ringbuf_full":0},\n' % (version, host, samples))
EMPTY_MODULE = '{"path":"","build_id":"","load_bias":"0x0","mappings":[],"error":""}'
if shape in ("recorded", "reordered"):
    nmod, nproc = 64, 16
    modules = []
    for m in range(nmod):
        base = 0x7f0000000000 + m * 0x10000000
        modules.append('{"path":"/nonexistent/lib%d.so","build_id":"%040x","load_bias":"0x%x","mappings":'
                       '[{"start":"0x%x","end":"0x%x","file_offset":"0x1000","perms":"r-xp"}],"error":""}'
                       % (m, m + 1, base, base + 0x1000, base + 0x200000))
    mods = ",".join(str(i) for i in range(nmod))
    processes = ['{"pid":%d,"comm":"proc%d","modules":[%s]}' % (100 + p, p, mods) for p in range(nproc)]
    # Frames from a pool, as in real profiles: the same functions recur.
    pool = ['{"module":%d,"address":"0x%x"}' % (rnd.randrange(nmod), rnd.randrange(0x1000, 0x200000))
            for _ in range(50000)]
    pool += ['{"unresolved":"anonymous-mapping","address":"0x%x"}' % rnd.getrandbits(47) for _ in range(2000)]
    stacks, size, total = [], 0, 0
    while size < target:
        count = rnd.randint(1, 50)
        total += count
        frames = ",".join(rnd.choice(pool) for _ in range(rnd.randint(20, 60)))
        s = '{"pid":%d,"comm":"thread%d","count":%d,"truncated":%s,"frames":[%s]}' % (
            100 + rnd.randrange(nproc), rnd.randrange(4), count, "true" if rnd.random() < 0.02 else "false", frames)
        stacks.append(s)
        size += len(s) + 4
    header(total)
    sections = [("modules", modules), ("processes", processes), ("stacks", stacks)]
    if shape == "reordered":
        sections.reverse()
    f.write(",\n".join('"%s": [\n  %s\n]' % (name, ",\n  ".join(items)) for name, items in sections) + "\n}\n")
elif shape == "tiny-stacks":
    item = '{"pid":1,"comm":"","count":1,"truncated":false,"frames":[]}'
    n = target // (len(item) + 1)
    header(n)
    f.write('"modules": [],\n"processes": [{"pid":1,"comm":"","modules":[]}],\n"stacks": [' + ",".join([item] * n) + "]\n}\n")
elif shape == "tiny-modules":
    n = target // (len(EMPTY_MODULE) + 1)
    header(0)
    f.write('"modules": [' + ",".join([EMPTY_MODULE] * n) + '],\n"processes": [],\n"stacks": []\n}\n')
elif shape == "tiny-processes":
    header(0)
    f.write('"modules": [],\n"processes": [')
    size, pid = 0, 0
    while size < target:
        s = '{"pid":%d,"comm":"","modules":[]}' % pid
        f.write(("," if pid else "") + s)
        size += len(s) + 1
        pid += 1
    f.write('],\n"stacks": []\n}\n')
elif shape == "long-string":
    header(0, '"' + "x" * target + '"')
    f.write('"modules": [],\n"processes": [],\n"stacks": []\n}\n')
elif shape == "repeated-indexes":
    header(0)
    f.write('"modules": [%s],\n"processes": [{"pid":1,"comm":"","modules":[%s]}],\n"stacks": []\n}\n'
            % (EMPTY_MODULE, ",".join(["0"] * (target // 2))))
elif shape == "python-stack":
    n = target // 26
    header(2, version=5)
    f.write('"python_frames": [{"qualname":"f","file":"f.py","line":1}],\n"modules": [],\n'
            '"processes": [{"pid":1,"comm":"","modules":[]}],\n"stacks": [')
    for i, frames in enumerate((n, n - 1)):
        f.write((',' if i else '') + '{"pid":1,"comm":"","count":1,"truncated":false,"frames":[' +
                ",".join(['{"python":0}'] * frames) + ']}')
    f.write("]\n}\n")
elif shape == "junk":
    header(0)
    f.write('"future": [' + ",".join(["[0]"] * (target // 4)) + '],\n"modules": [],\n"processes": [],\n"stacks": []\n}\n')
else:
    sys.exit("unknown shape " + shape)
EOF
}

# measure OUTPREFIX CMD...: peak RSS (kB) and wall seconds into globals.
measure() {
  /usr/bin/time -f "%M %e" -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err"
  local rc=$?
  read -r RSS_KB WALL < "$WORK/time"
  [[ $rc == 0 ]] || { echo "  $* failed (exit $rc): $(tail -n 2 "$WORK/err")" >&2; return 1; }
}

cell() {  # RSS_KB WALL BYTES
  awk -v k="$1" -v w="$2" -v b="$3" 'BEGIN { printf "%.0f MB (%.2fx), %.1f s", k / 1024, k * 1024 / b, w }'
}

echo "| shape | capture | read_capture_file: peak RSS (x size), time | gsymprof symbolize: peak RSS (x size), time |"
echo "|---|---|---|---|"
for shape in $SHAPES; do
  cap=$WORK/$shape.json
  make_capture "$shape" $((SIZE_MB * 1024 * 1024)) "$cap" || die "generating $shape failed"
  bytes=$(stat -c %s "$cap")
  read_cell="failed" sym_cell="skipped"
  measure "$READ_CAPTURE" "$cap" && read_cell=$(cell "$RSS_KB" "$WALL" "$bytes")
  if [[ -z ${SKIP_SYMBOLIZE:-} ]]; then
    sym_cell="failed"
    measure "$GSYMPROF" symbolize "$cap" -o /dev/null && sym_cell=$(cell "$RSS_KB" "$WALL" "$bytes")
  fi
  awk -v s="$shape" -v b="$bytes" -v r="$read_cell" -v y="$sym_cell" \
    'BEGIN { printf "| %s | %.0f MB | %s | %s |\n", s, b / 1048576, r, y }'
  rm -f "$cap"
done
