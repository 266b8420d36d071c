#!/usr/bin/env python3
"""Decode the OpenTelemetry Collector file exporter's profiles output (issue 27).

Input: the file exporter's `format: json` output (what otelcol.bash
configures): one OTLP/JSON ProfilesData object per line, i.e. per export
request the Collector received ({"resourceProfiles": [...], "dictionary":
{...}}), opentelemetry-proto v1.10/v1.11 `profiles/v1development`.
Both camelCase and snake_case field names are read, and attribute keys and
string values given by reference (keyStrindex, stringValueStrindex, as the
Collector's pdata writes resource and scope attributes) are resolved.
Standard library only (Python >= 3.9).

Usage:
  decode.py [--lint] [--loc-attrs] FILE...   every record, sample by sample
  decode.py --summary [--by KEY]... FILE...  totals
  decode.py --folded [--type T[/U]] [--comm-attr KEY] FILE...
                                             folded stacks, gsymprof-style
  FILE may be '-' for stdin. --lint makes any spec violation found (see
  below) fatal: exit status 1. Without it they are warnings on stderr.

Output, default mode: tab-separated lines, the first field says what:
  mapping  FILENAME  0xSTART-0xLIMIT@0xOFFSET  KEY=VALUE...
      each distinct mapping of the dictionaries (printed when first met, in
      file order; a mapping's attributes carry its build ID, e.g.
      process.executable.build_id.gnu=HEX)
  resource KEY=VALUE...
      one per ResourceProfiles, its resource attributes
  profile  TYPE/UNIT  period=TYPE/UNIT:N  time_unix_nano=N  duration_nano=N
           samples=N  [profile_id=HEX]  KEY=VALUE...
      one per Profile (scope name/version as scope.name= / scope.version=,
      then the profile's own attributes)
  sample   TYPE/UNIT  VALUE  TIMESTAMPS  STACK  KEY=VALUE...
      one per Sample. TYPE/UNIT: its profile's sample_type. VALUE: the sum of
      Sample.values, or, when values is empty, the number of timestamps (the
      proto: each timestamp alone counts 1). TIMESTAMPS: how many
      timestamps_unix_nano it has. STACK: root first, ';'-separated. The
      KEY=VALUE attributes are the resource's, the scope's, the profile's
      and the sample's merged (the innermost wins), sorted by key.

  A frame is named by its Line's Function name (name_strindex, else
  system_name_strindex). A Location with several lines is an inline chain
  (the proto: lines[0] innermost, the last entry the function the others
  were inlined into): it prints outermost first, the outermost plain and
  every inlined one suffixed `_[i]`, as gsymprof's folded output does, e.g.
  lines [mix, add_one, hot_loop] -> `hot_loop;add_one_[i];mix_[i]`.
  A Location without lines prints `BASENAME+0xADDRESS` (basename of its
  mapping's file name, the Location.address as sent), or `0xADDRESS` with no
  mapping, `[unknown]` when the address is 0 too. A Location whose attribute
  profile.frame.type is "kernel" gets `_[k]` on each of its frames, one
  whose type is "cpython" `_[p]` (gsymprof's folded suffixes).
  With --loc-attrs, a location's attributes follow each of its frames as
  `{k=v,k=v}`. In names ';' becomes ':' and control characters print as
  \\xHH (gsymprof's folded rules); in VALUEs of attributes a backslash, tab
  and newline print as \\\\, \\t, \\n.

Output, --summary: tab-separated
  records   N                          export records (lines) read
  mappings  N  with_build_id=N         distinct mappings / with a build_id attribute
  type      TYPE/UNIT  profiles=N  samples=N  value=V
  by        KEY  VALUE  TYPE/UNIT  samples=N  value=V
      for each KEY of --by (default thread.name, process.executable.name,
      service.name, process.pid, container.id, the keys that occur), merged
      attributes as in sample lines; a sample lacking KEY counts under
      VALUE "(none)".

Output, --folded: `[COMM;]ROOT;...;LEAF VALUE`, one line per distinct stack,
sorted, VALUEs of equal stacks summed, for the samples whose sample_type is
--type (TYPE or TYPE/UNIT; default samples/count when present, else the
first type seen). --comm-attr KEY puts the merged attribute KEY (e.g.
thread.name or process.executable.name) first, as gsymprof's comm.

Checks (warnings, or errors with --lint): every dictionary table's index 0 is
present and the zero value (string_table[0] == ""); every index (stack,
location, mapping, function, string, attribute, link) is in range; a sample
has values or timestamps, and the same number of each when both are set;
no key twice in one attribute_indices list.
"""

import argparse
import base64
import json
import os
import sys
from collections import defaultdict

DEFAULT_BY = ["thread.name", "process.executable.name", "service.name",
              "process.pid", "container.id"]


def field(obj, camel, default=None):
    """obj[camel], or its snake_case spelling."""
    if not isinstance(obj, dict):
        return default
    if camel in obj:
        return obj[camel]
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return obj.get(snake, default)


def as_int(v, default=0):
    if v is None:
        return default
    return int(v)


def escape_value(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def escape_name(s):
    out = []
    for ch in s:
        o = ord(ch)
        if o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F:
            out.append("\\x%02x" % o)
        elif ch == ";":
            out.append(":")
        else:
            out.append(ch)
    return "".join(out)


class Problems:
    def __init__(self, fatal):
        self.fatal = fatal
        self.count = 0
        self.seen = set()

    def __call__(self, where, msg):
        self.count += 1
        key = msg
        if key in self.seen:   # say each kind of problem once per message
            return
        self.seen.add(key)
        kind = "error" if self.fatal else "warning"
        print("decode.py: %s: %s: %s" % (kind, where, msg), file=sys.stderr)


class Record:
    """One export record: a ProfilesData object and its dictionary."""

    def __init__(self, data, where, problem):
        self.where = where
        self.problem = problem
        d = field(data, "dictionary", {}) or {}
        self.strings = list(field(d, "stringTable", []) or [])
        self.mappings = field(d, "mappingTable", []) or []
        self.locations = field(d, "locationTable", []) or []
        self.functions = field(d, "functionTable", []) or []
        self.links = field(d, "linkTable", []) or []
        self.attributes = field(d, "attributeTable", []) or []
        self.stacks = field(d, "stackTable", []) or []
        self.resources = field(data, "resourceProfiles", []) or []
        self.check_zero_entries()

    def check_zero_entries(self):
        if not self.strings or self.strings[0] != "":
            self.problem(self.where, 'string_table[0] is not "" (or the table is empty)')
        for name, table in (("mapping_table", self.mappings),
                            ("location_table", self.locations),
                            ("function_table", self.functions),
                            ("link_table", self.links),
                            ("attribute_table", self.attributes),
                            ("stack_table", self.stacks)):
            if not table:
                self.problem(self.where, "%s is empty: index 0 must be the zero value" % name)
            elif not is_zero(table[0]):
                self.problem(self.where, "%s[0] is not the zero value: %s"
                             % (name, json.dumps(table[0], sort_keys=True)))

    def get(self, table, name, idx):
        if idx < 0 or idx >= len(table):
            self.problem(self.where, "%s index %d out of range [0, %d)" % (name, idx, len(table)))
            return None
        return table[idx]

    def string(self, idx):
        s = self.get(self.strings, "string_table", as_int(idx))
        return "" if s is None else s

    # -- values and attributes --------------------------------------------
    def any_value(self, v):
        if not isinstance(v, dict) or not v:
            return ""
        if "stringValue" in v or "string_value" in v:
            return field(v, "stringValue")
        if "stringValueStrindex" in v or "string_value_strindex" in v:
            return self.string(field(v, "stringValueStrindex"))
        if "intValue" in v or "int_value" in v:
            return str(int(field(v, "intValue")))
        if "boolValue" in v or "bool_value" in v:
            return "true" if field(v, "boolValue") else "false"
        if "doubleValue" in v or "double_value" in v:
            return repr(float(field(v, "doubleValue")))
        if "bytesValue" in v or "bytes_value" in v:
            return base64.b64decode(field(v, "bytesValue")).hex()
        if "arrayValue" in v or "array_value" in v:
            vals = field(field(v, "arrayValue"), "values", []) or []
            return "[" + ",".join(self.any_value(x) for x in vals) + "]"
        if "kvlistValue" in v or "kvlist_value" in v:
            kvs = field(field(v, "kvlistValue"), "values", []) or []
            return "{" + ",".join("%s=%s" % kv for kv in self.key_values(kvs)) + "}"
        return json.dumps(v, sort_keys=True)

    def key_values(self, kvs):
        """KeyValue list (resource/scope attributes) -> [(key, value)]."""
        out = []
        for kv in kvs or []:
            key = field(kv, "key")
            if not key:
                key = self.string(field(kv, "keyStrindex", 0))
            out.append((key, self.any_value(field(kv, "value"))))
        return out

    def indexed_attributes(self, indices, what):
        """attribute_indices -> [(key, value)] through attribute_table."""
        out = []
        keys = set()
        for idx in indices or []:
            a = self.get(self.attributes, "attribute_table", as_int(idx))
            if a is None:
                continue
            key = self.string(field(a, "keyStrindex", 0))
            if key in keys:
                self.problem(self.where, "%s: key %r twice in one attribute_indices" % (what, key))
            keys.add(key)
            out.append((key, self.any_value(field(a, "value"))))
        return out

    # -- mappings and stacks ----------------------------------------------
    def mapping_line(self, m):
        name = self.string(field(m, "filenameStrindex", 0))
        rng = "0x%x-0x%x@0x%x" % (as_int(field(m, "memoryStart")), as_int(field(m, "memoryLimit")),
                                  as_int(field(m, "fileOffset")))
        attrs = self.indexed_attributes(field(m, "attributeIndices"), "mapping")
        return "\t".join(["mapping", escape_value(name), rng] +
                         ["%s=%s" % (k, escape_value(v)) for k, v in attrs])

    def function_name(self, fidx):
        f = self.get(self.functions, "function_table", as_int(fidx))
        if f is None:
            return "[unknown]"
        name = self.string(field(f, "nameStrindex", 0))
        if not name:
            name = self.string(field(f, "systemNameStrindex", 0))
        return escape_name(name) if name else "[unknown]"

    def location_frames(self, lidx, loc_attrs):
        """Frames of one location, outermost first."""
        loc = self.get(self.locations, "location_table", as_int(lidx))
        if loc is None:
            return ["[unknown]"]
        attrs = self.indexed_attributes(field(loc, "attributeIndices"), "location")
        kernel = any(k == "profile.frame.type" and v == "kernel" for k, v in attrs)
        python = any(k == "profile.frame.type" and v == "cpython" for k, v in attrs)
        lines = field(loc, "lines", []) or []
        if lines:
            frames = []
            n = len(lines)
            for j in range(n - 1, -1, -1):   # lines[-1] is the outermost
                name = self.function_name(field(lines[j], "functionIndex", 0))
                if j < n - 1:
                    name += "_[i]"
                frames.append(name)
        else:
            addr = as_int(field(loc, "address"))
            midx = as_int(field(loc, "mappingIndex"))
            m = self.get(self.mappings, "mapping_table", midx) if midx else None
            if m is not None:
                base = os.path.basename(self.string(field(m, "filenameStrindex", 0))) or "[unknown]"
                frames = ["%s+0x%x" % (escape_name(base), addr)]
            elif addr:
                frames = ["0x%x" % addr]
            else:
                frames = ["[unknown]"]
        if kernel:
            frames = [f + "_[k]" for f in frames]
        if python:
            frames = [f + "_[p]" for f in frames]
        if loc_attrs and attrs:
            suffix = "{" + ",".join("%s=%s" % (k, escape_name(v)) for k, v in attrs) + "}"
            frames = [f + suffix for f in frames]
        return frames

    def stack(self, sidx, loc_attrs):
        st = self.get(self.stacks, "stack_table", as_int(sidx))
        if st is None:
            return "[unknown]"
        frames = []
        for lidx in reversed(field(st, "locationIndices", []) or []):   # leaf first in the proto
            frames.extend(self.location_frames(lidx, loc_attrs))
        return ";".join(frames) if frames else "[empty]"


def is_zero(v):
    """True for the proto zero value as OTLP/JSON writes it (fields omitted)."""
    if isinstance(v, dict):
        return all(is_zero(x) for x in v.values())
    if isinstance(v, list):
        return not v
    if isinstance(v, str):
        return v in ("", "0") or set(v) == {"0"} or v == "AAAAAAAAAAAAAAAAAAAAAA==" or v == "AAAAAAAAAAA="
    return not v


def read_records(paths):
    for path in paths:
        fh = sys.stdin if path == "-" else open(path, encoding="utf-8")
        with fh:
            for n, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                yield "%s:%d" % (path, n), json.loads(line)


def samples(paths, problem, loc_attrs=False, events=None):
    """Yields (kind, record, payload) for every mapping, resource, profile and
    sample in file order; a sample's payload is a dict."""
    for where, data in read_records(paths):
        rec = Record(data, where, problem)
        yield "record", rec, None
        for m in rec.mappings[1:]:
            yield "mapping", rec, m
        for rp in rec.resources:
            res_attrs = rec.key_values(field(field(rp, "resource", {}), "attributes", []))
            yield "resource", rec, res_attrs
            for sp in field(rp, "scopeProfiles", []) or []:
                scope = field(sp, "scope", {}) or {}
                scope_attrs = []
                if field(scope, "name"):
                    scope_attrs.append(("scope.name", field(scope, "name")))
                if field(scope, "version"):
                    scope_attrs.append(("scope.version", field(scope, "version")))
                scope_attrs += rec.key_values(field(scope, "attributes", []))
                for prof in field(sp, "profiles", []) or []:
                    st = field(prof, "sampleType", {}) or {}
                    stype = "%s/%s" % (rec.string(field(st, "typeStrindex", 0)),
                                       rec.string(field(st, "unitStrindex", 0)))
                    pt = field(prof, "periodType", {}) or {}
                    ptype = "%s/%s" % (rec.string(field(pt, "typeStrindex", 0)),
                                       rec.string(field(pt, "unitStrindex", 0)))
                    prof_attrs = rec.indexed_attributes(field(prof, "attributeIndices"), "profile")
                    smps = field(prof, "samples", []) or []
                    yield "profile", rec, {
                        "type": stype, "period_type": ptype,
                        "period": as_int(field(prof, "period")),
                        "time": as_int(field(prof, "timeUnixNano")),
                        "duration": as_int(field(prof, "durationNano")),
                        "id": field(prof, "profileId", ""),
                        "nsamples": len(smps),
                        "attrs": scope_attrs + prof_attrs,
                    }
                    outer = {}
                    for k, v in res_attrs + scope_attrs + prof_attrs:
                        outer[k] = v
                    for s in smps:
                        values = [int(x) for x in field(s, "values", []) or []]
                        stamps = field(s, "timestampsUnixNano", []) or []
                        if not values and not stamps:
                            problem(where, "a sample with neither values nor timestamps")
                        if values and stamps and len(values) != len(stamps):
                            problem(where, "a sample with %d values and %d timestamps"
                                    % (len(values), len(stamps)))
                        link = as_int(field(s, "linkIndex"))
                        if link:
                            rec.get(rec.links, "link_table", link)
                        attrs = dict(outer)
                        for k, v in rec.indexed_attributes(field(s, "attributeIndices"), "sample"):
                            attrs[k] = v
                        yield "sample", rec, {
                            "type": stype,
                            "value": sum(values) if values else len(stamps),
                            "timestamps": len(stamps),
                            "stack": rec.stack(field(s, "stackIndex", 0), loc_attrs),
                            "attrs": attrs,
                        }


def kv_fields(pairs):
    return ["%s=%s" % (k, escape_value(v)) for k, v in pairs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="The output formats are described at the top of this script.")
    ap.add_argument("files", nargs="+", metavar="FILE")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--summary", action="store_true")
    mode.add_argument("--folded", action="store_true")
    ap.add_argument("--by", action="append", metavar="KEY")
    ap.add_argument("--type", metavar="TYPE[/UNIT]")
    ap.add_argument("--comm-attr", metavar="KEY")
    ap.add_argument("--loc-attrs", action="store_true")
    ap.add_argument("--lint", action="store_true")
    args = ap.parse_args()
    problem = Problems(args.lint)
    out = sys.stdout

    if args.summary:
        records = 0
        mappings = {}
        types = defaultdict(lambda: [0, 0, 0])   # profiles, samples, value
        by = defaultdict(lambda: [0, 0])
        keys = args.by or DEFAULT_BY
        seen_keys = set()
        all_samples = []
        for kind, rec, p in samples(args.files, problem):
            if kind == "record":
                records += 1
            elif kind == "mapping":
                line = rec.mapping_line(p)
                mappings[line] = "build_id" in line
            elif kind == "profile":
                types[p["type"]][0] += 1
            elif kind == "sample":
                t = types[p["type"]]
                t[1] += 1
                t[2] += p["value"]
                seen_keys.update(k for k in keys if k in p["attrs"])
                all_samples.append(p)
        for p in all_samples:
            for k in keys:
                if k in seen_keys:
                    b = by[(k, p["attrs"].get(k, "(none)"), p["type"])]
                    b[0] += 1
                    b[1] += p["value"]
        out.write("records\t%d\n" % records)
        out.write("mappings\t%d\twith_build_id=%d\n" % (len(mappings), sum(mappings.values())))
        for t in sorted(types):
            out.write("type\t%s\tprofiles=%d\tsamples=%d\tvalue=%d\n" % ((t,) + tuple(types[t])))
        for k in keys:
            for (key, val, t) in sorted(x for x in by if x[0] == k):
                n, v = by[(key, val, t)]
                out.write("by\t%s\t%s\t%s\tsamples=%d\tvalue=%d\n" % (key, escape_value(val), t, n, v))
    elif args.folded:
        stacks = defaultdict(int)
        per_type = defaultdict(lambda: defaultdict(int))
        order = []
        for kind, rec, p in samples(args.files, problem, args.loc_attrs):
            if kind != "sample":
                continue
            if p["type"] not in per_type:
                order.append(p["type"])
            stack = p["stack"]
            if args.comm_attr:
                stack = escape_name(p["attrs"].get(args.comm_attr, "[unknown]")) + ";" + stack
            per_type[p["type"]][stack] += p["value"]
        want = args.type
        if want is None:
            want = "samples/count" if "samples/count" in per_type else (order[0] if order else "")
        for t in order:
            if t == want or t.split("/")[0] == want:
                for s, v in per_type[t].items():
                    stacks[s] += v
        for s in sorted(stacks):
            out.write("%s %d\n" % (s, stacks[s]))
    else:
        printed_mappings = set()
        for kind, rec, p in samples(args.files, problem, args.loc_attrs):
            if kind == "mapping":
                line = rec.mapping_line(p)
                if line not in printed_mappings:
                    printed_mappings.add(line)
                    out.write(line + "\n")
            elif kind == "resource":
                out.write("\t".join(["resource"] + kv_fields(sorted(p))) + "\n")
            elif kind == "profile":
                fields = ["profile", p["type"], "period=%s:%d" % (p["period_type"], p["period"]),
                          "time_unix_nano=%d" % p["time"], "duration_nano=%d" % p["duration"],
                          "samples=%d" % p["nsamples"]]
                if p["id"]:
                    fields.append("profile_id=%s" % p["id"])
                out.write("\t".join(fields + kv_fields(p["attrs"])) + "\n")
            elif kind == "sample":
                out.write("\t".join(["sample", p["type"], str(p["value"]), str(p["timestamps"]),
                                     p["stack"]] + kv_fields(sorted(p["attrs"].items()))) + "\n")
    out.flush()
    if args.lint and problem.count:
        print("decode.py: %d problem(s) found" % problem.count, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
