#!/usr/bin/env python3
"""gsym_v2_writer.py - an independent GSYM version 2 writer for gsym_v2.sh.

    gsym_v2_writer.py [--big-endian] IN.gsym OUT.gsym

Reads a GSYM version 1 file and writes the same content as version 2,
written from the format description (LLVM's GSYM format, gsym/FORMAT.md §2-§9,
gsym-rs docs/format.md), not from gsymprof's C++: a 20-byte header, a
directory of {u32 type, u64 offset, u64 size} entries ended by an all-zero
one, 8-byte string offsets in FunctionInfo names, inline-tree names,
call-site patterns and file entries, u64 address-info offsets counted from
the FunctionInfo section. On purpose the sections are not in LLVM's order,
not aligned beyond what the data needs, and an unknown section type is
added: a reader must follow the directory and skip what it does not know.
"""
import struct
import sys


class In:
    def __init__(self, data, endian):
        self.data, self.e, self.pos = data, endian, 0

    def fixed(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("truncated at 0x%x" % self.pos)
        (v,) = struct.unpack_from(self.e + fmt, self.data, self.pos)
        self.pos += size
        return v

    def u8(self):
        return self.fixed("B")

    def u32(self):
        return self.fixed("I")

    def u64(self):
        return self.fixed("Q")

    def leb(self):
        """The raw bytes of one LEB128 value (copied as they are)."""
        start = self.pos
        while self.data[self.pos] & 0x80:
            self.pos += 1
        self.pos += 1
        return self.data[start:self.pos]

    def uleb(self):
        raw, value = self.leb(), 0
        for i, byte in enumerate(raw):
            value |= (byte & 0x7F) << (7 * i)
        return value


class Out:
    def __init__(self, endian):
        self.e, self.b = endian, bytearray()

    def put(self, fmt, v):
        self.b += struct.pack(self.e + fmt, v)


def convert_inline(src, out):
    """One inline node and its children; returns False for a list end."""
    count_raw = src.leb()
    out.b += count_raw
    count = 0
    for i, byte in enumerate(count_raw):
        count |= (byte & 0x7F) << (7 * i)
    if count == 0:
        return False
    for _ in range(2 * count):
        out.b += src.leb()  # range start and size
    has_children = src.u8()
    out.put("B", has_children)
    out.put("Q", src.u32())  # name: 4 -> 8 bytes
    out.b += src.leb()  # call file
    out.b += src.leb()  # call line
    if has_children:
        while convert_inline(src, out):
            pass
    return True


def convert_record(src, endian_out):
    """One FunctionInfo record at src.pos, rewritten with 8-byte names."""
    out = Out(endian_out)
    out.put("I", src.u32())  # size
    out.put("Q", src.u32())  # name
    while True:
        kind, length = src.u32(), src.u32()
        payload = In(src.data[src.pos:src.pos + length], src.e)
        src.pos += length
        body = Out(endian_out)
        if kind == 0:
            out.put("I", 0)
            out.put("I", 0)
            return out.b
        if kind == 1:  # line table: LEB128 and single bytes only
            body.b += payload.data
        elif kind == 2:
            convert_inline(payload, body)
        elif kind == 3:  # merged functions: count, then sized records
            n = payload.u32()
            body.put("I", n)
            for _ in range(n):
                size = payload.u32()
                nested = In(payload.data[payload.pos:payload.pos + size], src.e)
                payload.pos += size
                record = convert_record(nested, endian_out)
                body.put("I", len(record))
                body.b += record
        elif kind == 4:  # call sites
            n = payload.u32()
            body.put("I", n)
            for _ in range(n):
                body.put("Q", payload.u64())
                body.put("B", payload.u8())
                patterns = payload.u32()
                body.put("I", patterns)
                for _ in range(patterns):
                    body.put("Q", payload.u32())
        else:
            raise ValueError("unknown InfoType %d" % kind)
        out.put("I", kind)
        out.put("I", len(body.b))
        out.b += body.b


def main(argv):
    big = "--big-endian" in argv
    paths = [a for a in argv[1:] if a != "--big-endian"]
    if len(paths) != 2:
        sys.exit("usage: gsym_v2_writer.py [--big-endian] IN OUT")
    data = open(paths[0], "rb").read()
    magic_le = struct.unpack_from("<I", data, 0)[0]
    endian_in = "<" if magic_le == 0x4753594D else ">"
    src = In(data, endian_in)
    src.u32()
    if src.fixed("H") != 1:
        sys.exit("input is not GSYM version 1")
    addr_off_size, uuid_size = src.u8(), src.u8()
    base, count = src.u64(), src.u32()
    strtab_offset, strtab_size = src.u32(), src.u32()
    uuid = data[28:28 + uuid_size]
    width = {1: "B", 2: "H", 4: "I", 8: "Q"}[addr_off_size]
    src.pos = 48
    addrs = [src.fixed(width) for _ in range(count)]
    src.pos = (src.pos + 3) & ~3
    info = [src.u32() for _ in range(count)]
    nfiles = src.u32()
    files = [(src.u32(), src.u32()) for _ in range(nfiles)]
    strtab = data[strtab_offset:strtab_offset + strtab_size]

    e = ">" if big else "<"
    # Section bodies.
    records = Out(e)
    rel = []
    for offset in info:
        while len(records.b) % 4:
            records.b.append(0)
        rel.append(len(records.b))
        src.pos = offset
        records.b += convert_record(src, e)
    sections = {}
    o = Out(e)
    for a in addrs:
        o.put(width, a)
    sections[1] = o.b
    o = Out(e)
    for r in rel:
        o.put("Q", r)
    sections[2] = o.b
    sections[3] = bytes(strtab)
    o = Out(e)
    o.put("I", nfiles)
    for d, b in files:
        o.put("Q", d)
        o.put("Q", b)
    sections[4] = o.b
    sections[5] = records.b
    if uuid:
        sections[6] = bytes(uuid)
    sections[0x4242] = b"not for this reader"  # unknown: skipped

    order = [t for t in (3, 0x4242, 5, 4, 6, 2, 1) if t in sections]
    out = Out(e)
    out.put("I", 0x4753594D)
    out.put("H", 2)
    out.put("B", addr_off_size)
    out.put("B", 0)  # NUL-terminated strings
    out.put("Q", base)
    out.put("I", count)
    at = 20 + 20 * (len(order) + 1)
    placed = {}
    for t in order:
        placed[t] = at
        at += len(sections[t])
    for t in order:
        out.put("I", t)
        out.put("Q", placed[t])
        out.put("Q", len(sections[t]))
    out.b += bytes(20)
    for t in order:
        out.b += sections[t]
    open(paths[1], "wb").write(out.b)


if __name__ == "__main__":
    main(sys.argv)
