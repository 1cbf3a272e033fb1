#!/usr/bin/env python3
"""Writes the small seed corpora of the libFuzzer harnesses to fuzz/corpus/<target>/.

Deterministic; rerun it after changing a format. Each seed is a few hundred bytes at most.
Records need XXH3-64, taken from Debian's libxxhash (libxxhash0) through ctypes.
Usage: python3 fuzz/make_seeds.py
"""
import ctypes
import gzip
import json
import os
import shutil
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    # mtime=0 keeps the bytes reproducible.
    return gzip.compress(data, compresslevel=6, mtime=0)


# ---- idx_reader ---------------------------------------------------------------------------

def idx(dims, data, type_code=0x08, ndim=None):
    head = bytes([0, 0, type_code, len(dims) if ndim is None else ndim])
    return head + b"".join(struct.pack(">I", d) for d in dims) + data


def counting(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def idx_seeds():
    t = "idx_reader"
    images = idx([3, 4, 5], counting(60))
    labels = idx([10], bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))
    write(t, "images_plain", images)
    write(t, "labels_plain", labels)
    write(t, "images_gzip", gz(images))
    write(t, "labels_gzip", gz(labels))
    write(t, "images_one", idx([1, 1, 1], b"\x7f"))
    write(t, "short_data", idx([2, 2, 2], counting(5)))
    write(t, "trailing", idx([4], counting(6)))
    write(t, "zero_dim", idx([4, 0, 2], b""))
    write(t, "wrong_type", idx([2], b"\x00\x00" * 4, type_code=0x0D))
    write(t, "wrong_ndim", idx([2, 2], counting(4), ndim=3))
    write(t, "huge_header", idx([0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF], b"x"))
    write(t, "truncated_gzip", gz(images)[:-9])
    write(t, "gzip_trailing_garbage", gz(labels) + b"garbage")
    write(t, "two_gzip_members", gz(images[:30]) + gz(images[30:]))


# ---- tsv_reader ---------------------------------------------------------------------------

def tsv_seeds():
    t = "tsv_reader"
    write(t, "integers", b"0\thello world\n1\tgoodbye\n2\tthird line\n")
    write(t, "names", b"pos\tgreat film\nneg\tawful\nneutral\tmeh\tstill text\n")
    write(t, "crlf_bom_empty", b"\xef\xbb\xbf1\tcarriage\r\n\r\n\n0\treturn\r\n")
    write(t, "utf8", "b\tna\u00efve caf\u00e9 \u65e5\u672c \U0001f600\na\t\u00e9t\u00e9\n"
          .encode("utf-8"))
    write(t, "no_final_newline", b"7\tlast line has no newline")
    write(t, "leading_zeros", b"007\tseven\n0\tzero\n")
    write(t, "huge_id", b"16777216\ttoo big\n")
    write(t, "no_tab", b"1\tok\nno tab here\n")
    write(t, "empty_label_text", b"\tx\n1\t\n")
    write(t, "bad_utf8", b"1\tok\n2\tbad \xed\xa0\x80 surrogate\n3\t\xc0\xaf overlong\n")
    write(t, "long_line", b"1\t" + b"x" * 40 + b"\n2\tshort\n")
    write(t, "cr_only", b"1\ta\rb\r\r\n\r")
    write(t, "empty", b"")


# ---- record ---------------------------------------------------------------------------------

_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3_64(b):
    return _xxh.XXH3_64bits(b, len(b))


def bf16(x):
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    lower, upper = u & 0xFFFF, u >> 16
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return struct.pack("<H", upper & 0xFFFF)


def encode_values(codec, values):
    if codec == 1:
        return b"".join(struct.pack("<f", v) for v in values)
    if codec == 2:
        return b"".join(struct.pack("<e", v) for v in values)
    return b"".join(bf16(v) for v in values)


def record(codec, tensors, version=1):
    """tensors: list of (shape, values)."""
    out = b"RCR" + bytes([version, len(tensors), 0, 0, 0])
    for shape, _ in tensors:
        out += bytes([1, codec, len(shape), 0]) + b"".join(struct.pack("<I", d) for d in shape)
    for _, values in tensors:
        out += encode_values(codec, values)
    return out + struct.pack("<Q", xxh3_64(out))


_EXACT = {2: "<q", 3: "<i", 4: "<B", 5: "<B"}  # int64, int32, uint8, bool


def mixed_record(tensors):
    """tensors: list of (dtype, codec, shape, values); codec 0 for the exact dtypes."""
    out = b"RCR" + bytes([1, len(tensors), 0, 0, 0])
    for dtype, codec, shape, _ in tensors:
        out += bytes([dtype, codec, len(shape), 0]) + b"".join(struct.pack("<I", d) for d in shape)
    for dtype, codec, _, values in tensors:
        if dtype == 1:
            out += encode_values(codec, values)
        else:
            out += b"".join(struct.pack(_EXACT[dtype], v) for v in values)
    return out + struct.pack("<Q", xxh3_64(out))


def record_seeds():
    t = "record"
    vals = [1.5, -2.0, 0.25, 3.0, -7.5, 65504.0, 1e-6, 0.0, -0.0, 100.0, 0.1, -1e30]
    write(t, "fp32_one", record(1, [([2, 3], vals[:6])]))
    write(t, "fp16_two", record(2, [([2], vals[:2]), ([1, 3], vals[2:5])]))
    write(t, "bf16_three", record(3, [([4], vals[:4]), ([], [7.0]), ([2, 2, 2], vals[4:12])]))
    write(t, "fp16_rank8", record(2, [([1, 2, 1, 1, 1, 1, 1, 1], [0.5, -0.5])]))
    write(t, "fp32_scalar", record(1, [([], [3.25])]))
    bad = bytearray(record(1, [([2], [1.0, 2.0])]))
    bad[12] ^= 0x01
    write(t, "bad_checksum", bytes(bad))
    write(t, "bad_version", record(1, [([1], [1.0])], version=2))
    write(t, "short", b"RCR\x01\x01\x00\x00\x00")
    # Named tensors of several dtypes: a text record (fp16 hidden, int64 length, bool mask).
    write(t, "text_mixed", mixed_record([(1, 2, [3, 2], vals[:6]), (2, 0, [1], [3]),
                                         (5, 0, [3], [1, 1, 0])]))
    write(t, "exact_all", mixed_record([(2, 0, [3], [-(1 << 63), (1 << 63) - 1, -1]),
                                        (3, 0, [2], [-(1 << 31), 7]), (4, 0, [4], [0, 1, 128, 255]),
                                        (5, 0, [2], [0, 1])]))
    write(t, "int64_with_codec", mixed_record([(2, 1, [1], [5])]))
    write(t, "bool_byte_2", mixed_record([(5, 0, [2], [1, 2])]))
    write(t, "dtype_6", mixed_record([(6, 0, [1], [])]))
    # The round-trip half reads: mode, tensor count, ranks and dims, then float values.
    write(t, "roundtrip_fp16", bytes([1, 1, 2, 3, 4]) + struct.pack("<8f", *vals[:8]) * 4)
    write(t, "roundtrip_bf16_bad_shape", bytes([0x82, 2, 1, 2, 0, 3, 1]) + struct.pack("<4f", *vals[:4]))
    # mode, count 3, then per tensor kind (0-3 float, 4 int64, 5 int32, 6 uint8, 7 bool), rank, dims.
    write(t, "roundtrip_mixed", bytes([1, 2, 1, 2, 2, 3, 4, 1, 1, 7, 1, 3]) +
          struct.pack("<6f", *vals[:6]) + struct.pack(">q", -5) + bytes([1, 0, 1]))


# ---- manifest -------------------------------------------------------------------------------

def manifest_seeds():
    t = "manifest"
    full = {
        "format_version": 1,
        "model": "resnet18:width=16,in_channels=1",
        "fingerprint": "0123456789abcdef0123456789abcdef",
        "split_at": "layer2.1",
        "prefix_blocks": 4,
        "total_blocks": 8,
        "keyer": "xxh3",
        "codec": "fp16",
        "preprocess": "normalize:mean=0.2860,std=0.3530",
        "record_shapes": [[32, 7, 7], [1]],
        "class_names": ["sandal", "shirt", "sneaker", "bag", "ankle boot"],
        "classifier": "new",
        "records": 34875,
        "record_bytes": 1 << 40,
        "splits": {
            "train": {"data": "fashion-mnist:/data/fm", "samples": 30000, "unique": 29876,
                      "complete": True},
            "test-2": {"data": "tsv:/tmp/a \"quoted\"\tfile.tsv", "samples": 5000,
                       "unique": 4999, "complete": False},
        },
    }
    write(t, "full", json.dumps(full, indent=2).encode())
    empty = dict(full, model="", fingerprint="", split_at="", prefix_blocks=0, total_blocks=0,
                 keyer="", codec="", preprocess="", record_shapes=[], class_names=[],
                 classifier="", records=0, record_bytes=0, splits={})
    write(t, "empty", json.dumps(empty).encode())
    write(t, "unicode", json.dumps(dict(full, class_names=["\u00e9t\u00e9", "\U0001f600", "a\u0000b"],
                                        splits={"\u65e5": full["splits"]["train"]})).encode())
    write(t, "version2", json.dumps(dict(full, format_version=2)).encode())
    write(t, "impossible_split", json.dumps(dict(full, prefix_blocks=9)).encode())
    missing = dict(full)
    del missing["keyer"]
    write(t, "missing_keyer", json.dumps(missing).encode())
    write(t, "wrong_types", json.dumps(dict(full, records="many", splits=[1, 2])).encode())
    write(t, "float_numbers", json.dumps(dict(full, prefix_blocks=2.0, records=1.5e3)).encode())
    write(t, "garbage", b"{\"format_version\": 1, ")
    # The record layout: a text cache's three tensors, one with a variable dimension.
    layout = [{"name": "hidden", "dtype": "float32", "shape": [-1, 768], "codec": "fp16"},
              {"name": "lengths", "dtype": "int64", "shape": [1], "codec": "raw"},
              {"name": "mask", "dtype": "bool", "shape": [-1], "codec": ""}]
    text = dict(full, record_layout=layout, record_shapes=[[-1, 768], [1], [-1]])
    write(t, "text_layout", json.dumps(text, indent=2).encode())
    write(t, "layout_shapes_disagree", json.dumps(dict(text, record_shapes=[[32, 7, 7]])).encode())
    write(t, "layout_bad_dtype", json.dumps(dict(text, record_layout=[dict(layout[0], dtype="int8")],
                                                 record_shapes=[[-1, 768]])).encode())


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    idx_seeds()
    tsv_seeds()
    record_seeds()
    manifest_seeds()
    for target in sorted(os.listdir(ROOT)):
        files = os.listdir(os.path.join(ROOT, target))
        size = sum(os.path.getsize(os.path.join(ROOT, target, f)) for f in files)
        print(f"{target}: {len(files)} seeds, {size} bytes")


if __name__ == "__main__":
    main()
