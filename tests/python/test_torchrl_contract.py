"""torchrl's storage contract, run with the same code on LazyTensorStorage
and TdStoreStorage: random sequences of extend, add, set, get, sample and
wrap-around, for one and two storage dims and every kind of row torchrl's
tensor storages hold, through torchrl's own ReplayBuffer. After every step,
every public result is compared: what the call returned, the length, the
shape, the writer's cursor, write count and state_dict, the last cursor
torchrl's samplers read, and the rows. A call LazyTensorStorage refuses
must be refused by TdStoreStorage too, with the same exception class, and
nothing written; one it takes must be taken.

Samples are compared exactly: both buffers draw from generators seeded
alike, so they sample the same positions."""

import pickle
import random
import zlib

import pytest
import torch
from tensordict import TensorDict, is_tensor_collection, tensorclass
from torch.utils._pytree import tree_flatten
from torchrl.data import LazyTensorStorage, ReplayBuffer, RoundRobinWriter

from tdstore.torchrl import TdStoreStorage, TdStoreWriter


@tensorclass
class _Row:
    obs: torch.Tensor
    reward: torch.Tensor


def _rows(kind: str, n: int, start: int, envs: int | None):
    """``n`` rows of ``kind`` numbered from ``start``: batch [n], or [envs, n]
    for a two-dim storage (torchrl extends those along dim 1)."""
    lead = (n,) if envs is None else (envs, n)
    ids = torch.arange(start, start + lead[-1]).expand(lead) + (
        0 if envs is None else torch.arange(envs)[:, None] * 1000)
    obs = ids[..., None].float() + torch.arange(3.0) / 10
    if kind == "tensordict":
        return TensorDict({"id": ids.clone(), "obs": obs, "nested": {"done": ids % 3 == 0}}, lead)
    if kind == "tensordict_with_row_dims":  # a batch dim more than the storage's
        return TensorDict({"id": ids[..., None].expand(*lead, 2).clone(),
                           "obs": obs[..., None, :].expand(*lead, 2, 3).clone()}, [*lead, 2])
    if kind == "tensorclass":
        return _Row(obs=obs, reward=ids.double(), batch_size=lead)
    if kind == "tensor":
        return obs
    if kind == "dict":
        return {"obs": obs, "id": ids.clone()}
    if kind == "tuple":
        return (obs, {"id": ids.clone()})
    if kind in ("list of dicts", "list of tensordicts"):  # extend([item, item, ...])
        rows = _rows(kind.rpartition(" ")[2][:-1], n, start, envs)
        return [torch.utils._pytree.tree_map(lambda x: x[:, i] if envs else x[i], rows)
                if kind == "list of dicts" else (rows[:, i] if envs else rows[i])
                for i in range(n)]
    raise AssertionError(kind)


# torchrl 0.14.1 sizes a storage of ndim >= 2 as the numel of its whole
# first row, feature dims included, for rows that are not TensorDicts of
# exactly the storage's dims (LazyTensorStorage._init_standard): its
# max_size then exceeds its capacity, and its length grows past it once
# the ring wraps. TdStoreStorage's max_size is the storage dims' size, as
# torchrl documents it ("a storage of shape [3, 4] has capacity 12 if
# ndim=2"). For those kinds the sequences stay within capacity and
# max_size is checked against the documented figure.
TORCHRL_OVERSIZED = {"tensordict_with_row_dims", "tensor", "dict", "tuple", "list of dicts"}

# The kinds whose rb[:] torchrl's ReplayBuffer can assign into (a pytree's
# rb[:] is a dict or tuple, in torchrl's storages too).
ASSIGNABLE = {"tensordict", "tensordict_with_row_dims", "tensorclass", "tensor"}

KINDS = ["tensordict", "tensordict_with_row_dims", "tensorclass", "tensor", "dict", "tuple",
         "list of dicts", "list of tensordicts"]


def _same(got, want, what):
    """``got`` is what ``want`` is: type, batch, keys and values."""
    # rb[:] of a tdstore buffer is a TensorDict or tensor subclass that
    # writes indexed assignments through (tdstore.torchrl._snapshot).
    assert type(got) is type(want) or type(got).__bases__[0] is type(want), \
        (what, type(got), type(want))
    if isinstance(want, torch.Tensor) and not is_tensor_collection(want):
        assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
        assert torch.equal(got, want), what
    elif is_tensor_collection(want):
        assert got.batch_size == want.batch_size, (what, got.batch_size, want.batch_size)
        g, w = got.to_tensordict() if hasattr(got, "to_tensordict") else got, want
        w = w.to_tensordict() if hasattr(w, "to_tensordict") else w
        assert sorted(map(str, g.keys(True, True))) == sorted(map(str, w.keys(True, True))), what
        assert got.device == want.device, (what, got.device, want.device)
        for key in w.keys(True, True):
            if isinstance(key, str) and key.startswith("new"):
                # A key added after the first write: LazyTensorStorage leaves
                # its other rows uninitialized (torch.empty), tdstore zeroes
                # them. Checked where written (_run).
                continue
            assert torch.equal(g[key], w[key]), (what, key)
    elif isinstance(want, (dict, tuple, list)):
        g_leaves, g_spec = tree_flatten(got)
        w_leaves, w_spec = tree_flatten(want)
        assert g_spec == w_spec, what
        for a, b in zip(g_leaves, w_leaves):
            _same(a, b, what)
    else:
        assert got == want, what


def _state(rb) -> dict:
    storage, writer = rb.storage, rb.writer
    out = {"len": len(rb), "len_storage": len(storage), "cursor": int(writer._cursor),
           "write_count": int(writer._write_count),
           "writer_state": {k: v.tolist() if isinstance(v, torch.Tensor) else v
                            for k, v in writer.state_dict().items()},
           "last_cursor": storage._last_cursor_index, "full": bool(storage._is_full)}
    if len(storage):
        out["max_size"] = storage.max_size
        out["dim0"] = storage._len_along_dim0
        out["shape"] = tuple(storage.shape)
    return out


REFUSED = []  # (what, exception) of each call both refused, for the report
NEW_KEYS = []  # where a key was added after the first write


def _both(ours, theirs, what, call):
    """Runs ``call`` on their buffer, then on ours: both raise the same
    exception class, or both return the same."""
    try:
        want = call(theirs)
    except Exception as err:  # noqa: BLE001 - the class is what is compared
        before = _state(ours)
        with pytest.raises(type(err)):
            call(ours)
        assert _state(ours) == before, (what, "a refused call changed the buffer")
        REFUSED.append((what, repr(err)[:200]))
        return None
    got = call(ours)
    if want is None:
        assert got is None, what
    else:
        _same(got, want, what)
    return want


def _index_for(rng, n0: int, ndim: int, inner: int):
    """A random torch index into the first ``n0`` dim-0 rows."""
    pick = rng.choice(["int", "neg", "slice", "positions", "mask", "ellipsis", "cells"])
    if pick == "int":
        return rng.randrange(n0)
    if pick == "neg":
        return -1 - rng.randrange(n0)
    if pick == "slice":
        a = rng.randrange(n0)
        return slice(a, rng.randrange(a, n0 + 1), rng.choice([1, 2]))
    if pick == "positions":
        return torch.tensor([rng.randrange(-n0, n0) for _ in range(rng.randint(1, 6))])
    if pick == "mask":
        return torch.tensor([rng.random() < 0.5 for _ in range(n0)])
    if pick == "ellipsis":
        return Ellipsis
    if ndim == 1:
        return slice(None)
    k = rng.randint(1, 5)
    return (torch.tensor([rng.randrange(n0) for _ in range(k)]),
            torch.tensor([rng.randrange(inner) for _ in range(k)]))


def _assign_index(rng, n0: int, envs: int | None):
    """A random index into the buffer as ``rb[...]`` shows it (``[envs, n0]``
    for a two-dim storage, torchrl's ReplayBuffer transposing it), without
    repeated positions: a multi-dim one is written through ``rb[:]``."""
    def along(n):
        pick = rng.choice(["int", "neg", "slice", "positions", "all"])
        if pick == "int":
            return rng.randrange(n)
        if pick == "neg":
            return -1 - rng.randrange(n)
        if pick == "slice":
            a = rng.randrange(n)
            return slice(a, rng.randrange(a, n + 1) or None, rng.choice([1, 2]))
        if pick == "positions":
            return torch.tensor(rng.sample(range(n), rng.randint(1, min(n, 4))))
        return slice(None)
    if envs is None:
        return along(n0)
    return (along(envs), along(n0)) if rng.random() < 0.7 else along(envs)


def _assigned(rb, index, kind: str):
    """``rb[index] = `` what is there, changed (so both buffers get the same
    value, shaped as the selection)."""
    value = rb[:][index]
    change = lambda x: ~x if x.dtype == torch.bool else x + 100  # noqa: E731
    return change(value) if kind == "tensor" else value.apply(change)


def _run(addr, kind, ndim, writer, seed):
    rng = random.Random(seed)
    envs = None if ndim == 1 else rng.randint(2, 3)
    max_size = rng.randint(12, 24)
    storage = TdStoreStorage(max_size, addr=addr, ndim=ndim, length_ttl=0)
    ours = ReplayBuffer(storage=storage, batch_size=4,
                        writer=TdStoreWriter() if writer == "tdstore" else RoundRobinWriter(),
                        generator=torch.Generator().manual_seed(seed))
    theirs = ReplayBuffer(storage=LazyTensorStorage(max_size, ndim=ndim), batch_size=4,
                          writer=RoundRobinWriter(),
                          generator=torch.Generator().manual_seed(seed))
    oversized = ndim == 2 and kind in TORCHRL_OVERSIZED
    dim0 = -(-max_size // (envs or 1))
    start = 0
    try:
        for step in range(14):
            op = rng.choice(["extend", "extend", "extend", "add", "set", "assign", "get", "get",
                             "sample"])
            what = (kind, ndim, writer, seed, step, op)
            if oversized and start + 9 >= dim0:
                op = rng.choice(["set", "get", "sample"])  # no wrap-around (above)
            if op == "extend" or len(theirs) == 0:
                n = rng.randint(1, 9)
                data = _rows(kind, n, start, envs)
                new = f"new{step}" if kind == "tensordict" and rng.random() < 0.2 else None
                if new:  # a key the buffer has not seen: LazyTensorStorage adds it
                    data[new] = torch.full(data.batch_size, float(step + 1))
                start += n
                index = _both(ours, theirs, what, lambda rb: rb.extend(data))
                if new and index is not None:
                    got = ours.storage.get(slice(None))[new]
                    written = torch.zeros(got.shape, dtype=torch.bool)
                    written[tuple(index.unbind(-1)) if index.dim() > 1 else index] = True
                    want = torch.zeros_like(got)
                    want[written] = float(step + 1)
                    assert torch.equal(got, want), what  # the rows written, zeros elsewhere
                    NEW_KEYS.append(what)
            elif op == "add":
                row = _rows(kind, 1, start, envs)
                start += 1
                if isinstance(row, list):
                    one = row[0]
                elif isinstance(row, (dict, tuple)):
                    one = torch.utils._pytree.tree_map(lambda x: x[:, 0] if envs else x[0], row)
                else:
                    one = row[:, 0] if envs else row[0]
                _both(ours, theirs, what, lambda rb: rb.add(one))
            elif op == "set":
                n0 = theirs.storage._len_along_dim0
                at = torch.tensor(rng.sample(range(n0), min(n0, rng.randint(1, 3))))
                data = _rows(kind, len(at), 10_000 + start, envs)
                if envs is not None and not isinstance(data, list):
                    # The storage's own row shape: [rows, envs].
                    data = torch.utils._pytree.tree_map(lambda x: x.transpose(0, 1), data) \
                        if isinstance(data, (dict, tuple)) else data.transpose(0, 1)
                start += len(at)

                def set_rows(rb, at=at, data=data):
                    rb.storage[at] = data
                _both(ours, theirs, what, set_rows)
            elif op == "assign" and kind in ASSIGNABLE:
                # rb[i] = v, and rb[i, j] = v, which torchrl's ReplayBuffer
                # writes into rb[:] (a view of LazyTensorStorage; a copy of
                # a tdstore buffer that writes through)
                index = _assign_index(rng, theirs.storage._len_along_dim0, envs)
                value = _assigned(theirs, index, kind)
                _both(ours, theirs, (*what, index), lambda rb: rb.__setitem__(index, value))
            elif op in ("get", "assign"):
                n0 = theirs.storage._len_along_dim0
                index = _index_for(rng, n0, ndim, envs or 1)
                _both(ours, theirs, (*what, index), lambda rb: rb.storage.get(index))
            else:
                _both(ours, theirs, what, lambda rb: rb.sample())
            mine, want = _state(ours), _state(theirs)
            if oversized and "max_size" in want:
                assert mine.pop("max_size") == dim0 * envs, what
                want.pop("max_size")
                mine.pop("full"), want.pop("full")
            assert mine == want, what
            if len(theirs):
                _same(ours.storage.get(slice(None)), theirs.storage.get(slice(None)), what)
        ours.empty()
        theirs.empty()
        mine, want = _state(ours), _state(theirs)
        assert mine == want, "after empty()"
    finally:
        if storage.store is not None:
            storage.store.drop()


# torchrl's ReplayBuffer extends a two-dim storage along the data's dim 1,
# which a list of rows does not have: it refuses those (IndexError).
CASES = [(kind, ndim) for kind in KINDS for ndim in (1, 2)
         if not (ndim == 2 and kind.startswith("list"))]


@pytest.mark.parametrize("writer", ["default", "tdstore"])
@pytest.mark.parametrize("kind,ndim", CASES)
def test_the_storage_contract_on_random_sequences(addr, kind, ndim, writer):
    REFUSED.clear()
    NEW_KEYS.clear()
    for seed in range(3):
        _run(addr, kind, ndim, writer, zlib.crc32(f"{kind} {ndim} {writer}".encode()) + seed)
    # Most calls are taken: the comparison is of results, not of refusals.
    assert len(REFUSED) <= 6, REFUSED
    assert NEW_KEYS or kind != "tensordict"


@pytest.mark.parametrize("kind", sorted(ASSIGNABLE))
@pytest.mark.parametrize("ndim", [1, 2])
def test_assignments_through_rb_all_rows_reach_the_buffer(addr, kind, ndim):
    """``rb[i, j] = v`` (torchrl writes it into ``rb[:]``) and ``rb[:][i] =
    v``, on random indices: the buffer holds what LazyTensorStorage's
    holds, and what is derived from ``rb[:]`` (``rb[:][0]``) stays a copy."""
    rng = random.Random(zlib.crc32(f"assign {kind} {ndim}".encode()))
    envs = None if ndim == 1 else 3
    storage = TdStoreStorage(30, addr=addr, ndim=ndim, length_ttl=0)
    ours = ReplayBuffer(storage=storage)
    theirs = ReplayBuffer(storage=LazyTensorStorage(30, ndim=ndim))
    try:
        data = _rows(kind, 7, 0, envs)  # a part of the buffer: rb[:] is its first rows
        _both(ours, theirs, "extend", lambda rb: rb.extend(data))
        for step in range(25):
            n0 = theirs.storage._len_along_dim0
            index = _assign_index(rng, n0, envs)
            if not isinstance(index, tuple) and kind == "tensordict_with_row_dims":
                index = (index, rng.randrange(2))  # into the rows' own dim
            value = _assigned(theirs, index, kind)
            if rng.random() < 0.5 and (ndim == 1 or isinstance(index, tuple)):
                _both(ours, theirs, (step, index), lambda rb: rb.__setitem__(index, value))
            else:
                def assign(rb):
                    rb[:][index] = value
                _both(ours, theirs, (step, "rb[:]", index), assign)
            _same(ours[:], theirs[:], (step, index))
            assert len(ours) == len(theirs)
        copies = [pickle.loads(pickle.dumps(ours[:]))]  # another process's copy writes nowhere
        assert type(copies[0]) is type(theirs[:])
        derived = ours[:][0]
        before = theirs[:]
        for copy in (*copies, derived):
            copy[...] = 0 if kind != "tensorclass" else copy.apply(torch.zeros_like)
        _same(ours[:], before, "a copy derived from rb[:] or pickled is not written through")
    finally:
        if storage.store is not None:
            storage.store.drop()


@pytest.mark.parametrize("writer", ["default", "tdstore"])
@pytest.mark.parametrize("ndim", [1, 2])
def test_conditional_updates_as_lazy_tensor_storage(addr, ndim, writer):
    """``update_if_present`` on random samples, with and without a version
    check, after the slots were partly rewritten: the same records are
    patched (and reported) as in LazyTensorStorage, and a patch either
    buffer refuses (a missing key, a dtype, a shape; before the first
    write) writes nothing."""
    seed = zlib.crc32(f"conditional {ndim} {writer}".encode())
    # Both random sources are seeded here: which outcomes the steps reach must
    # not depend on what earlier tests drew from torch's global generator.
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    envs = None if ndim == 1 else 2
    storage = TdStoreStorage(24, addr=addr, ndim=ndim, length_ttl=0)

    def buffer(storage, writer_class, seed):
        return ReplayBuffer(storage=storage, batch_size=5,
                                      writer=writer_class(track_generations=True),
                                      generator=torch.Generator().manual_seed(seed))
    ours = buffer(storage, TdStoreWriter if writer == "tdstore" else RoundRobinWriter,
                  7)
    theirs = buffer(LazyTensorStorage(24, ndim=ndim), RoundRobinWriter, 7)
    try:
        for rb in (ours, theirs):
            with pytest.raises(RuntimeError):
                rb.update_if_present(index=torch.tensor([0]), generation=torch.tensor([0]),
                                     patch={"obs": torch.zeros(1, 3)})
        start, seen = 0, set()
        for step in range(12):
            n = rng.randint(2, 6)
            data = _rows("tensordict", n, start, envs)
            data["version"] = torch.full(data.batch_size, step, dtype=torch.int64)
            start += n
            _both(ours, theirs, step, lambda rb: rb.extend(data.clone()))
            (mine, mine_info), (want, info) = (rb.sample(return_info=True)
                                               for rb in (ours, theirs))
            _same(mine, want, step)
            _same(mine_info, info, step)
            if rng.random() < 0.5:  # some slots are rewritten before the patch
                more = _rows("tensordict", rng.randint(1, 4), start, envs)
                more["version"] = torch.full(more.batch_size, step, dtype=torch.int64)
                _both(ours, theirs, step, lambda rb: rb.extend(more.clone()))
            index, generation = info["index"], info["index_generation"]
            if isinstance(index, tuple):  # ndim=2: a coordinate per storage dim, last
                index = torch.stack(index, -1)
            records = index.shape[0]
            patch = {"obs": torch.randn(records, *want["obs"].shape[1:], generator=gen),
                     ("nested", "done"): torch.rand(records, *want["nested", "done"].shape[1:],
                                                    generator=gen) < 0.5}
            kwargs = {}
            if rng.random() < 0.5:
                kwargs = {"version_key": "version", "require_newer": rng.random() < 0.5,
                          "version": torch.randint(step - 2, step + 2, (records,),
                                                     generator=gen)}

            def update(rb, patch=patch, kwargs=kwargs, index=index, generation=generation):
                result = rb.update_if_present(index=index, generation=generation,
                                              patch=patch, **kwargs)
                return result.to_tensordict()
            result = _both(ours, theirs, (step, kwargs), update)
            updated, rejected = result["updated"], result.get("version_rejected", None)
            seen.update({"patched"} if updated.any() else set())
            seen.update({"skipped"} if (~updated).any() else set())
            seen.update({"version rejected"} if rejected is not None and rejected.any()
                        else set())
            _same(ours.storage.get(slice(None)), theirs.storage.get(slice(None)), step)
        for bad in ({"missing": torch.zeros(5, 3)}, {"obs": torch.zeros(5, 3).double()},
                    {"obs": torch.zeros(5, 7)}):
            before = ours.storage.get(slice(None))

            def refused(rb, bad=bad):
                return rb.update_if_present(index=index, generation=generation, patch=bad)
            _both(ours, theirs, bad, refused)
            _same(ours.storage.get(slice(None)), before, ("refused", bad))
        # Records were patched, left alone as stale, and refused on versions.
        assert seen == {"patched", "skipped", "version rejected"}, seen
    finally:
        if storage.store is not None:
            storage.store.drop()
