"""The dtypes past the first twelve (uint16/32/64, the float8 formats,
complex32, float4_e2m1fn_x2): bit-exact through whole writes, every index
kind and fills, against torch on random bits (another process reads them in
test_non_tensor.py).

Values are random *bits* (NaNs, infinities and subnormals included), and
every comparison is of bytes: torch has no ``equal`` for most of these
dtypes, and NaN != NaN would hide nothing but prove nothing either."""

import random
import uuid

import pytest
import torch
from tensordict import TensorDict

from tdstore import TensorDictStore

NEW_DTYPES = [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2,
              torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu,
              torch.complex32, torch.float4_e2m1fn_x2]


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def random_bits(g, shape, dtype) -> torch.Tensor:
    """A tensor of `shape` and `dtype` whose bytes are uniformly random."""
    count = 1
    for s in shape:
        count *= s
    raw = torch.randint(0, 256, (count * dtype.itemsize,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, one row of itemsize bytes per element."""
    t = t.contiguous()
    return t.reshape(-1).view(torch.uint8).reshape(tuple(t.shape) + (t.dtype.itemsize,))


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what=""):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert torch.equal(bits(got), bits(want)), what


def _local(g, n, dtype):
    return TensorDict({"m": random_bits(g, (n, 3), dtype), "v": random_bits(g, (n,), dtype),
                       "n": {"deep": random_bits(g, (n, 2, 2), dtype)}}, batch_size=[n])


@pytest.mark.parametrize("dtype", NEW_DTYPES, ids=_name)
def test_every_new_dtype_round_trips_bit_exact_whole_and_by_every_index(addr, dtype):
    rng = random.Random(hash(_name(dtype)) & 0xFFFF)
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    n = 37
    local = _local(g, n, dtype)
    store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=8)
    try:
        assert store["m"].dtype == dtype
        for key in local.keys(True, True):
            assert_same_bits(store[key], local[key], key)
        back = store.to_local()
        for key in local.keys(True, True):
            assert_same_bits(back[key], local[key], key)

        for _ in range(6):
            picks = torch.randint(0, n, (rng.randint(1, 12),), generator=g)
            mask = torch.rand(n, generator=g) > 0.5
            start, stop = sorted(rng.sample(range(n + 1), 2))
            index = rng.choice([rng.randrange(n), slice(start, stop), slice(start, None, 3),
                                picks, mask])
            # Reads: the store's rows are the local rows' bits (the model
            # indexes bytes: torch cannot index some of these dtypes).
            got = store[index]
            for key in local.keys(True, True):
                assert torch.equal(bits(got[key]), bits(local[key])[index]), (key, index)
            # Writes: random bits into the selected rows, modelled on the
            # local bytes. Positions are made unique: a position picked twice
            # keeps the last value in the store, which torch leaves undefined.
            if isinstance(index, torch.Tensor) and index.dtype is torch.int64:
                index = torch.unique(index)
            batch = torch.zeros(n)[index].shape
            new = {}
            for key in local.keys(True, True):
                target = bits(local[key])
                fresh = torch.randint(0, 256, target[index].shape, dtype=torch.uint8, generator=g)
                new[key] = fresh.view(dtype).squeeze(-1)
                target[index] = fresh
                local.set(key, target.view(dtype).squeeze(-1))
            store[index] = TensorDict(new, batch_size=batch)
            for key in local.keys(True, True):
                assert_same_bits(store[key], local[key], (key, "after write", index))
    finally:
        store.drop()


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64,
                                   torch.float8_e4m3fn, torch.float8_e5m2,
                                   torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
                                   torch.float8_e8m0fnu, torch.complex32], ids=_name)
def test_fill_casts_as_torch_does_for_the_new_dtypes(addr, dtype):
    g = torch.Generator().manual_seed(3)
    store = TensorDictStore.from_tensordict(_local(g, 10, dtype), addr=addr)
    try:
        value = 3 if not dtype.is_floating_point and not dtype.is_complex else 1.75
        store.fill_("m", value)
        assert_same_bits(store["m"], torch.full((10, 3), value).to(dtype))
        mask = torch.arange(10) % 3 == 0
        before = store["v"]
        store.masked_fill_(mask, 2)
        expect = before.clone()
        bits(expect)[mask] = bits(torch.full((int(mask.sum()),), 2).to(dtype))
        assert_same_bits(store["v"], expect)
    finally:
        store.drop()


def test_uint64_keeps_values_past_two_to_the_63(addr):
    big = torch.tensor([2**64 - 1, 2**63 + 1, 0, 12345], dtype=torch.uint64)
    store = TensorDictStore.from_tensordict(TensorDict({"u": big}, [4]), addr=addr)
    try:
        assert store["u"].numpy().tolist() == [2**64 - 1, 2**63 + 1, 0, 12345]
        store.fill_("u", 2**64 - 2)
        assert store["u"].numpy().tolist() == [2**64 - 2] * 4
    finally:
        store.drop()


def test_a_dtype_tdstore_cannot_store_is_refused_and_nothing_written(addr):
    name = f"py-dtype-{uuid.uuid4().hex}"
    local = TensorDict({"ok": torch.zeros(3), "q": torch.zeros(3, dtype=torch.uint8).view(
        torch.bits8)}, [3])
    with pytest.raises(TypeError, match="bits8"):
        TensorDictStore.from_tensordict(local, addr=addr, name=name)
    with pytest.raises(KeyError):
        TensorDictStore.from_store(name, addr=addr)
