"""tdstore._native directly: both ways a read hands bytes to Python (Buffer
and DLPack capsule) give the same tensors for every dtype and shape kind, and
the native module never loads a libtorch of its own."""

import uuid

import pytest
import torch

from tdstore import _native

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _random(dtype, shape, gen):
    if dtype is torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_complex or dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(0, 100, shape, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_buffer_and_dlpack_reads_agree_for_every_dtype(client, dtype):
    gen = torch.Generator().manual_seed(7)
    native = client._native.create(f"py-native-{uuid.uuid4().hex}", [6])
    values = {
        "matrix": _random(dtype, (6, 3), gen),
        "vector": _random(dtype, (6,), gen),
        "empty": _random(dtype, (6, 0), gen),
        "deep": _random(dtype, (6, 1, 2, 1), gen),
    }
    native.write([((k,), _name(dtype), tuple(t.shape), t.data_ptr(),
                   t.numel() * t.element_size()) for k, t in values.items()])
    for index in (None, [("int", 4)], [("slice", 1, None, 2)]):
        _, by_buffer = native.read([], index)
        _, by_dlpack = native.read([], index, dlpack=True)
        assert [leaf[:3] for leaf in by_buffer] == [leaf[:3] for leaf in by_dlpack]
        for (path, dt, shape, buf, kind, value), (_, _, _, capsule, *_) in zip(by_buffer,
                                                                              by_dlpack):
            assert (kind, value) == ("tensor", b"")
            expected = values[path[0]]
            if index is not None:
                expected = expected[4] if index[0][0] == "int" else expected[1::2]
            from_dlpack = torch.from_dlpack(capsule)
            assert from_dlpack.dtype == dtype and from_dlpack.shape == expected.shape
            assert torch.equal(from_dlpack, expected), path
            if buf is not None and len(buf):
                from_buffer = torch.frombuffer(buf, dtype=dtype).view(shape)
                assert torch.equal(from_buffer, expected), path
    client.drop(native.name)


def test_unconsumed_capsules_and_tensors_free_their_memory(client):
    native = client._native.create(f"py-native-{uuid.uuid4().hex}", [1 << 16])
    t = torch.ones(1 << 16, 16)  # 4 MiB
    native.write([(("x",), "float32", tuple(t.shape), t.data_ptr(), t.numel() * 4)])

    def rss_kib() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    for _ in range(5):  # warm up allocator and channel
        native.read([], dlpack=True)
    before = rss_kib()
    for i in range(100):  # 400 MiB in all: a leak would show
        _, leaves = native.read([], dlpack=True)
        if i % 2:
            assert torch.from_dlpack(leaves[0][3]).sum().item() == (1 << 16) * 16
        del leaves
    assert rss_kib() - before < 64 * 1024, "reads kept their memory"
    client.drop(native.name)


def test_the_native_module_links_no_libtorch():
    with open(_native.__file__, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    import subprocess
    needed = subprocess.run(["ldd", _native.__file__], capture_output=True, text=True).stdout
    assert "libgrpc" in needed
    assert "torch" not in needed and "libc10" not in needed, needed
