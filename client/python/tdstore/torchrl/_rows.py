"""What a replay buffer's rows are, and how its dict keeps them.

torchrl's storages hold four kinds of rows: TensorDicts, tensorclasses,
plain tensors and pytrees (dicts, tuples and lists of tensors), and give
back what was stored. A tdstore dict holds a TensorDict, so each kind is
kept as one:

- a TensorDict as itself;
- a tensorclass as its fields (its class named in the attribute);
- a plain tensor under the key ``_tensor``, as torchrl's StoreStorage does;
- a pytree as its leaves, under ``_tree_0``, ``_tree_1``, ... (its
  structure, torch's ``treespec_dumps``, in the attribute ``TREE_ATTR``).

The dict's batch is the storage's dims (``ndim`` of them), then the rows'
own batch dims after those (a ``[5, 2]`` extend of a one-dim storage makes
a dict of batch ``[max_size, 2]``), so every process reads the rows back
with the shape they were stored with, and a record dict still keeps a
whole dim-0 row in one range.

Pure: no calls to tdstored here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from tensordict import TensorDict, is_tensor_collection, is_tensorclass
from torch.utils._pytree import tree_flatten, tree_unflatten, treespec_dumps, treespec_loads

from .._store import _find_class as find_class

# The dict attribute that says what a row is: "tensor", "tensordict",
# "tensorclass <module>:<qualname>" or "pytree". (Buffers of an earlier
# version kept rows' extra batch dims out of the dict's batch, written
# after the kind: "tensordict [2]"; they are read as written.)
ROWS_ATTR = "tdstore.rb.rows"
# A pytree row's structure (torch.utils._pytree.treespec_dumps).
TREE_ATTR = "tdstore.rb.tree"
TENSOR_KEY = "_tensor"
_TREE_KEY = "_tree_"

# The tensorclasses this process stored rows of, by "module:qualname": a
# class defined in a function (its qualname has "<locals>") cannot be
# found by name, but rows this process wrote still come back as it.
_STORED_CLASSES: dict = {}


@dataclass(frozen=True)
class RowKind:
    """What a buffer's rows are (see the module's docstring)."""

    kind: str  # "tensor" | "tensordict" | "tensorclass <module>:<qualname>" | "pytree"
    tree: str | None = None  # a pytree row's structure
    outside_batch: tuple = ()  # an earlier version's buffer: dims not in the dict's batch

    def attrs(self) -> dict:
        """The dict attributes that record this kind."""
        out = {ROWS_ATTR: self.kind}
        if self.tree is not None:
            out[TREE_ATTR] = self.tree
        return out

    @classmethod
    def from_attrs(cls, attrs, keys) -> RowKind:
        """The kind a dict's attributes record. A dict without the attribute
        (a buffer from before it) holds tensors if its one key is ``_tensor``,
        else TensorDicts."""
        value = attrs.get(ROWS_ATTR)
        if value is None:
            return cls("tensor" if list(keys) == [TENSOR_KEY] else "tensordict")
        outside = ()
        if value.endswith("]"):
            value, _, dims = value.rpartition(" ")
            outside = tuple(json.loads(dims))
        return cls(value, attrs.get(TREE_ATTR) if value == "pytree" else None, outside)


def as_stored(data, batch_dims: int) -> tuple[TensorDict, RowKind]:
    """``data`` as the TensorDict its dict stores, and the kind of its rows.
    ``batch_dims``: how many leading dims of ``data`` the write's index
    covers in the storage's dims (the storage's ndim for an extend, one
    less for one row); the TensorDict's batch dims after those are the
    rows' own (none for tensors and pytrees). A list is a list of rows,
    stacked as torchrl stacks them. TypeError for what no torchrl tensor
    storage holds."""
    if isinstance(data, list):
        data = _stacked(data)
    if isinstance(data, torch.Tensor) and not is_tensor_collection(data):
        return TensorDict({TENSOR_KEY: data}, batch_size=data.shape[:batch_dims]), RowKind("tensor")
    if is_tensorclass(data):
        row_class = type(data)
        name = f"{row_class.__module__}:{row_class.__qualname__}"
        _STORED_CLASSES[name] = row_class
        kind = f"tensorclass {name}"
        return data._tensordict, RowKind(kind)
    if is_tensor_collection(data):
        return data, RowKind("tensordict")
    leaves, spec = tree_flatten(data)
    if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves) or spec.is_leaf():
        raise TypeError(f"a replay buffer on tdstore cannot store {type(data).__name__}: use a "
                        "TensorDict, a tensorclass, a tensor, or a dict, tuple or list of tensors")
    rows = leaves[0].shape[:batch_dims]
    if any(x.shape[:batch_dims] != rows for x in leaves):
        raise RuntimeError(f"the tensors of a row disagree on its first {batch_dims} dims: "
                           f"{[list(x.shape) for x in leaves]}")
    stored = TensorDict({f"{_TREE_KEY}{i}": x for i, x in enumerate(leaves)}, batch_size=rows)
    return stored, RowKind("pytree", treespec_dumps(spec))


def as_rows(out: TensorDict, kind: RowKind):
    """What was stored, from the TensorDict read out of the dict: the
    tensor, the pytree, the tensorclass (when its module is imported in
    this process; a TensorDict otherwise) or the TensorDict."""
    if kind.outside_batch:
        out.batch_size = tuple(out.batch_size) + tuple(kind.outside_batch)
    if kind.kind == "tensor":
        return out[TENSOR_KEY]
    if kind.kind == "pytree":
        spec = treespec_loads(kind.tree)
        return tree_unflatten([out[f"{_TREE_KEY}{i}"] for i in range(spec.num_leaves)], spec)
    if kind.kind.startswith("tensorclass "):
        row_class = imported_class(kind.kind[len("tensorclass "):])
        if row_class is not None:
            return row_class._from_tensordict(out)
    return out


def _stacked(items: list):
    """A list of rows as one batch of them, as torchrl's tensor storages
    stack a list given to ``extend``."""
    if not items:
        raise RuntimeError("Expected at least one element in extend.")
    if all(is_tensor_collection(x) for x in items):
        return torch.stack(items)
    flat = [tree_flatten(x) for x in items]
    spec = flat[0][1]
    try:
        if any(s != spec for _, s in flat):
            raise ValueError("the elements differ in structure")
        return tree_unflatten([torch.stack(leaves) for leaves in zip(*(f for f, _ in flat))],
                              spec)
    except (RuntimeError, ValueError) as err:  # torchrl's words, for code that matches them
        raise RuntimeError(f"Stacking the elements of the list resulted in an error: {err}. "
                           "The elements of a list given to extend must have the same "
                           "structure and shapes.") from err


def imported_class(name: str):
    """The tensorclass "module:qualname" if this process stored rows of it,
    or if its module is imported in this process, else None. Never imports:
    a dict attribute, which any writer of the dict may set, must not make a
    reader run a module's code."""
    if name in _STORED_CLASSES:
        return _STORED_CLASSES[name]
    try:
        obj = find_class(name, allow_import=False)
    except (ImportError, AttributeError):
        return None
    return obj if isinstance(obj, type) and is_tensorclass(obj) else None
