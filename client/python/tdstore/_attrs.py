"""``TensorDictStore.attrs``: the dict's attributes, a mutable mapping of str
to str stored with the dict in tdstored (shared by every process and
machine, read with its schema).

Every read asks the dict's schema (answered from the client's watched copy
when it is current, so usually without a round trip); every change is one
atomic call. Names are 1..256 bytes, values at most 4096 bytes, and a dict
holds at most 256 attributes: beyond that tdstored refuses the change
(``InvalidArgumentError`` / ``ResourceExhaustedError``) and nothing changes.

tensordict's own ``TensorDictBase.attrs(fields=...)`` (a deviceless
TensorDict of tensor attributes) stays available: calling the mapping
calls it.
"""

from __future__ import annotations

from collections.abc import MutableMapping


class StoreAttrs(MutableMapping):
    """``store.attrs["device"] = "cuda:0"``; ``dict(store.attrs)``."""

    __slots__ = ("_store",)

    def __init__(self, store):
        self._store = store

    def _current(self) -> dict:
        return self._store._dict.describe()["attrs"]

    def __getitem__(self, name: str) -> str:
        return self._current()[name]

    def __setitem__(self, name: str, value: str) -> None:
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("attribute names and values are str, got "
                            f"{type(name).__name__}: {type(value).__name__}")
        self._store._dict.update_attrs({name: value})

    def __delitem__(self, name: str) -> None:
        if name not in self._current():
            raise KeyError(name)
        self._store._dict.update_attrs({}, [name])

    def update(self, other=(), /, **kwargs) -> None:
        """Sets every given attribute in one atomic call."""
        values = dict(other, **kwargs)
        for name, value in values.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError("attribute names and values are str, got "
                                f"{type(name).__name__}: {type(value).__name__}")
        if values:
            self._store._dict.update_attrs(values)

    def __iter__(self):
        return iter(sorted(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __contains__(self, name) -> bool:
        return name in self._current()

    def __eq__(self, other) -> bool:
        return dict(self._current()) == dict(other)

    def __repr__(self) -> str:
        return f"StoreAttrs({dict(sorted(self._current().items()))!r})"

    def __call__(self, *args, **kwargs):
        # tensordict's TensorDictBase.attrs(fields=..., num_threads=...).
        from tensordict import TensorDictBase
        return TensorDictBase.attrs(self._store, *args, **kwargs)
