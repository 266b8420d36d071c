#!/usr/bin/env python3
"""tests/bench/serve_request.py - the `serve` section's requests and client
(tests/bench/sections/serve.sh). Python 3 standard library only: the protobuf
wire format is written and read by hand (the fields used are listed below).

  serve_request.py build --otlp OUT --pprof OUT [--locations N] [--seed S] FILE[:SYMFILE]...
      One profile with N distinct native locations (addresses inside the
      functions of FILEs, each a real ELF with a GNU build ID), as an OTLP
      ExportProfilesServiceRequest (opentelemetry-proto v1.11.0) and as a
      gzipped pprof. SYMFILE (default FILE) is where the function symbols
      are read (`nm -S`; `nm -DS` when it has no .symtab), e.g. libc's
      separate debug file. Each FILE is placed at its own base (0 for
      non-PIE), its executable PT_LOAD as the mapping, as a process maps it.
      Prints "BUILD_ID FILE SYMFILE LOCATIONS" per FILE.
  serve_request.py post URL BODY [--content-type T] [--count N] [--metrics URL]
      POSTs BODY N times on one keep-alive connection; per request prints
      "seconds status named_locations locations_total lines": named
      locations from the change of gsymprof_serve_frames_total{outcome}
      in --metrics (read between requests, not timed), lines (inline frames
      included) from the answer when it is a pprof, else "-".
      --until-all-named: POST until an answer names every location (at
      most N times) and print one line, "seconds requests named total lines",
      seconds from the first request sent to that answer read.
  serve_request.py stats FILE
      "p50 p99 mean" of column 1 of FILE (seconds -> ms).
"""
import argparse
import gzip
import http.client
import random
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from proto_wire import key, varint

# ------------------------------------------------------------ wire format --


def f_varint(field, n):
    return key(field, 0) + varint(n) if n else b""


def f_bytes(field, data):
    return key(field, 2) + varint(len(data)) + data


def f_packed(field, values):
    if not values:
        return b""
    return f_bytes(field, b"".join(varint(v) for v in values))


def f_fixed64(field, n):
    return key(field, 1) + n.to_bytes(8, "little")


def fields(data):
    """(field, wire, value) of one message: value is an int or bytes."""
    i, n = 0, len(data)
    while i < n:
        k, i = read_varint(data, i)
        field, wire = k >> 3, k & 7
        if wire == 0:
            v, i = read_varint(data, i)
        elif wire == 1:
            v, i = int.from_bytes(data[i:i + 8], "little"), i + 8
        elif wire == 2:
            length, i = read_varint(data, i)
            v, i = data[i:i + length], i + length
        elif wire == 5:
            v, i = int.from_bytes(data[i:i + 4], "little"), i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield field, wire, v


def read_varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


# --------------------------------------------------------------------- ELF --


def build_id(path):
    out = subprocess.run(["readelf", "-nW", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def elf_layout(path):
    """(is_pie_or_shared, [(offset, vaddr, filesz, memsz, flags)] of PT_LOAD)."""
    out = subprocess.run(["readelf", "-hlW", path], capture_output=True, text=True).stdout
    dyn = bool(re.search(r"Type:\s+DYN", out))
    loads = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            flags = "".join(x for x in f[7:-1])
            loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16), int(f[5], 16), flags))
    return dyn, loads


def functions(symfile):
    """[(vaddr, size)] of the function symbols with a size, deduplicated."""
    seen = {}
    for flag in (["-S"], ["-DS"]):
        out = subprocess.run(["nm", "--defined-only"] + flag + [symfile], capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 4 and f[2] in "tTwWiI" and len(f[2]) == 1:
                addr, size = int(f[0], 16), int(f[1], 16)
                if size > 0 and addr > 0:
                    seen[addr] = max(size, seen.get(addr, 0))
        if seen:
            break
    return sorted(seen.items())


# ----------------------------------------------------------------- build --


def cmd_build(args):
    rng = random.Random(args.seed)
    modules = []
    for i, spec in enumerate(args.files):
        path, _, symfile = spec.partition(":")
        symfile = symfile or path
        bid = build_id(path)
        if not bid:
            sys.exit("serve_request.py: %s has no GNU build ID" % path)
        dyn, loads = elf_layout(path)
        text = [l for l in loads if "E" in l[4]]
        if len(text) != 1:
            sys.exit("serve_request.py: %s: %d executable PT_LOADs" % (path, len(text)))
        offset, vaddr, _, memsz, _ = text[0]
        base = 0x7F0000000000 + (i << 32) if dyn else 0
        funcs = [(a, s) for a, s in functions(symfile) if vaddr <= a and a + s <= vaddr + memsz]
        if not funcs:
            sys.exit("serve_request.py: no function symbols in %s" % symfile)
        start = base + (vaddr & ~0xFFF)
        modules.append(dict(path=path, symfile=symfile, bid=bid, base=base, funcs=funcs,
                            start=start, limit=base + vaddr + memsz, offset=offset & ~0xFFF))
    # Locations spread over the modules by their number of functions, each
    # an address inside a function (distinct).
    total_funcs = sum(len(m["funcs"]) for m in modules)
    picked = []
    for mi, m in enumerate(modules):
        want = max(1, round(args.locations * len(m["funcs"]) / total_funcs))
        if mi == len(modules) - 1:
            want = max(1, args.locations - len(picked))
        addrs = set()
        tries = 0
        while len(addrs) < want and tries < want * 20:
            tries += 1
            a, s = rng.choice(m["funcs"])
            addrs.add(m["base"] + a + rng.randrange(s))
        m["count"] = len(addrs)
        picked += [(mi, a) for a in sorted(addrs)]
    rng.shuffle(picked)
    # Stacks of 20 locations (leaf first); each location in one stack.
    depth = 20
    stacks = [list(range(i, min(i + depth, len(picked)))) for i in range(0, len(picked), depth)]

    # OTLP: dictionary tables with their zero entries at index 0.
    strings = [""]
    sindex = {"": 0}

    def s(text):
        if text not in sindex:
            sindex[text] = len(strings)
            strings.append(text)
        return sindex[text]

    attributes = [b""]  # zero KeyValueAndUnit
    mappings = [b""]
    for m in modules:
        anyvalue = f_bytes(1, m["bid"].encode())  # AnyValue.string_value
        attributes.append(f_varint(1, s("process.executable.build_id.gnu")) + f_bytes(2, anyvalue))
        mappings.append(f_varint(1, m["start"]) + f_varint(2, m["limit"]) + f_varint(3, m["offset"]) +
                        f_varint(4, s(m["path"].rsplit("/", 1)[-1])) + f_packed(5, [len(attributes) - 1]))
    locations = [b""] + [f_varint(1, mi + 1) + f_varint(2, a) for mi, a in picked]
    stack_table = [b""] + [f_packed(1, [i + 1 for i in st]) for st in stacks]
    now = int(time.time() * 1e9)
    samples = b"".join(f_bytes(2, f_varint(1, k + 1) + f_packed(4, [1 + k % 7])) for k in range(len(stacks)))
    profile = (f_bytes(1, f_varint(1, s("samples")) + f_varint(2, s("count"))) + samples +
               f_fixed64(3, now) + f_varint(4, 10 ** 10))
    scope = f_bytes(1, f_bytes(1, b"serve_request.py")) + f_bytes(2, profile)
    resource = f_bytes(1, f_bytes(1, f_bytes(1, b"service.name") + f_bytes(2, f_bytes(1, b"serve-bench"))))
    resource_profiles = resource + f_bytes(2, scope)
    dictionary = (b"".join(f_bytes(1, x) for x in mappings) + b"".join(f_bytes(2, x) for x in locations) +
                  f_bytes(3, b"") + f_bytes(4, b"") + b"".join(f_bytes(5, x.encode()) for x in strings) +
                  b"".join(f_bytes(6, x) for x in attributes) + b"".join(f_bytes(7, x) for x in stack_table))
    with open(args.otlp, "wb") as out:
        out.write(f_bytes(1, resource_profiles) + f_bytes(2, dictionary))

    # pprof: ids from 1, the same addresses and mappings.
    pstrings = [""]
    pindex = {"": 0}

    def ps(text):
        if text not in pindex:
            pindex[text] = len(pstrings)
            pstrings.append(text)
        return pindex[text]

    body = f_bytes(1, f_varint(1, ps("samples")) + f_varint(2, ps("count")))
    for k, st in enumerate(stacks):
        body += f_bytes(2, f_packed(1, [i + 1 for i in st]) + f_packed(2, [1 + k % 7]))
    for mi, m in enumerate(modules):
        body += f_bytes(3, f_varint(1, mi + 1) + f_varint(2, m["start"]) + f_varint(3, m["limit"]) +
                        f_varint(4, m["offset"]) + f_varint(5, ps(m["path"])) + f_varint(6, ps(m["bid"])))
    for li, (mi, a) in enumerate(picked):
        body += f_bytes(4, f_varint(1, li + 1) + f_varint(2, mi + 1) + f_varint(3, a))
    body += b"".join(f_bytes(6, x.encode()) for x in pstrings)
    with open(args.pprof, "wb") as out:
        out.write(gzip.compress(body, 6))
    for m in modules:
        print(m["bid"], m["path"], m["symfile"], m["count"])


# ------------------------------------------------------------------ post --


def frames_named(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=30).read().decode()
    counts = {}
    for m in re.finditer(r'^gsymprof_serve_frames_total\{outcome="([a-z_]+)"\} (\d+)$', text, re.M):
        counts[m.group(1)] = int(m.group(2))
    return counts


def pprof_lines(answer):
    """(locations with lines, lines) of a gzipped pprof."""
    data = gzip.decompress(answer) if answer[:2] == b"\x1f\x8b" else answer
    named = lines = 0
    for field, _, v in fields(data):
        if field == 4:
            n = sum(1 for f, _, _ in fields(v) if f == 4)
            named += n > 0
            lines += n
    return named, lines


def cmd_post(args):
    url = urllib.parse.urlsplit(args.url)
    body = open(args.body, "rb").read()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    headers = {"Content-Type": args.content_type}
    before = frames_named(args.metrics) if args.metrics else {}
    start = time.perf_counter()
    for k in range(args.count):
        t0 = time.perf_counter()
        conn.request("POST", url.path, body, headers)
        response = conn.getresponse()
        answer = response.read()
        t1 = time.perf_counter()
        named = total = "-"
        if args.metrics:
            after = frames_named(args.metrics)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            named, total = delta.get("named", 0), sum(delta.values())
            before = after
        lines = "-"
        if response.status == 200 and url.path.endswith("/pprof"):
            lines = pprof_lines(answer)[1]
        if not args.until_all_named:
            print("%.6f %d %s %s %s" % (t1 - t0, response.status, named, total, lines), flush=True)
        elif named == total and total != "-" and total > 0 or k + 1 == args.count:
            print("%.6f %d %s %s %s" % (t1 - start, k + 1, named, total, lines), flush=True)
            return


def cmd_stats(args):
    v = sorted(float(line.split()[0]) for line in open(args.file) if line.strip())
    if not v:
        print("- - -")
        return

    def pct(p):  # nearest rank
        return v[min(len(v) - 1, max(0, int(-(-p * len(v) // 100)) - 1))]
    print("%.2f %.2f %.2f" % (pct(50) * 1e3, pct(99) * 1e3, sum(v) / len(v) * 1e3))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--otlp", required=True)
    b.add_argument("--pprof", required=True)
    b.add_argument("--locations", type=int, default=10000)
    b.add_argument("--seed", type=int, default=32)
    b.add_argument("files", nargs="+")
    p = sub.add_parser("post")
    p.add_argument("url")
    p.add_argument("body")
    p.add_argument("--content-type", default="application/x-protobuf")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--metrics")
    p.add_argument("--until-all-named", action="store_true",
                   help="stop when an answer names every location (at most --count requests); print "
                        "one line: seconds since the first request, requests, named, total, lines")
    st = sub.add_parser("stats")
    st.add_argument("file")
    args = parser.parse_args()
    {"build": cmd_build, "post": cmd_post, "stats": cmd_stats}[args.cmd](args)


if __name__ == "__main__":
    main()
