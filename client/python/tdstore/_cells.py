"""The cells of a ragged leaf (_ragged.py): one tensor of its own shape per
batch cell, each the value of one slot (common/ragged_cells.h), encoded and
decoded by the native module, and what a read of them gives back."""

from __future__ import annotations

import math
import warnings

import torch

from . import _native
from ._dtypes import DTYPE_NAMES, DTYPES, cpu_contiguous


class RaggedCells:
    """The cells of a ragged leaf as read: ``tensors`` in C order over
    ``cells`` (a batch shape), all of dtype ``spec``."""

    __slots__ = ("tensors", "cells", "spec")

    def __init__(self, tensors: list, cells, spec: str):
        self.tensors = tensors
        self.cells = torch.Size(cells)
        self.spec = spec

    def to(self, device) -> "RaggedCells":
        return RaggedCells([t.to(device) for t in self.tensors], self.cells, self.spec)

    def row(self, i: int) -> "RaggedCells":
        """The cells of row ``i`` of dim 0."""
        step = math.prod(self.cells[1:])
        return RaggedCells(self.tensors[i * step:(i + 1) * step], self.cells[1:], self.spec)

    def public(self):
        """What ``td["key"]`` gives, as a lazy stack's ``get`` gives it: one
        tensor for a single cell, or for cells that all have one shape (the
        rows of one element of a stack, or a selection whose cells agree);
        else a nested tensor when torch can make one (same number of dims in
        every cell, one batch dim), else a list (nested lists for more batch
        dims)."""
        if not self.cells:
            return self.tensors[0]
        shapes = {tuple(t.shape) for t in self.tensors}
        if len(shapes) == 1:
            return torch.stack(self.tensors).reshape(tuple(self.cells) + shapes.pop())
        if len(self.cells) == 1:
            ndims = {t.dim() for t in self.tensors}
            if len(ndims) == 1 and self.tensors and ndims != {0}:
                with warnings.catch_warnings():
                    # torch calls strided nested tensors a prototype; jagged
                    # ones allow one ragged dim only, cells may have more.
                    warnings.simplefilter("ignore", UserWarning)
                    try:
                        return torch.nested.nested_tensor(self.tensors, layout=torch.strided)
                    except (NotImplementedError, RuntimeError):
                        pass  # a dtype torch has no nested tensor of (uint16, float8, ...)
            return list(self.tensors)
        return [self.row(i).public() for i in range(self.cells[0])]


def encode_cell(value: torch.Tensor) -> bytes:
    """A tensor as the value of one slot of a ragged leaf."""
    t = cpu_contiguous("ragged cell", value)
    return _native.encode_ragged_cell(DTYPE_NAMES[t.dtype], list(t.shape), t.data_ptr(),
                                      t.numel() * t.element_size())


def _cell_tensor(spec: str, shape, data: bytearray) -> torch.Tensor:
    dtype = DTYPES[spec]
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)


def decode_rows(spec: str, slots: torch.Tensor) -> list:
    """The cells of a uint8 ``[..., slot]`` tensor of a ragged leaf's slots,
    C order, decoded in one native call."""
    slots = slots.contiguous()
    count = math.prod(slots.shape[:-1])
    if not count:
        return []
    return [_cell_tensor(spec, shape, data) for shape, data in
            _native.decode_ragged_rows(spec, slots.data_ptr(), count, slots.shape[-1])]
