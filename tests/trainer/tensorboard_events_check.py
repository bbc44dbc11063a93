"""Reads a TensorBoard event folder written by tensorboard_events_main and checks it on its own:
the record framing (uint64 length, masked CRC32C of the length, data, masked CRC32C of the data),
a protobuf decode written here from the wire format (Event: wall_time 1, step 2, file_version 3,
summary 5; Summary.value 1; Value: tag 1, simple_value 2), and the values against expected.json."""
import json
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    out = shift = 0
    while True:
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return out, i


def fields(buf):
    """(field number, wire type, value) of a message; length-delimited values as bytes."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wt)
        yield num, wt, v


def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hcrc == masked(header), "length CRC mismatch at byte %d" % i
        body = data[i + 12:i + 12 + length]
        (bcrc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        assert bcrc == masked(body), "data CRC mismatch at byte %d" % i
        i += 16 + length
        yield body


def main(folder):
    files = [f for f in os.listdir(folder) if f.startswith("events.out.tfevents.")]
    assert len(files) == 1, files
    events = []
    for body in records(os.path.join(folder, files[0])):
        ev = {"values": {}}
        for num, wt, v in fields(body):
            if num == 1:
                assert wt == 1
                ev["wall_time"] = struct.unpack("<d", v)[0]
            elif num == 2:
                ev["step"] = v
            elif num == 3:
                ev["file_version"] = v.decode()
            elif num == 5:
                for vnum, _, value in fields(v):
                    assert vnum == 1
                    tag, simple = None, None
                    for f, w, x in fields(value):
                        if f == 1:
                            tag = x.decode()
                        elif f == 2:
                            assert w == 5
                            simple = struct.unpack("<f", x)[0]
                    ev["values"][tag] = simple
        events.append(ev)
    assert events[0].get("file_version") == "brain.Event:2", events[0]
    expected = json.load(open(os.path.join(folder, "expected.json")))
    got = events[1:]
    assert len(got) == len(expected), (len(got), len(expected))
    for e, g in zip(expected, got):
        assert g["step"] == e["step"], (g["step"], e["step"])
        assert g["wall_time"] > 1e9
        assert set(g["values"]) == set(e["values"]), sorted(set(g["values"]) ^ set(e["values"]))
        for k, v in e["values"].items():
            assert g["values"][k] == v, (k, g["values"][k], v)
    print("tensorboard events: %d events, %d values checked" % (len(got), sum(len(e["values"]) for e in expected)))


if __name__ == "__main__":
    main(sys.argv[1])
