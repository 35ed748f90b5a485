"""Non-tensor data: NonTensorData (one value) and NonTensorStack (one value
per batch cell) of text, bytes and JSON, against tensordict's own TensorDict
on random cases; reads and writes by every index kind; rows never torn from
their tensor rows under concurrent writes; the size limits; refusals that
write nothing; and values that are never unpickled."""

import json
import pickle
import random
import uuid

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

import tdstore
from tdstore import TensorDictStore
from _helpers import worker_context

ALPHABET = "ab cdé😀中文\u202e\n\t\"\\'{}[]"


def random_text(rng, longest=12):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest)))


def random_json(rng, depth=0):
    choice = rng.randrange(7 if depth < 2 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.randint(-2**70, 2**70)
    if choice == 3:
        return rng.uniform(-1e6, 1e6)
    if choice == 4:
        return random_text(rng)
    if choice == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {random_text(rng, 4): random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def random_local(rng, n):
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    return TensorDict({
        "x": torch.arange(n, dtype=torch.float32),
        "obs": torch.randn(n, 3, generator=g),
        "text": NonTensorStack(*[random_text(rng) for _ in range(n)]),
        "blob": NonTensorStack(*[bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
                                 for _ in range(n)]),
        "info": NonTensorStack(*[random_json(rng) for _ in range(n)]),
        "label": NonTensorData(random_text(rng)),
        "nested": {"cfg": NonTensorData({"lr": 0.1, "tags": ["a", "é"]}),
                   "y": torch.randn(n, generator=g)},
    }, batch_size=[n])


def same(a, b):
    """Two leaves equal by tensordict's lights: tensors bit-equal (dtype and
    shape included), non-tensors of the same class with the same content."""
    if isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if type(a) is not type(b) or a.batch_size != b.batch_size:
        return False
    if isinstance(b, NonTensorStack):
        return a.tolist() == b.tolist()
    return a.data == b.data


def assert_same_td(got, want):
    assert got.batch_size == want.batch_size
    keys = sorted(map(str, want.keys(True, True)))
    assert sorted(map(str, got.keys(True, True))) == keys
    for key in want.keys(True, True):
        assert same(got.get(key), want.get(key)), (key, got.get(key), want.get(key))


def test_a_mixed_tensordict_round_trips_equal(addr):
    rng = random.Random(1)
    for n in (1, 7, 40):
        local = random_local(rng, n)
        store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=4)
        try:
            assert_same_td(store.to_local(), local)
            # td["k"] gives the content, td.get("k") the non-tensor, as tensordict.
            assert store["label"] == local["label"]
            assert store["text"] == local["text"]
            assert store["nested", "cfg"] == {"lr": 0.1, "tags": ["a", "é"]}
            assert isinstance(store.get("text"), NonTensorStack)
            assert isinstance(store.get("label"), NonTensorData)
            assert store.entry_class("text") is NonTensorStack
            assert store.entry_class("label") is NonTensorData
            assert store.get_item_shape("text") == torch.Size([n])
            assert "text" in repr(store) and "NonTensorStack(text" in repr(store)
        finally:
            store.drop()


def test_reads_by_every_index_kind_equal_tensordicts(addr):
    rng = random.Random(2)
    n = 29
    local = random_local(rng, n)
    store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=8)
    try:
        for _ in range(25):
            start, stop = sorted(rng.sample(range(n + 1), 2))
            index = rng.choice([rng.randrange(-n, n), slice(start, stop),
                                slice(start, None, rng.randint(1, 4)),
                                torch.randint(0, n, (rng.randint(0, 9),)),
                                torch.rand(n) > 0.5, [rng.randrange(n), rng.randrange(n)]])
            assert_same_td(store[index], local[index])
        # One leaf, indexed: get_at.
        assert store.get_at("text", 3) == local.get_at("text", 3)
    finally:
        store.drop()


def test_writes_by_every_index_kind_equal_tensordicts(addr):
    """td[idx] = rows with non-tensors, including values longer than the
    leaf's slots, values of another kind (text meeting numbers becomes JSON),
    and rows written into a NonTensorData (it becomes a stack), as tensordict
    does it."""
    rng = random.Random(3)
    n = 23
    local = random_local(rng, n)
    store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=5)
    try:
        for step in range(30):
            start, stop = sorted(rng.sample(range(n + 1), 2))
            index = rng.choice([rng.randrange(n), slice(start, stop), slice(start, None, 3),
                                torch.randperm(n)[:rng.randint(1, 6)], torch.rand(n) > 0.6])
            cells = torch.zeros(n)[index].shape
            count = cells.numel()
            longest = 60 if step % 7 == 6 else 10  # now and then: past the slots
            rows = {"x": torch.full(cells, float(step)),
                    "text": NonTensorStack(*[random_text(rng, longest) for _ in range(count)])
                    if cells else NonTensorData(random_text(rng, longest))}
            if step % 9 == 4:
                rows["info"] = (NonTensorStack(*[random_json(rng) for _ in range(count)])
                                if cells else NonTensorData(random_json(rng)))
            if step == 11:
                rows["label"] = (NonTensorStack(*["row"] * count) if cells
                                 else NonTensorData("row"))
            if step == 17:  # numbers into the text leaf: it becomes JSON
                rows["text"] = (NonTensorStack(*range(count)) if cells else NonTensorData(5))
            value = TensorDict(rows, batch_size=cells)
            local[index] = value
            store[index] = value
            assert_same_td(store.to_local(), local)
    finally:
        store.drop()


def test_whole_sets_and_views(addr):
    store = TensorDictStore(batch_size=[3], addr=addr)
    try:
        store["s"] = "hello"                        # a bare str: NonTensorData
        store["n"] = None
        store["b"] = b"\x00\x01"
        store.set_non_tensor("cfg", {"a": [1, 2]})  # one JSON value (a dict is a sub-dict)
        store["st"] = NonTensorStack("a", "b", "c")
        assert store["s"] == "hello" and store["n"] is None and store["b"] == b"\x00\x01"
        assert store.get_non_tensor("cfg") == {"a": [1, 2]}
        assert store["st"] == ["a", "b", "c"]
        assert store[1]["st"] == "b" and store[1]["s"] == "hello"
        assert store[0:2].get("s").batch_size == torch.Size([2])
        # A sub-dict view sees its own non-tensors.
        store["sub"] = TensorDict({"t": NonTensorStack("x", "y", "z")}, [3])
        assert store["sub"]["t"] == ["x", "y", "z"]
        # Rename, delete and clone keep them.
        store.rename_key_("st", "st2")
        assert store["st2"] == ["a", "b", "c"] and "st" not in store.keys()
        del store["s"]
        assert "s" not in store.keys()
        copy = store.clone()
        try:
            assert copy["st2"] == ["a", "b", "c"] and copy.get_non_tensor("cfg") == {"a": [1, 2]}
        finally:
            copy.drop()
        # Resized rows were never written: None, as in tensordict's store.
        store.resize_(5)
        assert store["st2"] == ["a", "b", "c", None, None]
        assert store.get("cfg").batch_size == torch.Size([5])
        # Fills leave non-tensors alone, as tensordict's do.
        store["x"] = torch.ones(5)
        store.zero_()
        assert torch.equal(store["x"], torch.zeros(5)) and store["st2"][0] == "a"
        with pytest.raises(TypeError):
            store.fill_("st2", 0)
    finally:
        store.drop()


def _described(td) -> dict:
    """Every leaf of a TensorDict as (class name, bytes or content): what a
    child process can send back to be compared."""
    out = {}
    for k in td.keys(True, True):
        v = td.get(k)
        if isinstance(v, torch.Tensor):
            out[str(k)] = (str(v.dtype), tuple(v.shape),
                           v.contiguous().reshape(-1).view(torch.uint8).tolist())
        elif isinstance(v, NonTensorData):
            out[str(k)] = ("NonTensorData", v.data)
        else:
            out[str(k)] = ("NonTensorStack", v.tolist())
    return out


def _child_reads(handles, queue):
    mixed = TensorDictStore.from_store(handles[0])
    # The class is named, so from_store may import it (it never imports
    # a class a store names unasked).
    episode = TensorDictStore.from_store(handles[1], tensorclass_cls="_helpers.Episode")
    queue.put((_described(mixed.to_local()), type(episode).__name__,
               _described(episode._tensordict.to_local())))


def test_another_process_reads_tensors_non_tensors_new_dtypes_and_a_tensorclass(addr):
    """The issue's "done when", but for lazy stacks (not built yet): a dict
    of tensors (new dtypes included), a NonTensorStack of strings, JSON and
    bytes, NonTensorData, and a tensorclass, read back equal from another
    process."""
    from _helpers import Episode
    from test_dtypes import NEW_DTYPES, random_bits
    local = random_local(random.Random(4), 9)
    g = torch.Generator().manual_seed(4)
    for dtype in NEW_DTYPES:
        local["dtypes", str(dtype).replace("torch.", "")] = random_bits(g, (9, 2), dtype)
    episode = Episode(obs=torch.randn(9, 3, generator=g), reward=torch.randn(9, generator=g),
                      name="ep", info={"k": [1, 2]}, batch_size=[9])
    store = TensorDictStore.from_tensordict(local, addr=addr)
    stored_episode = TensorDictStore.from_tensordict(episode, addr=addr)
    try:
        ctx = worker_context()
        queue = ctx.Queue()
        child = ctx.Process(target=_child_reads,
                            args=((store.handle, stored_episode.handle), queue))
        child.start()
        mixed, class_name, fields = queue.get(timeout=60)
        child.join(30)
        assert child.exitcode == 0
        assert mixed == _described(local)
        assert class_name == "Episode"
        assert fields == _described(episode._tensordict)
    finally:
        store.drop()
        stored_episode.drop()


def _row_writer(handle, n, rounds, ready):
    store = TensorDictStore.from_store(handle)
    rng = random.Random(9)
    ready.set()
    for k in range(1, rounds + 1):
        rows = torch.tensor(sorted(rng.sample(range(n), 16)))
        tag = f"round {k} " + "x" * rng.randint(0, 40)
        store[rows] = TensorDict({
            "x": torch.full((16,), float(k)),
            "text": NonTensorStack(*[tag] * 16),
            "info": NonTensorStack(*[{"k": k}] * 16)}, [16])


def test_sampled_rows_keep_their_labels_under_concurrent_row_writes(addr):
    """A sampled row's text and JSON always belong to its tensor row: a writer
    process rewrites random rows (x, text and info together) while the test
    samples; every sampled row must agree with itself."""
    n = 64
    local = TensorDict({"x": torch.zeros(n),
                        "text": NonTensorStack(*["round 0 " + "x" * 40] * n),
                        "info": NonTensorStack(*[{"k": 0}] * n)}, [n])
    store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=16)
    try:
        ctx = worker_context()
        ready = ctx.Event()
        writer = ctx.Process(target=_row_writer, args=(store.handle, n, 150, ready))
        writer.start()
        assert ready.wait(60)
        g = torch.Generator().manual_seed(5)
        checked = 0
        while writer.is_alive() or checked == 0:
            sample = store[torch.randint(0, n, (32,), generator=g)]
            for x, text, info in zip(sample["x"].tolist(), sample["text"], sample["info"]):
                assert text.startswith(f"round {int(x)} "), (x, text)
                assert info == {"k": int(x)}, (x, info)
                checked += 1
        writer.join(60)
        assert writer.exitcode == 0
        assert checked > 0
    finally:
        store.drop()


def test_json_edge_cases_and_the_size_limits(addr):
    store = TensorDictStore(batch_size=[2], addr=addr)
    try:
        for value in ["", "😀" * 100, {"": {"": []}}, [], {}, 0, -0.0, 2**80, "\x00", True]:
            store.set_non_tensor("v", value)
            got = store.get_non_tensor("v")
            assert got == value and type(got) is type(value), (value, got)
        store["rows"] = NonTensorStack("", "ünï")
        assert store["rows"] == ["", "ünï"]
        # One value: 64 KiB of encoded bytes is the limit.
        store["big"] = "a" * 65536
        assert store["big"] == "a" * 65536
        keys = sorted(map(str, store.keys()))
        with pytest.raises(ValueError, match="limit"):
            store["big"] = "a" * 65537
        assert store["big"] == "a" * 65536 and sorted(map(str, store.keys())) == keys
        # One value per row: 16 MiB each.
        with pytest.raises(ValueError, match="limit"):
            store["huge"] = NonTensorStack("a" * ((16 << 20) + 1), "b")
        assert "huge" not in store.keys()
    finally:
        store.drop()


class _Evil:
    def __reduce__(self):
        return (exec, ("import tdstore; tdstore._PWNED = True",))


class _Opaque:
    pass


def test_values_tdstore_cannot_hold_are_refused_and_nothing_is_written(addr):
    store = TensorDictStore(batch_size=[2], addr=addr)
    try:
        store["x"] = torch.zeros(2)
        for bad in [{1, 2}, _Opaque(), _Evil(), NonTensorStack(_Opaque(), _Opaque()),
                    NonTensorStack("a", b"b"), NonTensorData(torch.zeros(2))]:
            with pytest.raises(TypeError, match="cannot be stored"):
                store["bad"] = bad
            assert list(store.keys()) == ["x"], bad
        with pytest.raises(TypeError, match="never pickles"):
            TensorDictStore.from_tensordict(
                TensorDict({"a": torch.zeros(2), "o": NonTensorData(_Opaque())}, [2]),
                addr=addr, name=f"py-nt-{uuid.uuid4().hex}")
    finally:
        store.drop()


def test_malicious_values_are_inert_and_nothing_is_ever_unpickled(addr, monkeypatch):
    """Pickle payloads are stored as the bytes or text they are and come back
    as such; no read loads a pickle (the loaders are replaced by traps)."""
    payload = pickle.dumps(_Evil())
    def trap(*args, **kwargs):
        raise AssertionError("tdstore unpickled something")
    monkeypatch.setattr(pickle, "loads", trap)
    monkeypatch.setattr(pickle, "load", trap)
    monkeypatch.setattr(pickle, "Unpickler", trap)
    store = TensorDictStore(batch_size=[2], addr=addr)
    try:
        store["p"] = payload
        store["ps"] = NonTensorStack(payload, payload[:5])
        store["t"] = payload.decode("latin-1")
        assert store["p"] == payload and store["ps"] == [payload, payload[:5]]
        assert store["t"] == payload.decode("latin-1")
        assert store.to_local().get("p").data == payload
        assert not getattr(tdstore, "_PWNED", False)
    finally:
        store.drop()


def test_the_server_refuses_mixed_kinds_and_writes_nothing(client):
    """Through the native module, below the Python layer's own checks: a
    tensor written into a text leaf's rows, rows into a one-value leaf, a
    one-value leaf written by rows, and slots that do not match."""
    from tdstore import _native
    native = client._native.create(f"py-nt-{uuid.uuid4().hex}", [4])
    try:
        slots = torch.zeros(4, 16, dtype=torch.uint8)
        _native.encode_values([b"a", b"b", b"c", b"d"], 16, slots.data_ptr(), slots.numel())
        native.write([(("t",), "uint8", (4, 16), slots.data_ptr(), slots.numel(), "text", b""),
                      (("one",), "uint8", (4, 0), 0, 0, "json", b'{"a": 1}')])
        before = native.describe()
        row = torch.zeros(1, 16, dtype=torch.uint8)
        cases = [
            [(("t",), "uint8", (1, 16), row.data_ptr(), 16)],                   # tensor kind
            [(("t",), "uint8", (1, 16), row.data_ptr(), 16, "json", b"")],      # other kind
            [(("t",), "uint8", (1, 8), row.data_ptr(), 8, "text", b"")],        # other slot
            [(("one",), "uint8", (1, 16), row.data_ptr(), 16, "json", b"")],    # one value
            [(("new",), "uint8", (1, 0), 0, 0, "text", b"x")],                  # one by rows
        ]
        at = torch.tensor([1])
        for leaves in cases:
            with pytest.raises(ValueError):
                native.write(leaves, [("positions", at.data_ptr(), 1, (1,))])
        # Whole writes that break the kind's rules.
        for leaves in [[(("w",), "float32", (4, 0), 0, 0, "text", b"")],
                       [(("w",), "uint8", (4, 2), row.data_ptr(), 8, "text", b"")],
                       [(("w",), "uint8", (4, 16), slots.data_ptr(), 64, "text", b"v")],
                       [(("w",), "uint8", (4, 0), 0, 0, "tensor", b"v")]]:
            with pytest.raises(ValueError):
                native.write(leaves)
        after = native.describe()
        assert after["leaves"] == before["leaves"]
        _, read = native.read([("one",)], dlpack=False)
        assert read[0][4:] == ("json", b'{"a": 1}')
        # fill refuses a value leaf.
        with pytest.raises(ValueError):
            native.fill([(("t",), "uint8", b"\x00")], None)
    finally:
        native.drop()


def test_the_public_constructor_path_gives_the_same_stacks(addr, monkeypatch):
    """Reads build stacks with a fast path that leans on tensordict's
    internals (_values._FAST); the public constructors give equal results."""
    from tdstore import _values
    local = random_local(random.Random(6), 12)
    store = TensorDictStore.from_tensordict(local, addr=addr)
    try:
        fast = store[torch.tensor([1, 5, 5, 0])]
        monkeypatch.setattr(_values, "_FAST", False)
        monkeypatch.setattr(_values, "_cell", _values._cell_public)
        slow = store[torch.tensor([1, 5, 5, 0])]
        assert_same_td(fast, slow)
        assert_same_td(slow, local[torch.tensor([1, 5, 5, 0])])
    finally:
        store.drop()


def test_in_place_and_copy_paths_carry_non_tensors(addr):
    """update_, copy_, in-place arithmetic on a locked store, rows of an equal
    NonTensorData, a NonTensorData in a sub-dict of more batch dims, and a
    new value leaf made by a broadcast row write."""
    rng = random.Random(8)
    local = random_local(rng, 6)
    store = TensorDictStore.from_tensordict(local, addr=addr)
    try:
        store.update_({"label": "new", "text": NonTensorStack(*"abcdef")})
        local.update_({"label": "new", "text": NonTensorStack(*"abcdef")})
        assert_same_td(store.to_local(), local)
        store.copy_(local)
        assert_same_td(store.to_local(), local)
        # Rows of an equal NonTensorData keep it one value, as in tensordict.
        store[3:6] = store[0:3]
        local[3:6] = local[0:3]
        assert_same_td(store.to_local(), local)
        assert isinstance(store.get("label"), NonTensorData)
        # In-place math on a locked store leaves the non-tensors alone.
        store.lock_()
        store.add_(1)
        local.add_(1)
        store.unlock_()
        assert_same_td(store.to_local(), local)
        # A broadcast row write creates a value leaf: the rows get the value,
        # and the rows not written read None.
        store[0:3] = {"tag": "x"}
        assert store["tag"] == ["x", "x", "x", None, None, None]
        with pytest.raises(TypeError, match="bytes"):
            store[0:2] = TensorDict({"text": NonTensorStack(b"a", b"b")}, [2])
        assert store["text"] == local["text"]
        # Appenders write tensor leaves; a non-tensor key is refused by name.
        with store.appender() as out:
            out[0] = TensorDict({"x": torch.tensor(9.0), "obs": torch.zeros(3),
                                 "nested": {"y": torch.tensor(1.0)}}, [])
        assert store["x"][0] == 9.0
        with pytest.raises(TypeError, match="non-tensor"):
            store.appender(["text"])
    finally:
        store.drop()
    nested = TensorDict({"x": torch.zeros(4),
                         "sub": TensorDict({"cfg": NonTensorData("deep"), "y": torch.zeros(4, 3)},
                                           [4, 3])}, [4])
    store = TensorDictStore.from_tensordict(nested, addr=addr)
    try:
        assert store["sub", "cfg"] == "deep"
    finally:
        store.drop()


def test_one_values_of_a_dict_are_bounded_in_all(addr):
    """16 values of 64 KiB fill the 1 MiB a dict's one values may take; the
    17th is refused and nothing is written (every describe carries them)."""
    store = TensorDictStore(batch_size=[2], addr=addr)
    try:
        for i in range(16):
            store[f"v{i}"] = b"x" * 65536
        keys = sorted(map(str, store.keys()))
        with pytest.raises(ValueError, match="per dict"):
            store["v16"] = b"y" * 65536
        assert sorted(map(str, store.keys())) == keys
        store["v0"] = b"z" * 65536  # replacing one is fine: the total stays
        assert store["v0"] == b"z" * 65536
    finally:
        store.drop()


def _label_of(td, i):
    value = td[i]["label"]
    return value.data if isinstance(value, NonTensorData) else value


def test_rows_never_written_read_none_apart_from_written_empty_values(addr,
                                                                      standalone_redis_port):
    """A non-tensor row no one wrote reads None, as in tensordict's store, and a
    written "" reads "": by int, slice, step, positions and mask, and in
    to_local(). Random rows, texts ("" among them) and byte strings."""
    from tensordict.store import TensorDictStore as SeedStore

    rng = random.Random(17)
    for kind in ("text", "bytes"):
        n = rng.randint(4, 12)
        want = [None] * n
        ours = TensorDictStore(batch_size=[n], addr=addr)
        seed = SeedStore(batch_size=[n], host="127.0.0.1", port=standalone_redis_port)
        try:
            for i in rng.sample(range(n), rng.randint(1, n - 1)):
                value = rng.choice(["", random_text(rng)])
                value = value.encode() if kind == "bytes" else value
                want[i] = value
                row = TensorDict({"obs": torch.full((2,), float(i)), "label": value}, [])
                ours[i] = row
                if kind == "text":
                    seed[i] = row
            for i in range(n):
                assert _label_of(ours, i) == want[i], (kind, i)
                if kind == "text":
                    assert _label_of(seed, i) == want[i], (kind, i)
            for index in (slice(0, n), slice(1, None, 2), torch.tensor([n - 1, 0, n - 1]),
                          torch.tensor([rng.random() < 0.5 for _ in range(n)])):
                expected = [want[int(j)] for j in torch.arange(n)[index]]
                got = ours[index]["label"]
                if isinstance(got, NonTensorStack):
                    got = got.tolist()
                elif isinstance(got, NonTensorData):
                    got = [got.data]
                got = list(got)
                assert got == expected, (kind, index)
            assert list(ours.to_local()["label"]) == want
            # Rows a resize adds were never written either.
            ours.resize_(n + 2)
            assert list(ours.to_local()["label"]) == want + [None, None]
        finally:
            ours.drop()
            seed.clear_redis()
