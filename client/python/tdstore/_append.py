"""Row writes over one open stream: ``TensorDictStore.appender()``.

A replay buffer's collector or a logger writes rows one at a time, faster
than one call each could go. An ``Appender`` keeps one stream to tdstored
open (the core's ``Appender``, tdstored's ``AppendRows``): rows written at
consecutive positions are coalesced into batches of up to ``batch_rows``
rows, at most ``window`` batches wait for their acknowledgement, and every
batch is acknowledged. A batch tdstored refuses (rows out of range, a leaf
replaced by one of another dtype) wrote nothing; its error is raised by the
next ``append`` or ``flush``, once. Nothing is silently dropped::

    with store.appender(["obs", "reward"]) as out:
        for i, row in enumerate(rows):
            out[i] = row                  # td[i] = row, queued
    # leaving the block flushes: every row written, or an exception

One thread at a time, like a file.
"""

from __future__ import annotations

import torch
from tensordict._td import _unravel_key_to_tuple

from ._dtypes import DTYPES


class Appender:
    """Row writes into existing leaves of a TensorDictStore (see the module)."""

    def __init__(self, store, keys, batch_rows: int, window: int):
        described = store._dict.describe()["leaves"]
        # Tensor leaves only: a non-tensor's rows are not appended.
        leaves = {tuple(path): (dtype, tuple(shape))
                  for path, dtype, shape, _, kind, _ in described if kind == "tensor"}
        values = {tuple(path) for path, _, _, _, kind, _ in described if kind != "tensor"}
        prefix = tuple(store._prefix)
        if keys is None:
            keys = [p for p in store._leaf_paths() if prefix + p in leaves]
        self._keys = [_unravel_key_to_tuple(k) for k in keys]
        if not self._keys:
            raise ValueError("an appender needs at least one leaf")
        self._paths = [prefix + k for k in self._keys]
        self._dtypes, self._row_shapes = [], []
        for key, path in zip(self._keys, self._paths):
            if path in values:
                raise TypeError(f"{key!r} holds non-tensor values, which an appender does not "
                                "write; write them with td[idx] = ...")
            if path not in leaves:
                raise KeyError(f"no leaf {key!r} to append to; create it first (e.g. "
                               f"TensorDictStore.from_schema)")
            dtype, shape = leaves[path]
            self._dtypes.append(DTYPES[dtype])
            self._row_shapes.append(shape[1:])
        self._native = store._dict.appender([list(p) for p in self._paths],
                                            batch_rows=batch_rows, window=window)

    @property
    def keys(self) -> list:
        return list(self._keys)

    @property
    def rows_written(self) -> int:
        """Rows tdstored acknowledged as written so far."""
        return self._native.rows_written

    def append(self, start_row: int, rows) -> None:
        """``td[start_row : start_row + n] = rows``; ``rows`` is a TensorDict
        (or a mapping) holding each of the appender's keys with ``n`` rows."""
        tensors = []
        n = None
        for key, dtype, row_shape in zip(self._keys, self._dtypes, self._row_shapes):
            t = rows[key if len(key) > 1 else key[0]]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{key!r}: expected a tensor, got {type(t).__name__}")
            if tuple(t.shape[1:]) != row_shape or (n is not None and t.shape[0] != n):
                raise ValueError(f"{key!r}: rows of shape {tuple(t.shape)} do not fit rows of "
                                 f"{row_shape} (all keys with the same row count)")
            n = t.shape[0]
            tensors.append(t.detach().to(device="cpu", dtype=dtype).contiguous())
        self._native.append(int(start_row), int(n), [t.data_ptr() for t in tensors])

    def __setitem__(self, index, row) -> None:
        """``out[i] = row`` (one row: each key's tensor has the row's shape),
        or ``out[a:b] = rows``."""
        if isinstance(index, slice):
            if index.step not in (None, 1) or index.start is None:
                raise ValueError("an appender takes out[i] = row or out[start:stop] = rows")
            self.append(index.start, rows=row)
            return
        if not isinstance(index, int):
            raise TypeError("an appender takes an int row or a slice start:stop")
        self.append(index, {k if len(k) > 1 else k[0]: row[k if len(k) > 1 else k[0]].unsqueeze(0)
                            for k in self._keys})

    def flush(self) -> None:
        """Send what is queued and wait until every batch is acknowledged;
        raises the error of a batch tdstored refused."""
        self._native.flush()

    def __enter__(self) -> "Appender":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.flush()
