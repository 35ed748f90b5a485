"""``rb[:]`` of a TdStoreStorage: the rows read, whose indexed assignments
also reach the buffer.

torchrl's ``ReplayBuffer`` writes a multi-dim index (``rb[0, 3:4] = v``)
as ``rb[:][0, 3:4] = v``: it assigns into what ``rb[:]`` returned (for an
``ndim=2`` storage, ``rb[:]`` transposed so that the collectors' dim comes
first). For torchrl's in-memory storages that is a view of the storage,
so the write lands. A tdstore buffer's rows live in tdstored, and
``rb[:]`` is a local copy: an assignment into a plain copy would be
dropped without a word.

So ``get`` gives the rows of a whole-buffer read as ``BufferRows`` (a
TensorDict, for TensorDict and tensorclass rows) or ``BufferTensor`` (a
tensor, for tensor rows): local copies whose own ``[index] = value``
writes the copy and then the buffer, at the same cells, in one indexed
write. ``transpose`` of storage dims keeps that (the copy remembers which
storage dim each of its dims is). Everything else about them is their
base class's: reads are local, a transform that sets a key sets it on the
copy only (as on the view of torchrl's storages), and what is derived
from them (``rows[0]``, ``rows + 1``) or pickled is a plain copy. An in-place change
of one of their tensors (``rows["a"][3] = 0``) stays local: only the
copy's own ``[index] = value`` is written through.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict, is_tensor_collection, is_tensorclass

from ._rows import TENSOR_KEY


class _WriteBack:
    """Where a whole-buffer read came from: the storage, the dict's batch
    as the copy holds it (its first ``n`` dim-0 rows, the length when it
    was read), and which of those dims each of the copy's first dims is
    (``perm``: a transpose of storage dims permutes it)."""

    def __init__(self, storage, batch: torch.Size, perm: tuple):
        self.storage = storage
        self.batch = batch
        self.perm = perm

    def transposed(self, dim0: int, dim1: int, ndim: int) -> _WriteBack | None:
        """The write-back of the copy's ``transpose(dim0, dim1)`` (``ndim``:
        the copy's dims), or None where the copy no longer maps onto the
        buffer's dims."""
        dim0, dim1 = dim0 % ndim, dim1 % ndim
        perm = list(self.perm)
        if max(dim0, dim1) >= len(perm):
            return None
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return _WriteBack(self.storage, self.batch, tuple(perm))

    def cells(self, index, dims: int) -> tuple:
        """The dict cells that ``copy[index]`` selects (``dims``: the copy's
        dims, element dims of tensor rows included): one index tensor per
        dict batch dim, flat, in the order of the selection. ValueError for
        an index that reaches into a tensor row's element dims; IndexError
        as torch raises it."""
        index = _within_batch(index, dims, len(self.batch))
        grid = torch.arange(math.prod(self.batch)).view(self.batch)
        grid = grid.permute(*self.perm, *range(len(self.perm), len(self.batch)))
        positions = grid[index]
        return positions.shape, torch.unravel_index(positions.reshape(-1), self.batch)

    def write(self, selected: torch.Size, cells: tuple, value, kind: str) -> None:
        """``value``, as an assignment into the copy's ``selected`` cells
        broadcasts it, written into the buffer at ``cells``."""
        if not math.prod(selected):
            return  # no cell selected (an empty slice): nothing to write
        if is_tensor_collection(value):
            value = value._tensordict if is_tensorclass(value) else value
            if value.batch_size != selected:
                value = value.expand(selected)
            value = value.reshape(-1)
        elif kind == "tensor":
            value = torch.as_tensor(value)
            element = self.storage._opened().get_item_shape(TENSOR_KEY)[len(self.batch):]
            value = {TENSOR_KEY: value.expand(*selected, *element).reshape(-1, *element)}
        self.storage._write_cells(cells, value)


class BufferRows(TensorDict):
    """``rb[:]`` of TensorDict rows: see the module's docstring. Only the
    instance ``get`` returns writes through; TensorDicts derived from it
    (tensordict builds them with the same class) have no ``_write_back``
    and are plain copies."""

    _write_back: _WriteBack | None = None

    def __setitem__(self, index, value) -> None:
        back = self._write_back
        if back is None or _names_a_key(index):
            super().__setitem__(index, value)
            return
        selected, cells = back.cells(index, self.batch_dims)  # may refuse: nothing written
        super().__setitem__(index, value)
        back.write(selected, cells, value, "tensordict")

    def __reduce_ex__(self, protocol):
        # Pickled (another process, torch.save): a plain TensorDict, which
        # writes nowhere, as a pickled view of torchrl's storage is a copy.
        plain = TensorDict._new_unsafe(source=dict(self.items()), batch_size=self.batch_size,
                                       device=self.device, nested=False)
        return _unpickled, (plain,)

    def transpose(self, dim0, dim1):
        out = super().transpose(dim0, dim1)
        back = self._write_back
        back = None if back is None else back.transposed(dim0, dim1, self.batch_dims)
        return out if back is None else _rows_of(out, back)


class BufferTensor(torch.Tensor):
    """``rb[:]`` of tensor rows: see the module's docstring. Operations on
    it give plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    _write_back: _WriteBack | None = None

    def __setitem__(self, index, value) -> None:
        back = self._write_back
        if back is None:
            super().__setitem__(index, value)
            return
        selected, cells = back.cells(index, self.dim())
        super().__setitem__(index, value)
        back.write(selected, cells, value, "tensor")

    def __reduce_ex__(self, protocol):
        return _unpickled, (self.as_subclass(torch.Tensor),)  # see BufferRows'

    def transpose(self, dim0, dim1):
        out = torch.Tensor.transpose(self, dim0, dim1)
        back = self._write_back
        back = None if back is None else back.transposed(dim0, dim1, self.dim())
        return out if back is None else _tensor_of(out, back)


def writing_back(rows, storage, batch: torch.Size, ndim: int):
    """``rows`` (as ``as_rows`` made them from a whole-buffer read of the
    cells ``batch``, the first ``ndim`` of them storage dims) as a copy that
    writes indexed assignments through to ``storage``; pytrees are given
    back as they are (an assignment into a dict or tuple is not a write of
    rows, in torchrl's storages either)."""
    back = _WriteBack(storage, batch, tuple(range(ndim)))
    if is_tensorclass(rows):
        return type(rows)._from_tensordict(_rows_of(rows._tensordict, back))
    if isinstance(rows, TensorDict):
        return _rows_of(rows, back)
    if isinstance(rows, torch.Tensor):
        return _tensor_of(rows, back)
    return rows


def _rows_of(td: TensorDict, back: _WriteBack) -> BufferRows:
    out = BufferRows._new_unsafe(source=dict(td.items()), batch_size=td.batch_size,
                                 device=td.device, nested=False)
    out._write_back = back
    return out


def _tensor_of(t: torch.Tensor, back: _WriteBack) -> BufferTensor:
    out = t.as_subclass(BufferTensor)
    out._write_back = back
    return out


def _unpickled(plain):
    """A pickled BufferRows or BufferTensor: its plain copy."""
    return plain


def _names_a_key(index) -> bool:
    """``rows["a"] = v`` / ``rows["a", "b"] = v`` set a key of the copy, as
    on torchrl's view: only cell indices are written through."""
    return isinstance(index, str) or (isinstance(index, tuple) and bool(index)
                                      and all(isinstance(i, (str, tuple)) for i in index))


def _within_batch(index, dims: int, batch_dims: int):
    """``index`` into a copy of ``dims`` dims as an index of its first
    ``batch_dims`` (the dict's batch): an Ellipsis is spelled out and
    whole-dim slices of the element dims dropped. ValueError for an index
    that selects within the element dims (the buffer is written a cell at
    a time)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if Ellipsis in items:
        at = items.index(Ellipsis)
        named = sum(i.dim() if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1
                    for i in items if i is not Ellipsis and i is not None)
        items[at:at + 1] = [slice(None)] * (dims - named)
    extra = items[batch_dims:]
    if any(not (isinstance(i, slice) and i == slice(None)) for i in extra):
        raise ValueError(f"rb[:][{index!r}] = ...: an indexed write into the whole-buffer "
                         f"copy selects within its element dims; write whole cells "
                         f"(the first {batch_dims} dims)")
    return tuple(items[:batch_dims])
