"""torchrl replay buffers on tdstore: ``TdStoreStorage`` and ``TdStoreWriter``.

    from torchrl.data import ReplayBuffer
    from tdstore.torchrl import TdStoreStorage, TdStoreWriter

    rb = ReplayBuffer(storage=TdStoreStorage(100_000, name="replay", addr=addr),
                      writer=TdStoreWriter(), batch_size=256)
    rb.extend(TensorDict({"obs": obs, "action": action}, [64]))
    batch = rb.sample()

``TdStoreStorage`` is a torchrl ``Storage`` whose rows live in one tdstore
dict of batch size ``[max_size]``, named ``name`` (a fresh name if not
given): any process that names it (or its ``handle``) shares it. The dict
is created on the first write, empty; that write's indexed rows make
tdstored create each leaf zero-filled from the batch's own shapes and
dtypes, so no zero tensor crosses the wire.

The buffer's length is the dict's counter ``tdstore.rb.written``: the rows
ever written, capped at ``max_size``, as torchrl's own storages count them.
Every process reads the same figure (one round trip a ``len``).

``TdStoreWriter`` is torchrl's round-robin writer with its cursor in the
store as well: each ``extend`` reserves its rows with one atomic counter
step (``tdstore.rb.cursor``), so collectors in several processes or on
several machines extend one buffer without overwriting each other's rows.
torchrl's default writer keeps its cursor in the process: it is right for a
single writing process only. What stays per process is torchrl's: a
prioritized sampler's priorities are those its own process wrote or
updated. A row another writer reserved is counted once written; until then
(a few milliseconds) sampling it reads zeros.

Needs torchrl (pinned in deploy/python-requirements.txt).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid

import torch
from tensordict import TensorDict, is_tensor_collection, is_tensorclass
from torchrl.data.replay_buffers.storages import Storage, StoreStorage
from torchrl.data.replay_buffers.writers import RoundRobinWriter

from ._connect import split_options
from ._errors import AlreadyExistsError, NotFoundError
from ._store import TensorDictStore

__all__ = ["TdStoreStorage", "TdStoreWriter"]

# The dict's counters (tdstore counters: atomic across processes, machines
# and daemons).
WRITTEN = "tdstore.rb.written"  # rows written, the length before the cap
CURSOR = "tdstore.rb.cursor"  # rows reserved by TdStoreWriters
# Plain tensors (not TensorDicts) are kept under this key, as torchrl's
# StoreStorage keeps them.
_TENSOR_KEY = "_tensor"
# The dict attribute that says what a row is, so that every process gets
# back what was stored: "tensor", "tensordict", or "tensorclass
# <module>:<qualname>".
_ROWS_ATTR = "tdstore.rb.rows"
_UNKNOWN = object()  # an attribute value not read yet
_STATE_FILE = "tdstore_storage.json"


class TdStoreStorage(StoreStorage):
    """A replay-buffer storage of ``max_size`` rows in the tdstore dict
    ``name`` (a new name if None) at ``addr`` (default ``$TDSTORE_ADDR``).
    ``options`` go to the tdstore Client (deadlines, tokens, TLS).

    ``length_ttl`` (seconds): ``len()`` reuses the length it read within the
    last ``length_ttl`` (a ``sample`` asks for it three times: torchrl's
    sampler twice, ``get`` once; a read is a round trip, 0.3 ms, as long as
    a small sample's own read). Rows other processes wrote meanwhile count
    from the next read, so they are sampled at most ``length_ttl`` late;
    this process's own writes count at once. 0 reads it every time. Once
    full, the length is never read again (until ``empty()``).

    ``layout`` (of a dict this storage creates): ``"record"`` (default)
    keeps each row's leaves together, so a sample reads one range per row
    instead of one per leaf and row; its keys are those of the first write
    and fixed after it, as a torchrl storage's are. ``"leaves"`` lets later
    writes add keys (docs/python.md, *Record dicts*).

    A subclass of torchrl's ``StoreStorage`` (the seed's) only so torchrl
    treats it as one where it asks (its default collate: samples are the
    storage's own TensorDicts); every method is tdstore's own, and neither
    redis-py nor tensordict's store is used."""

    def __init__(self, max_size: int, name: str | None = None, addr: str | None = None, *,
                 device=None, length_ttl: float = 0.05, layout: str = "record",
                 ndim: int = 1, compilable: bool = False, consolidated: bool = False,
                 shared_init: bool = False, cleanup_memmap: bool = True, existsok: bool = True,
                 checkpointer=None, **options):
        # torchrl's storage keywords, each with its meaning here (docs/python.md,
        # *torchrl's storage API on TdStoreStorage*); anything else must be a
        # tdstore client option, checked now, not at the first write.
        if ndim != 1:
            raise NotImplementedError(
                f"ndim={ndim}: TdStoreStorage keeps one storage dim so far; the rows' other "
                "batch dims are kept (a [5, 2] extend samples [B, 2] rows)")
        if device == "auto":
            device = None  # rows come back on the CPU, as written
        Storage.__init__(self, max_size=max_size, checkpointer=checkpointer,
                         compilable=compilable)
        # consolidated (one buffer per sample), shared_init (processes share
        # the buffer) and cleanup_memmap (no memmap files) need nothing here:
        # a sample already comes back from one call, and every process that
        # names the dict shares it.
        self.consolidated = consolidated
        self.shared_init = shared_init
        self.cleanup_memmap = cleanup_memmap
        self._existsok = bool(existsok)
        split_options(addr, options)  # TypeError for an unknown keyword, now
        self._layout = layout
        self._length_ttl = float(length_ttl)
        self._length_read = (-1.0, 0)  # (monotonic time, length) of the last read
        self._name = name or f"rb-{uuid.uuid4().hex}"
        self._addr = addr
        self._device = device
        self._options = options
        self._store: TensorDictStore | None = None
        self._rows_kind: str | None = None  # what the rows are, once known
        self._said = _UNKNOWN  # _ROWS_ATTR's value as this object last knew it
        self._full = False  # seen full: no length to ask for (until _empty)

    # -- identity --

    @property
    def name(self) -> str:
        """The tdstore dict that holds the rows."""
        return self._name

    @property
    def handle(self) -> str | None:
        """The dict's handle (``TensorDictStore.from_store`` opens it), or None
        before the first write created it."""
        store = self._opened()
        return None if store is None else store.handle

    @property
    def store(self) -> TensorDictStore | None:
        """The TensorDictStore of the rows (None before the first write)."""
        return self._opened()

    def _opened(self, create: bool = False) -> TensorDictStore | None:
        """The dict, opened by name on first use; created (empty, batch
        ``[max_size]``) if ``create`` and no process made it yet. A writer
        tries to create it first (one call for a new buffer), a reader to
        open it."""
        if self._store is not None:
            return self._store
        store = None
        if create:
            try:
                store = TensorDictStore(batch_size=[self.max_size], addr=self._addr,
                                        name=self._name, device=self._device,
                                        layout=self._layout, **self._options)
                self._said = None  # a new dict has no attributes
            except AlreadyExistsError:  # another process made it
                if not self._existsok:
                    raise ValueError(f"tdstore dict {self._name!r} exists, and this storage "
                                     "was made with existsok=False") from None
        if store is None:
            try:
                store = TensorDictStore.from_store(self._name, addr=self._addr,
                                                   device=self._device, **self._options)
            except NotFoundError:
                if not create:
                    return None
                raise  # made and deleted again meanwhile
            if tuple(store.batch_size) != (self.max_size,):
                raise ValueError(f"tdstore dict {self._name!r} has batch size "
                                 f"{list(store.batch_size)}, not [{self.max_size}] (max_size)")
        self._store = store
        return store

    # -- torchrl's Storage --

    def set(self, cursor, data, *, set_cursor: bool = True):
        """Writes ``data`` at ``cursor`` (int, slice or tensor of rows): one
        indexed write; a leaf the dict lacks is created zero-filled by
        tdstored. With ``set_cursor``, the rows count toward the length."""
        if set_cursor:
            self._set_last_cursor(cursor)
        rows = _rows_of(cursor, self.max_size)
        data, kind = self._as_stored(data, [rows] if rows is not None else [])
        row_batch = data.batch_size if rows is None else data.batch_size[1:]
        store = self._opened(create=True)
        self._record_kind(store, _with_row_batch(kind, row_batch))
        store[cursor] = data
        if set_cursor:
            self._counted(store.counter_add(WRITTEN, _count(cursor, self.max_size)))
        self._bump_mutation_revision()

    def _append(self, data, rows: int) -> int:
        """Appends ``rows`` rows (batch dim 0 of ``data``) at the ring's
        cursor, in one tdstore call that reserves them, writes them and
        counts them (TensorDictStore.append_ring). Returns the reserved
        start (the rows are start .. start + rows - 1, mod max_size)."""
        data, kind = self._as_stored(data, [rows])
        store = self._opened(create=True)
        self._record_kind(store, _with_row_batch(kind, data.batch_size[1:]))
        start, written = store.append_ring(data, cursor=CURSOR, count=WRITTEN)
        self._counted(written)
        self._bump_mutation_revision()
        return start

    def _counted(self, written: int) -> None:
        """The length as a write of this process just left the counter."""
        self._length_read = (time.monotonic(), min(written, self.max_size))
        self._full = written >= self.max_size

    @classmethod
    def _as_stored(cls, data, batch_size) -> tuple:
        """``data`` as the TensorDict the dict stores (a plain tensor under
        ``_tensor``, a tensorclass as its fields) and the kind of row it is
        (_ROWS_ATTR)."""
        if cls._check_storable(data):
            return TensorDict({_TENSOR_KEY: data}, batch_size=batch_size), "tensor"
        if is_tensorclass(data):
            row_class = type(data)
            return data._tensordict, (f"tensorclass {row_class.__module__}:"
                                      f"{row_class.__qualname__}")
        return data, "tensordict"

    def _record_kind(self, store, kind: str) -> None:
        """Makes the dict say what its rows are, for every process: once per
        process, and a call only if it said something else (the attributes
        are read from the watched schema, usually without a round trip)."""
        if self._rows_kind == kind:
            return
        # What the dict says: known without asking if this object made the
        # dict (nothing) or set the attribute itself.
        said = self._said if self._said is not _UNKNOWN else store.attrs.get(_ROWS_ATTR)
        if said is not None and _row_batch_of(said) != _row_batch_of(kind):
            # Rows of another batch shape than the buffer's: refused before
            # anything is written, as LazyTensorStorage refuses them.
            raise RuntimeError(
                f"rows of batch dims {list(_row_batch_of(kind))} after the first storage dim "
                f"cannot join a buffer of rows of {list(_row_batch_of(said))}")
        # No attribute reads as "tensordict" (or "tensor" for a dict whose
        # only key is _tensor: buffers from before the attribute).
        if said != kind and (said is not None or kind != "tensordict"):
            store.attrs[_ROWS_ATTR] = kind
            said = kind
        self._said = said
        self._rows_kind = kind

    def _rows_of_kind(self, store, out):
        """What was stored, from the TensorDict read: the plain tensor, the
        tensorclass (when its module is imported in this process; a
        TensorDict otherwise), or the TensorDict."""
        if self._rows_kind is None:
            kind = store.attrs.get(_ROWS_ATTR)
            if kind is None:  # a buffer written before the attribute existed
                kind = "tensor" if list(store.keys()) == [_TENSOR_KEY] else "tensordict"
            self._rows_kind = kind
        kind = self._rows_kind
        row_batch = _row_batch_of(kind)
        if row_batch:
            # The dict keeps one batch dim (a record per row); the rows' own
            # batch dims come back from the attribute, as they were stored.
            out.batch_size = tuple(out.batch_size) + row_batch
            kind = kind.rpartition(" ")[0]
        if kind == "tensor":
            return out[_TENSOR_KEY]
        if kind.startswith("tensorclass "):
            row_class = _imported_class(kind[len("tensorclass "):])
            if row_class is not None:
                return row_class._from_tensordict(out)
        return out

    @staticmethod
    def _check_storable(data) -> bool:
        """Whether ``data`` is a plain tensor (else a tensor collection);
        TypeError for anything else."""
        if isinstance(data, list):
            raise TypeError("TdStoreStorage stores TensorDicts, tensorclasses and tensors, not "
                            "lists: stack them first")
        is_tensor = isinstance(data, torch.Tensor) and not is_tensor_collection(data)
        if not is_tensor and not is_tensor_collection(data):
            raise TypeError(f"TdStoreStorage cannot store {type(data).__name__}: use a "
                            "TensorDict, a tensorclass or a tensor")
        return is_tensor

    def get(self, index):
        """The rows at ``index`` of the rows written so far (as torchrl's
        TensorStorage: until the buffer is full, ``[:]``, negative positions
        and masks are of the first ``len`` rows): a local TensorDict, one
        indexed read."""
        store = self._opened()
        if store is None:
            raise RuntimeError("Cannot get elements out of a non-initialized storage.")
        out = store[self._within_length(index)]
        if out is store:  # every row (td[:] is the store itself): read them
            out = store.to_local()
        return self._rows_of_kind(store, out)

    def _within_length(self, index):
        """``index`` into the first ``len`` rows as an index into all rows."""
        n = len(self)
        if n == self.max_size:
            return index
        if index is Ellipsis:
            return slice(0, n)
        if isinstance(index, slice):
            return slice(*index.indices(n))
        if isinstance(index, int):
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of bounds for {n} rows")
            return index % n
        if isinstance(index, torch.Tensor):
            if index.dtype == torch.bool:
                if index.shape[0] != n:
                    raise IndexError(f"a mask of {index.shape[0]} for {n} rows")
                return torch.cat([index, index.new_zeros(self.max_size - n)])
            if bool(((index < -n) | (index >= n)).any()):
                raise IndexError(f"an index out of bounds for {n} rows")
            return index % n
        return index

    def __len__(self) -> int:
        if self._full:
            return self.max_size
        at, n = self._length_read
        now = time.monotonic()
        if now - at <= self._length_ttl:
            return n
        store = self._opened()
        if store is None:
            return 0
        n = min(store.counter_get(WRITTEN), self.max_size)
        self._length_read = (now, n)
        self._full = n == self.max_size
        return n

    def contains(self, item):
        n = len(self)
        if isinstance(item, int):
            if item < 0:
                item += n
            return 0 <= item < n
        if isinstance(item, torch.Tensor):
            if item.dtype == torch.bool:
                return bool(item.sum() <= n)
            return (item >= -n) & (item < n)
        raise NotImplementedError(f"type {type(item)} is not supported yet.")

    def _empty(self):
        """The length back to 0 (the rows stay until overwritten), for every
        process."""
        store = self._opened()
        self._full = False
        self._length_read = (-1.0, 0)
        if store is not None:
            for name in (WRITTEN, CURSOR):
                while True:
                    value = store.counter_get(name)
                    if store.counter_cas(name, value, 0):
                        break
        self._bump_mutation_revision()

    def state_dict(self) -> dict:
        """Which dict holds the rows (the rows themselves stay in tdstore)."""
        return {"name": self._name, "addr": self._addr, "max_size": self.max_size,
                "handle": self.handle}

    def load_state_dict(self, state_dict: dict) -> None:
        if int(state_dict["max_size"]) != self.max_size:
            raise ValueError(f"state_dict is of a storage of {state_dict['max_size']} rows, "
                             f"not {self.max_size}")
        self._name = state_dict["name"]
        self._addr = state_dict.get("addr", self._addr)
        self._store = None
        self._rows_kind = None
        self._said = _UNKNOWN
        self._full = False
        self._length_read = (-1.0, 0)
        handle = state_dict.get("handle")
        if handle is not None:
            self._store = TensorDictStore.from_store(handle, addr=self._addr, device=self._device,
                                                     **self._options)
        self._bump_mutation_revision()

    def dumps(self, path):
        """Writes which dict holds the rows to ``path``/tdstore_storage.json;
        the rows stay in tdstore (copy them with ``store.clone()`` or the
        CLI's ``tdstore cp`` for a snapshot)."""
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, _STATE_FILE), "w") as f:
            json.dump(self.state_dict(), f)

    def loads(self, path):
        with open(os.path.join(path, _STATE_FILE)) as f:
            self.load_state_dict(json.load(f))

    # StoreStorage keeps its length in the process; this storage keeps none.
    __getstate__ = Storage.__getstate__
    __setstate__ = Storage.__setstate__

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self._name!r}, max_size={self.max_size}, "
                f"len={len(self)})")


class TdStoreWriter(RoundRobinWriter):
    """torchrl's round-robin writer with the cursor in the TdStoreStorage's
    dict: every ``add``/``extend`` is one tdstore call that reserves its
    rows with one atomic step, writes them and then counts them
    (``TensorDictStore.append_ring``), so writers in several processes never
    write the same rows of one turn, and the length counts rows only once
    they are written. (With several collectors extending at once, the
    length is a total: until the buffer is full, a slower collector's rows
    below it may still be in flight, and a sample may read them as zeros.)"""

    def register_storage(self, storage) -> None:
        if not isinstance(storage, TdStoreStorage):
            raise TypeError(f"TdStoreWriter writes into a TdStoreStorage, not "
                            f"{type(storage).__name__}")
        super().register_storage(storage)

    def _reserve(self, n: int) -> torch.Tensor:
        store = self._storage._opened(create=True)
        end = store.counter_add(CURSOR, n)
        return torch.arange(end - n, end) % self._storage.max_size

    def add(self, data):
        self._storage._check_storable(data)
        start = self._storage._append(data.unsqueeze(0), 1)
        index = start % self._storage.max_size
        # torchrl's samplers read the storage's last cursor (SliceSampler
        # cuts trajectories at the ring's seam with it), as set() sets it.
        self._storage._set_last_cursor(index)
        self._write_count += 1
        self._bump_generation(index, data)
        self._mark_update_entities(index)
        return index

    def extend(self, data):
        if is_tensor_collection(data) or isinstance(data, torch.Tensor):
            n = len(data)
        else:
            raise TypeError(f"TdStoreWriter extends with a TensorDict or a tensor, not "
                            f"{type(data).__name__}")
        if n == 0:
            raise RuntimeError(f"Expected at least one element in extend. Got {data=}")
        max_size = self._storage.max_size
        if n <= max_size:
            start = self._storage._append(data, n)
            index = torch.arange(start, start + n) % max_size
            self._storage._set_last_cursor(index)
        else:
            # More rows than the ring: the last max_size of them are what
            # stays, as writing them in turn would leave; one reservation
            # of all n keeps the cursor where n appends would leave it.
            index = self._reserve(n)
            self._storage.set(index[-max_size:], data[-max_size:], set_cursor=False)
            self._storage._set_last_cursor(index)
            self._storage._counted(self._storage.store.counter_add(WRITTEN, n))
        self._write_count += n
        self._bump_generation(index, data)
        self._mark_update_entities(index)
        return index


def _with_row_batch(kind: str, row_batch) -> str:
    """The row-kind attribute's value: ``kind``, then the rows' batch dims
    after the storage dim when they have any (``"tensordict [2]"``)."""
    row_batch = [int(d) for d in row_batch]
    return f"{kind} {json.dumps(row_batch, separators=(',', ''))}" if row_batch else kind


def _row_batch_of(kind: str) -> tuple:
    """The rows' batch dims after the storage dim that ``kind`` records."""
    if not kind.endswith("]"):
        return ()
    return tuple(json.loads(kind[kind.rindex(" ") + 1:]))


def _imported_class(name: str):
    """The class "module:qualname" if its module is imported in this
    process, else None. Never imports: a dict attribute, which any writer of
    the dict may set, must not make a reader run a module's code."""
    module_name, _, qualname = name.partition(":")
    obj = sys.modules.get(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and is_tensorclass(obj) else None


def _rows_of(cursor, max_size: int) -> int | None:
    """The rows ``cursor`` selects as a batch size; None for one row (int)."""
    if isinstance(cursor, int):
        return None
    if isinstance(cursor, slice):
        return len(range(*cursor.indices(max_size)))
    cursor = torch.as_tensor(cursor)
    return int(cursor.sum()) if cursor.dtype == torch.bool else cursor.numel()


def _count(cursor, max_size: int) -> int:
    rows = _rows_of(cursor, max_size)
    return 1 if rows is None else rows
