"""One planted fault in a copy of a checkpoint folder; used by the tests/cli/checkpoint*.sh scripts
(not a test itself: ctest runs tests/cli/*.sh).

    plant_safetensors.py SRC DST FILE TENSOR FAULT

DST/ becomes a copy of SRC/ whose FILE (a safetensors file) has one fault in TENSOR, the file
rewritten whole (tensors in their order, 8-byte aligned header). FAULT is one of:
  xor:<byte>:<mask>    a byte xor-ed (a negative index counts from the tensor's end)
  add:<byte>:<delta>   a byte plus delta, modulo 256
  scale                the first element doubled (F32), else its first byte one step up
  sixto4               the first 16-block of E2M1 codes holding one +-6 (code 7): that code to +-4
  shape:transpose      the dimensions reversed (the bytes kept)
  shape:<d0,d1,...>    the given dimensions (the bytes kept)
  shape:fold           2-D or more reversed, 1-D [n] as [n/2, 2], 0-dim doubled to [2]
  dtype:<name>         the dtype renamed; F32 -> F16 and F8_E4M3 -> F32 convert the values
  dtype:narrow         F32 -> BF16 (each value's upper half), anything else -> F8_E4M3, bytes kept
  drop                 the tensor removed
  extra                a new F32 0-dim tensor TENSOR holding 1.0
"""

import json
import os
import shutil
import struct
import sys


def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    meta = head.pop("__metadata__", None)
    tensors = {
        k: [v["dtype"], v["shape"], bytearray(data[v["data_offsets"][0] : v["data_offsets"][1]])]
        for k, v in head.items()
    }
    return meta, tensors


def write(path, meta, tensors):
    out, blob = {}, bytearray()
    if meta is not None:
        out["__metadata__"] = meta
    for k, (dt, shape, b) in tensors.items():
        out[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(b)]}
        blob += b
    h = json.dumps(out).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(blob))


def e4m3(c):
    e, m = (c >> 3) & 0xF, c & 7
    return (-1) ** (c >> 7) * (m / 8 * 2**-6 if e == 0 else (1 + m / 8) * 2 ** (e - 7))


def sixto4(b):
    for blk in range(0, len(b), 8):
        sixes = [i for i in range(2 * blk, 2 * blk + 16) if ((b[i // 2] >> (4 * (i % 2))) & 0x7) == 7]
        if len(sixes) == 1:
            b[sixes[0] // 2] ^= 1 << (4 * (sixes[0] % 2))
            return


def plant(t, name, fault):
    kind, _, arg = fault.partition(":")
    if kind == "extra":
        t[name] = ["F32", [], bytearray(struct.pack("<f", 1.0))]
        return
    dt, shape, b = t[name]
    if kind == "xor":
        i, mask = (int(a, 0) for a in arg.split(":"))
        b[i] ^= mask
    elif kind == "add":
        i, d = (int(a, 0) for a in arg.split(":"))
        b[i] = (b[i] + d) % 256
    elif kind == "scale":
        if dt == "F32":
            b[:4] = struct.pack("<f", struct.unpack("<f", b[:4])[0] * 2)
        else:
            b[0] = (b[0] + 1) & 0xFF
    elif kind == "sixto4":
        sixto4(b)
    elif kind == "shape" and arg == "fold":
        if len(shape) >= 2:
            t[name][1] = list(reversed(shape))
        elif len(shape) == 1:
            t[name][1] = [shape[0] // 2, 2]
        else:
            t[name][1], t[name][2] = [2], b + b
    elif kind == "shape":
        t[name][1] = list(reversed(shape)) if arg == "transpose" else [int(x) for x in arg.split(",")]
    elif kind == "dtype" and arg == "narrow":
        if dt == "F32":
            t[name][0], t[name][2] = "BF16", bytearray(b"".join(b[i + 2 : i + 4] for i in range(0, len(b), 4)))
        else:
            t[name][0] = "F8_E4M3"
    elif kind == "dtype":
        if dt == "F32" and arg == "F16":
            v = struct.unpack(f"<{len(b) // 4}f", b)
            t[name][2] = bytearray(struct.pack(f"<{len(v)}e", *v))
        if dt == "F8_E4M3" and arg == "F32":
            t[name][2] = bytearray(struct.pack(f"<{len(b)}f", *map(e4m3, b)))
        t[name][0] = arg
    elif kind == "drop":
        del t[name]
    else:
        sys.exit(f"plant_safetensors.py: unknown fault {fault!r}")


def main():
    src, dst, file, name, fault = sys.argv[1:6]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = os.path.join(dst, file)
    os.chmod(path, 0o644)
    meta, tensors = read(path)
    if name not in tensors and fault != "extra":
        sys.exit(f"plant_safetensors.py: {name} not in {os.path.join(src, file)}")
    plant(tensors, name, fault)
    write(path, meta, tensors)


if __name__ == "__main__":
    main()
