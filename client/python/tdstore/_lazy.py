"""``tdstore.LazyStackedTensorDictStore``: tensordict's lazy stack, kept in
tdstored, and the write-through views of its elements.

A lazy stack of ``count`` TensorDicts of batch ``inner`` is one tdstore dict
of batch ``inner`` with ``count`` inserted at ``stack_dim``. A key whose
elements agree in shape is an ordinary tensor leaf; one whose elements
differ is a ragged leaf (_ragged.py), one tensor per cell. So every read and
write of any set of elements is one call, as on any TensorDictStore.

The stack dim is a fact of the dict, fixed when it is made: it is kept in the
dict's attributes (``STACK_DIM_ATTR``), so any process that opens the dict
sees the same stack.

``stack[i]`` (along dim 0) is an element view: a TensorDictStore over the
same dict that sees it at row ``i`` only (:class:`_RowDict`). Everything it
reads and writes is that row: ``view["a"] = v``, ``view.set(...)``, nested
keys, ``update`` and ``view[idx] = ...`` each write row ``i`` in one call,
values cast to the leaves' dtypes, and a value whose shape does not fit the
element's is refused by tdstored with nothing written. What would change the
whole stack (deleting or renaming a key, locking, resizing) is refused
through a view.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict
from tensordict._td import _unravel_key_to_tuple
from tensordict.base import _register_tensor_class

from ._leaves import _leaf_from, _path_str, _selects_all
from ._store import TensorDictStore
from ._values import RAGGED, Values

STACK_DIM_ATTR = "tdstore.stack_dim"

_WHOLE_STACK = "do it on the LazyStackedTensorDictStore, not through one of its elements"


def _stack_batch(count: int, stack_dim: int, inner) -> torch.Size:
    inner = list(torch.Size(inner))
    if not 0 <= stack_dim <= len(inner):
        raise ValueError(f"stack_dim={stack_dim} is out of range for inner_batch_size="
                         f"{inner}")
    inner.insert(stack_dim, int(count))
    return torch.Size(inner)


class _RowDict:
    """A native Dict seen at one row of batch dim 0: every read, write and
    fill is given that row as its first index term, and what it describes has
    batch dim 0 removed. Calls that would act on every row are refused."""

    def __init__(self, native, row: int):
        self._native = native
        self._row = row

    def _at(self, terms):
        return [("int", self._row)] + list(terms or ())

    def read(self, paths, index=None, exact_leaf=None, **kwargs):
        return self._native.read(paths, self._at(index), exact_leaf, **kwargs)

    def write(self, leaves, index=None, **kwargs):
        kwargs.pop("refuse_if_locked", None)  # rows of existing leaves: as tensordict allows
        return self._native.write(leaves, self._at(index), **kwargs)

    def write_counted(self, leaves, index, counter, add):
        return self._native.write_counted(leaves, self._at(index), counter, add)

    def fill(self, leaves, index=None):
        return self._native.fill(leaves, self._at(index))

    def batch_size(self):
        return tuple(self._native.batch_size())[1:]

    def describe(self):
        info = dict(self._native.describe())
        info["batch_size"] = tuple(info["batch_size"])[1:]
        info["leaves"] = [(path, dtype, tuple(shape)[1:], *rest)
                          for path, dtype, shape, *rest in info["leaves"]]
        return info

    # What every row shares: the same answer as the stack's.
    def keys(self, *args, **kwargs):
        return self._native.keys(*args, **kwargs)

    def contains(self, path):
        return self._native.contains(path)

    def is_locked(self):
        return self._native.is_locked()

    @property
    def name(self):
        return self._native.name

    @property
    def handle(self):
        return self._native.handle

    @property
    def client(self):
        return self._native.client

    def __getattr__(self, name):
        # erase, rename, resize, set_locked, append_ring, clone, drop, copy,
        # counters, attributes: they act on the whole stack.
        raise RuntimeError(f"{name}: {_WHOLE_STACK}")


def _has_later_advanced(index) -> bool:
    """Whether an index over an element's dims holds a tensor (or list) after
    another item: prefixed with the element's row it would then index as
    torch indexes non-adjacent advanced items (their dims first), which
    ``element[idx]`` does not."""
    if not isinstance(index, tuple):
        return False
    return any(isinstance(item, (torch.Tensor, list)) for item in index[1:])


class _StackElement(TensorDictStore):
    """``stack[i]``: element ``i`` of a :class:`LazyStackedTensorDictStore`
    (stacked along dim 0), reading and writing through to the store."""

    def __init__(self, *args, **kwargs):
        raise TypeError("an element view comes from stack[i]")

    @classmethod
    def _of(cls, stack: "LazyStackedTensorDictStore", row: int, prefix=None):
        count = stack.batch_size[0]
        if not -count <= row < count:
            raise IndexError(f"index {row} is out of range for a stack of {count} elements")
        row = row % count if count else row
        obj = cls.__new__(cls)
        obj._init(_RowDict(stack._dict, row), stack._client, stack.batch_size[1:],
                  stack._device, stack._prefix if prefix is None else prefix)
        obj._stack = stack
        obj._row = row
        return obj

    def _subview(self, prefix):
        return _StackElement._of(self._stack, self._row, prefix)

    # Writes: every whole-leaf write of a view is a write of its row, cast to
    # the leaves' dtypes (_indexed_write). A view's writes never go behind:
    # ``behind`` is taken only to be refused.
    def _write(self, items, terms=None, refuse_if_locked=False, ring=None, count=None,
               behind=False, batch_size=None):
        # An element's whole leaves are its rows of the stack's leaves: an
        # indexed write, which takes no batch size.
        if ring is not None:
            raise RuntimeError(f"append_ring: {_WHOLE_STACK}")
        if terms is None:
            return self._indexed_write(items, [], index=Ellipsis, count=count)
        self._check_cell_shapes(items, terms)
        return super()._write(items, terms, refuse_if_locked, count=count)

    def _check_cell_shapes(self, items, terms):
        """An element's entry whose elements differ in shape is a ragged leaf,
        whose cells could take any shape: as tensordict's store does, a view
        refuses to change the element's shape (one read of the cells it would
        replace), and nothing is written."""
        existing = None
        for path, new in items:
            if not (isinstance(new, Values) and new.kind == RAGGED):
                continue
            existing = self._describe_full() if existing is None else existing
            if path not in existing:
                continue  # a new key: no shape to keep
            _, leaves = self._dict.read([path], terms, path, dlpack=True)
            old = _leaf_from(*leaves[0][1:])
            if [tuple(t.shape) for t in old.tensors] != [tuple(t.shape) for t in new.values]:
                raise ValueError(
                    f"{_path_str(path)}: element {self._row} holds cells of shapes "
                    f"{sorted({tuple(t.shape) for t in old.tensors})}; a view of it cannot "
                    f"write cells of shapes {sorted({tuple(t.shape) for t in new.values})} "
                    "(write the stack's row instead: stack[i] = element)")

    def __getitem__(self, index):
        if _has_later_advanced(index):
            return self.to_local()[index]
        return super().__getitem__(index)

    def __setitem__(self, index, value):
        if _has_later_advanced(index):
            raise NotImplementedError(
                "an element view of a LazyStackedTensorDictStore writes indexes whose "
                "tensors come first or alone; index the stack instead: stack[i, ...] = value")
        return super().__setitem__(index, value)

    def _get_at_path(self, rel, idx, default):
        if _has_later_advanced(idx):
            value = self._get_path(rel, default)
            return value if value is default else value[idx]
        return super()._get_at_path(rel, idx, default)

    def resize_(self, n):
        raise RuntimeError(f"resize_: {_WHOLE_STACK}")

    def _change_batch_size(self, new_size):
        raise RuntimeError(f"the batch size of a stack's element is the stack's: {_WHOLE_STACK}")

    def lock_(self):
        raise RuntimeError(f"lock_: {_WHOLE_STACK}")

    def unlock_(self):
        raise RuntimeError(f"unlock_: {_WHOLE_STACK}")

    def _clone(self, recurse: bool = True):
        # A copy of one element is local: the element is no dict of its own.
        return self.to_local() if recurse else self

    def __reduce__(self):
        return (_element_of, (self._stack, self._row, self._prefix))

    def __repr__(self) -> str:
        keys = sorted(_path_str(k if isinstance(k, tuple) else (k,))
                      for k in self.keys(include_nested=True, leaves_only=True))
        return (f"_StackElement(index={self._row}, of={self._stack.name!r}, keys={keys}, "
                f"batch_size={self.batch_size}, device={self._device})")


def _element_of(stack, row, prefix):
    return _StackElement._of(stack, row, prefix)


class LazyStackedTensorDictStore(TensorDictStore):
    """A lazy stack of TensorDicts (tensordict's ``LazyStackedTensorDict``)
    whose leaves live in tdstored: a drop-in for
    ``tensordict.store.LazyStackedTensorDictStore``.

    ``LazyStackedTensorDictStore(*, count, inner_batch_size, stack_dim=0,
    **TensorDictStore keywords)`` makes an empty stack; most code makes one
    with :meth:`from_lazy_stack` and opens one with :meth:`from_store`.

    Elements whose entries differ in shape are kept one tensor per cell
    (ragged leaves); reads of such entries give a lazy stack back. ``stack[i]``
    along dim 0 is a view of element ``i`` that writes through; every other
    index reads the selected elements in one call, as a local TensorDict (or
    LazyStackedTensorDict where shapes differ).
    """

    def __init__(self, *, count: int | None = None, inner_batch_size=None, stack_dim: int = 0,
                 batch_size=None, **kwargs):
        if batch_size is None:
            if count is None or inner_batch_size is None:
                raise TypeError("LazyStackedTensorDictStore needs count= and "
                                "inner_batch_size= (or batch_size=)")
            batch_size = _stack_batch(count, stack_dim, inner_batch_size)
        else:
            batch_size = torch.Size(batch_size)
            if not 0 <= stack_dim < len(batch_size):
                raise ValueError(f"stack_dim={stack_dim} is out of range for batch_size="
                                 f"{list(batch_size)}")
            if count is not None and batch_size[stack_dim] != count:
                raise ValueError(f"count={count} but batch_size[{stack_dim}]="
                                 f"{batch_size[stack_dim]}")
        super().__init__(batch_size=batch_size, **kwargs)
        stored = self.attrs.get(STACK_DIM_ATTR)
        if stored is None:
            self.attrs[STACK_DIM_ATTR] = str(stack_dim)
        elif int(stored) != stack_dim:
            raise ValueError(f"td_id={self.name!r} is a stack along dim {stored}, not "
                             f"{stack_dim}")

    # -- what the stack is --

    @property
    def stack_dim(self) -> int:
        """The dim the elements are stacked along (fixed when the stack was made)."""
        cached = self.__dict__.get("_stack_dim_value")
        if cached is None:
            if not self._batch_size:
                raise ValueError(f"{self.name!r} has no batch dims: it is no stack")
            cached = int(self.attrs.get(STACK_DIM_ATTR, "0"))
            self.__dict__["_stack_dim_value"] = cached
        return cached

    _stack_dim = stack_dim

    @property
    def _count(self) -> int:
        return self.batch_size[self.stack_dim]

    @property
    def _inner_batch_size(self) -> torch.Size:
        shape = list(self.batch_size)
        del shape[self.stack_dim]
        return torch.Size(shape)

    def _subview(self, prefix):
        view = super()._subview(prefix)
        view.__dict__["_stack_dim_value"] = self.__dict__.get("_stack_dim_value")
        return view

    # -- construction --

    @classmethod
    def from_lazy_stack(cls, lazy_td, *, device=None, **kwargs) -> "LazyStackedTensorDictStore":
        """A new stack holding ``lazy_td`` (a LazyStackedTensorDict, or a list
        of TensorDicts stacked along dim 0): create, then one write.

        Along dim 0 the elements may differ in the shapes of their entries;
        along another dim they must agree (ValueError otherwise)."""
        if isinstance(lazy_td, (list, tuple)):
            lazy_td = LazyStackedTensorDict(*lazy_td, stack_dim=0)
        if not isinstance(lazy_td, LazyStackedTensorDict):
            raise TypeError(f"from_lazy_stack takes a LazyStackedTensorDict, got "
                            f"{type(lazy_td).__name__}")
        stack_dim = lazy_td.stack_dim
        local = lazy_td
        if stack_dim != 0:
            try:
                local = lazy_td.contiguous()
            except RuntimeError as err:
                raise ValueError(f"a lazy stack along dim {stack_dim} whose elements differ in "
                                 f"shape cannot be stored ({err}): restack it along dim 0"
                                 ) from None
        return cls._upload(local, lazy_td.batch_size, device, kwargs.pop("addr", None),
                           kwargs.pop("name", None), kwargs.pop("client", None),
                           dict(kwargs, stack_dim=stack_dim))

    @classmethod
    def from_tensordict(cls, td, **kwargs) -> "LazyStackedTensorDictStore":
        if isinstance(td, LazyStackedTensorDict):
            return cls.from_lazy_stack(td, **kwargs)
        return cls.from_lazy_stack(LazyStackedTensorDict(*td.unbind(0), stack_dim=0),
                                   **kwargs)

    # -- elements --

    def __getitem__(self, index):
        if type(index) is int and self.stack_dim == 0:
            return _StackElement._of(self, index)
        if isinstance(index, (str, tuple)) and _unravel_key_to_tuple(index):
            return super().__getitem__(index)
        if _selects_all(index):
            return self
        return super().__getitem__(index)

    def __repr__(self) -> str:
        base = super().__repr__()
        head, _, rest = base.partition("(")
        return (f"LazyStackedTensorDictStore(\n    count={self._count},\n    stack_dim="
                f"{self.stack_dim},\n    {rest.lstrip()}")


_register_tensor_class(LazyStackedTensorDictStore)

__all__ = ["LazyStackedTensorDictStore", "STACK_DIM_ATTR"]

