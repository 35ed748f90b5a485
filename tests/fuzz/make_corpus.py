#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/.

The files are committed; run this again only to change the seeds:
    /usr/bin/python3 tests/fuzz/make_corpus.py
Needs python3-numpy (the .npy seeds are written by NumPy itself) and protoc
(the request seeds are encoded from protobuf text format).
"""
import io
import os
import pathlib
import shutil
import subprocess

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS = HERE / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# ---- fuzz_index_planner: 11-byte header + index text -----------------------
# See fuzz_index_planner.cc for the header; each byte is a digit.

def planner_header(batch, element=3, elem_size=4, rows_per_block=2, part_bytes=8,
                   ones=0, mode=0):
    dims = []
    for d in batch:
        if isinstance(d, str):  # a huge dim: a byte with the high bit set
            dims.append(bytes([0x80 | {"2^20": 0, "2^31": 1, "2^40": 2, "2^62": 3}[d]]))
        else:
            dims.append(str(d).encode())
    dims += [b"0"] * (4 - len(dims))
    digits = [str(len(batch)).encode()] + dims + [
        str(element).encode(), str(elem_size - 1).encode(), str(rows_per_block - 1).encode(),
        bytes([ord("0") + part_bytes - 1]), bytes([ord("0") + ones]), str(mode).encode()]
    return b"".join(digits)


PLANNER_SEEDS = {
    "int": ([4, 5], "3"),
    "negative_int": ([4, 5], "-1"),
    "slice": ([7, 2], "1:5:2"),
    "open_slices": ([6, 3], ":,::2"),
    "ellipsis_int": ([2, 3, 4], "...,0"),
    "positions_2d": ([4, 5], "[[0,1],[2,3]]"),
    "mask": ([2, 3], "[True,False]"),
    "int_and_slice": ([3, 6], "2,1:5"),
    "separated_advanced": ([3, 4, 5], "[0,2],:,[1,-1]"),
    "broadcast_positions": ([4, 4], "[[0],[3]],[1,2]"),
    "empty_list": ([5], "[]"),
    "scalar_batch": ([], "..."),
    "zero_dim": ([3, 0], ":,[]"),
    "huge_dims": (["2^40", 3], "5,1"),
}


def planner_seeds():
    for name, (batch, text) in PLANNER_SEEDS.items():
        ones, mode = (1, 0) if name == "slice" else (0, 1) if name == "mask" else (0, 0)
        write("fuzz_index_planner", name, planner_header(batch, ones=ones, mode=mode) + text.encode())


# ---- fuzz_npy_header: files written by NumPy ---------------------------------

def npy_bytes(array, version=None, data_bytes=16):
    f = io.BytesIO()
    if version is None:
        np.save(f, array)
    else:
        np.lib.format.write_array(f, array, version=version)
    raw = f.getvalue()
    header_end = raw.index(b"\n") + 1
    return raw[:header_end + data_bytes]  # the header and a little data is enough


def npy_seeds():
    seeds = {
        "float32_3x4": np.zeros((3, 4), np.float32),
        "int64_vector": np.arange(5, dtype=np.int64),
        "bool_scalar": np.array(True),
        "uint8_empty": np.zeros((2, 0, 3), np.uint8),
        "int8_long": np.zeros((100000,), np.int8),
        "float16": np.zeros((7,), np.float16),
        "complex128": np.zeros((1, 1, 1), np.complex128),
        "int16_4d": np.zeros((2, 1, 2, 1), np.int16),
        "fortran_order": np.asfortranarray(np.zeros((2, 3), np.float64)),  # rejected
        "big_endian": np.zeros((4,), ">i4"),  # rejected
        "structured": np.zeros((2,), [("a", "<i4"), ("b", "<f8")]),  # rejected
    }
    for name, array in seeds.items():
        write("fuzz_npy_header", name, npy_bytes(array))
    write("fuzz_npy_header", "version2", npy_bytes(np.zeros((3,), np.int32), version=(2, 0)))
    write("fuzz_npy_header", "version3", npy_bytes(np.zeros((2, 2), np.float32), version=(3, 0)))


# ---- fuzz_request_validators: wire messages ----------------------------------

REQUEST_SEEDS = {
    "read_whole": ("ReadLeavesRequest", 'dict: "replay" paths { components: "obs" }'),
    "read_nested_int": ("ReadLeavesRequest",
                        'dict: "replay" paths { components: ["next", "obs"] } '
                        'index { items { integer: 3 } }'),
    "read_slice": ("ReadLeavesRequest",
                   'dict: "a/b.c" index { items { slice { start: 1 stop: 5 step: 2 } } }'),
    "read_positions": ("ReadLeavesRequest",
                       'dict: "replay" index { items { positions { values: [0, 1, 2, 3] '
                       'shape: [2, 2] } } }'),
    "read_mask_ellipsis": ("ReadLeavesRequest",
                           'dict: "replay" index { items { ellipsis {} } '
                           'items { mask { values: [true, false, true] } } }'),
    "read_bad_names": ("ReadLeavesRequest",
                       'dict: "/bad name" paths { components: ["", "x%2Fy"] }'),
    "write_begin": ("WriteChunk", 'begin { dict: "replay" leaf_count: 2 }'),
    "write_begin_index": ("WriteChunk",
                          'begin { dict: "replay" index { items { integer: -1 } '
                          'items { slice { step: 2 } } } }'),
    "write_header": ("WriteChunk",
                     'header { path { components: "obs" } dtype: FLOAT32 shape: [10, 4] '
                     'byte_size: 160 }'),
    "write_header_bad_dtype": ("WriteChunk",
                               'header { path { components: "r" } dtype: BFLOAT16 shape: [] '
                               'byte_size: 2 }'),
    "write_data": ("WriteChunk", 'data: "abcdefgh"'),
    "create_schema": ("CreateDictRequest",
                      'name: "replay" batch_shape: [1000] '
                      'options { rows_per_block: 64 part_bytes: 1048576 } '
                      'leaves { path { components: "obs" } dtype: FLOAT32 element_shape: [84] } '
                      'leaves { path { components: ["next", "obs"] } dtype: UINT8 }'),
    "create_2d": ("CreateDictRequest",
                  'name: "grid" batch_shape: [4, 3] options { rows_per_block: 1 part_bytes: 5 } '
                  'leaves { path { components: "x" } dtype: COMPLEX128 element_shape: [2] }'),
    "create_huge": ("CreateDictRequest", 'name: "huge" batch_shape: [1099511627776, 3]'),
}


def request_seeds():
    protoc = shutil.which("protoc")
    for name, (message, text) in REQUEST_SEEDS.items():
        data = subprocess.run(
            [protoc, f"--encode=tdstore.v1.{message}", f"--proto_path={REPO / 'proto'}",
             "tdstore/v1/tdstore.proto"],
            input=text.encode(), stdout=subprocess.PIPE, check=True).stdout
        write("fuzz_request_validators", name, data)


if __name__ == "__main__":
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    planner_seeds()
    npy_seeds()
    request_seeds()
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.relative_to(REPO)}: {len(os.listdir(d))} files")
