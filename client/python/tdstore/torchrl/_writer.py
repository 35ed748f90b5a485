"""``TdStoreWriter``: torchrl's round-robin writer with its state in the
TdStoreStorage's dict (see the package's docstring)."""

from __future__ import annotations

import torch
from torchrl.data.replay_buffers.writers import RoundRobinWriter, Writer

from ._rows import as_stored
from ._storage import CURSOR, WRITTEN, TdStoreStorage, set_counter

# Writes counted before the last empty(empty_write_count=False): the
# writer's _write_count is this plus WRITTEN.
WRITES_BEFORE = "tdstore.rb.writes_before"


class TdStoreWriter(RoundRobinWriter):
    """torchrl's round-robin writer with the cursor in the TdStoreStorage's
    dict: every ``add``/``extend`` is one tdstore call that reserves its
    rows with one atomic step, writes them and then counts them
    (``TensorDictStore.append_ring``), so writers in several processes never
    write the same rows of one turn, and the length counts rows only once
    they are written. (With several collectors extending at once, the
    length is a total: until the buffer is full, a slower collector's rows
    below it may still be in flight, and a sample may read them as zeros.)

    torchrl's writer state is the dict's, the same in every process:
    ``_cursor`` is the next row along dim 0 (the dict's cursor counter, mod
    dim 0's size), ``_write_count`` the dim-0 rows every writer wrote since
    the last ``empty`` (counters), and ``state_dict``/``load_state_dict``,
    ``dumps``/``loads`` read and set them there."""

    def register_storage(self, storage) -> None:
        if not isinstance(storage, TdStoreStorage):
            raise TypeError(f"TdStoreWriter writes into a TdStoreStorage, not "
                            f"{type(storage).__name__}")
        super().register_storage(storage)

    # -- state: the dict's counters --

    def _store(self):
        storage = self.__dict__.get("_storage")
        return None if storage is None else storage._opened()

    @property
    def _cursor(self) -> int:
        store = self._store()
        return 0 if store is None else store.counter_get(CURSOR) % store.batch_size[0]

    @_cursor.setter
    def _cursor(self, value) -> None:
        store = self._store()
        if store is not None:
            set_counter(store, CURSOR, int(value))
        elif int(value) != 0:
            raise RuntimeError("TdStoreWriter: the cursor of a buffer not written yet is 0")

    @property
    def _write_count(self) -> int:
        store = self._store()
        if store is None:
            return 0
        return store.counter_get(WRITES_BEFORE) + store.counter_get(WRITTEN)

    @_write_count.setter
    def _write_count(self, value) -> None:
        store = self._store()
        if store is not None:
            store.counter_add(WRITES_BEFORE, int(value) - self._write_count)
        elif int(value) != 0:
            raise RuntimeError("TdStoreWriter: the write count of a buffer not written yet is 0")

    def _empty(self, empty_write_count: bool = True) -> None:
        # Called before the storage's _empty, which zeroes WRITTEN and CURSOR.
        store = self._store()
        if store is not None:
            if empty_write_count:
                set_counter(store, WRITES_BEFORE, 0)
            else:
                store.counter_add(WRITES_BEFORE, store.counter_get(WRITTEN))
        generation = self._generation
        if generation is not None:  # as torchrl's: every stamped slot moves on
            generation[generation >= 0] += 1

    # torchrl's RoundRobinWriter pickles its process-local values; this
    # writer has none.
    __getstate__ = Writer.__getstate__

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)

    # -- writes --

    def add(self, data):
        start, _ = self._storage._append(data, single=True)
        index = start % self._storage._max_size_along_dim0()
        # torchrl's samplers read the storage's last cursor (SliceSampler
        # cuts trajectories at the ring's seam with it), as set() sets it.
        self._storage._set_last_cursor(index)
        self._bump_generation(index, data)
        index = self._replicate_index(index)
        self._mark_update_entities(index)
        return index

    def extend(self, data):
        stored, kind = as_stored(data, self._storage.ndim)
        n = stored.batch_size[0] if stored.batch_dims else 0
        if n == 0:
            raise RuntimeError(f"Expected at least one element in extend. Got {data=}")
        rows = self._storage._max_size_along_dim0(batched_data=data)
        if n <= rows:
            start, _ = self._storage._append(data, single=False)
            index = torch.arange(start, start + n) % rows
            self._storage._set_last_cursor(index)
        else:
            # More rows than the ring: the last ``rows`` of them are what
            # stays, as writing them in turn would leave; one reservation
            # of all n keeps the cursor where n appends would leave it.
            ndim = self._storage.ndim
            store = self._storage._writable(stored, kind, ndim, False)
            end = store.counter_add(CURSOR, n)
            index = torch.arange(end - n, end) % rows
            self._storage._write(index[-rows:], stored[-rows:], kind, ndim, count=n)
            self._storage._set_last_cursor(index)
        self._bump_generation(index, data)
        index = self._replicate_index(index)
        self._mark_update_entities(index)
        return index

    def write_at(self, index, data):
        """Writes ``data`` at ``index`` without moving the cursor, as
        torchrl's: the length grows to hold the rows, and the write count
        by the rows written."""
        before = self._write_count
        self._storage.set(index, data, set_cursor=False)
        count = 1 if isinstance(index, int) else torch.as_tensor(index).shape[:1].numel()
        self._bump_generation(index, data)
        self._update_storage_len_for_write_at(index)
        self._write_count = before + count
        index = self._replicate_index(index)
        self._mark_update_entities(index)
        return index
