"""Protocol-buffer wire encoding shared by the bench's request and profile
writers (make_pprof_pair.py, serve_request.py): varints and field keys."""


def varint(n):
    """Base-128 varint of n; a negative n as its 64-bit two's complement."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    """The key of field number `field` with wire type `wire`."""
    return varint(field << 3 | wire)
