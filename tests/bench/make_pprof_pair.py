#!/usr/bin/env python3
"""tests/bench/make_pprof_pair.py - two gzipped pprof profiles for the diff
section of tests/bench/run.sh: BASE with STACKS unique stacks over a call
tree of FUNCTIONS functions (depths 8-40, counts skewed), and NEW, the same
stacks with the counts of stacks whose leaf is one of 10 "grew" functions
tripled and of 10 "shrank" functions cut to a third, and 1% of the stacks
new. Deterministic for a seed. Also prints the grew/shrank leaves, one per
line, "grew NAME" / "shrank NAME".

  make_pprof_pair.py BASE.pb.gz NEW.pb.gz [STACKS] [FUNCTIONS] [SEED]

Only the fields both readers need (sample_type, sample, location, function,
string_table, period_type, period) are written, by hand: no protobuf
package needed.
"""
import gzip
import random
import sys

from proto_wire import key, varint


def field_varint(num, value):
    return key(num, 0) + varint(value)


def field_bytes(num, data):
    return key(num, 2) + varint(len(data)) + data


def packed(num, values):
    return field_bytes(num, b"".join(varint(v) for v in values))


def encode(strings, functions, samples):
    """functions: list of (name_index); samples: list of (location ids leaf first, [values])."""
    out = bytearray()
    out += field_bytes(1, field_varint(1, strings["samples"]) + field_varint(2, strings["count"]))
    out += field_bytes(1, field_varint(1, strings["cpu"]) + field_varint(2, strings["nanoseconds"]))
    for locs, values in samples:
        out += field_bytes(2, packed(1, locs) + packed(2, values))
    for fid in range(1, len(functions) + 1):
        # Location fid holds function fid at line 1.
        line = field_varint(1, fid) + field_varint(2, 1)
        out += field_bytes(4, field_varint(1, fid) + field_bytes(4, line))
    for fid, name in enumerate(functions, start=1):
        out += field_bytes(5, field_varint(1, fid) + field_varint(2, name) + field_varint(3, name)
                           + field_varint(4, strings["file"]))
    table = sorted(strings.items(), key=lambda kv: kv[1])
    for s, _ in table:
        out += field_bytes(6, s.encode())
    out += field_bytes(11, field_varint(1, strings["cpu"]) + field_varint(2, strings["nanoseconds"]))
    out += field_varint(12, 10_000_000)
    return bytes(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base_path, new_path = sys.argv[1:3]
    n_stacks = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    n_funcs = int(sys.argv[4]) if len(sys.argv) > 4 else 5_000
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 31)
    strings = {"": 0}
    for s in ("samples", "count", "cpu", "nanoseconds", "bench/generated.cc"):
        strings.setdefault(s, len(strings))
    strings["file"] = strings["bench/generated.cc"]
    names = [f"module{i % 40}::component{i % 333}::function_{i}(int, std::string const&)" for i in range(n_funcs)]
    for n in names:
        strings.setdefault(n, len(strings))
    functions = [strings[n] for n in names]
    # A call tree: each function calls a few others; stacks are random walks
    # from one of 8 roots.
    callees = [[rng.randrange(n_funcs) for _ in range(6)] for _ in range(n_funcs)]
    roots = [rng.randrange(n_funcs) for _ in range(8)]
    stacks = set()
    while len(stacks) < n_stacks * 101 // 100:
        f = rng.choice(roots)
        path = [f]
        for _ in range(rng.randint(8, 40)):
            f = rng.choice(callees[f])
            path.append(f)
        stacks.add(tuple(path))
    stacks = sorted(stacks)
    rng.shuffle(stacks)
    only_new = set(stacks[n_stacks:])
    leaves = sorted({s[-1] for s in stacks})
    changed = rng.sample(leaves, 20)
    grew, shrank = set(changed[:10]), set(changed[10:])
    base, new = [], []
    for s in stacks:
        count = max(1, int(1000 / (1 + rng.paretovariate(1.2))))
        locs = [f + 1 for f in reversed(s)]  # leaf first, 1-based ids
        if s not in only_new:
            base.append((locs, [count, count * 10_000_000]))
        c = count * 3 if s[-1] in grew else max(1, count // 3) if s[-1] in shrank else count
        new.append((locs, [c, c * 10_000_000]))
    for path, samples in ((base_path, base), (new_path, new)):
        with gzip.open(path, "wb", compresslevel=6) as f:
            f.write(encode(strings, functions, samples))
    for f in sorted(grew):
        print("grew", names[f])
    for f in sorted(shrank):
        print("shrank", names[f])


if __name__ == "__main__":
    main()
