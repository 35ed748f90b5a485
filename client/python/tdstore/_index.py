"""Turning a torch index (``td[idx]``) into the native module's index terms.

Pure Python over torch; no network. The native module takes a list of terms,
one per item of a torch index tuple (see NATIVE_API.md)::

    ("int", i) | ("slice", start, stop, step) | ("ellipsis",)
    | ("positions", data_ptr, numel, shape)      # contiguous int64, C order
    | ("mask", data_ptr, numel)                  # contiguous 1-D bool

Positions and masks are passed as raw pointers, so the tensors that own that
memory must stay alive until the native call returns: ``convert_index``
returns them in ``keep`` and the caller holds that list across the call.

tdstored checks bounds (OUT_OF_RANGE -> IndexError) and everything else about
the index; the checks done here are the ones where a local TensorDict raises
a different builtin than the server's code maps to (a mask of the wrong shape,
too many indices, a float index tensor: IndexError, as torch raises them), or
where the server cannot be asked at all (None, 0-d bool).
"""

from __future__ import annotations

import numbers

import torch

try:  # NumPy is optional: torch works without it.
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is installed with torch here
    _np = None

_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


class ConvertedIndex:
    """What ``convert_index`` returns.

    terms: the native index terms.
    keep: tensors whose memory ``terms`` points to (hold until the call returns).
    post: ``None``, or a local index to apply to the result afterwards (only
        for ``None``/newaxis items, which add dims the server knows nothing of).
    """

    __slots__ = ("terms", "keep", "post")

    def __init__(self, terms, keep, post):
        self.terms = terms
        self.keep = keep
        self.post = post


def _positions_term(t: torch.Tensor, keep: list):
    if t.dtype is not torch.int64 or t.device.type != "cpu" or not t.is_contiguous():
        t = t.to(device="cpu", dtype=torch.int64).contiguous()
    keep.append(t)
    return ("positions", t.data_ptr(), t.numel(), tuple(t.shape))


def _mask_term(t: torch.Tensor, keep: list):
    if t.dtype is not torch.bool or t.device.type != "cpu" or not t.is_contiguous():
        t = t.to(device="cpu", dtype=torch.bool).contiguous()
    keep.append(t)
    return ("mask", t.data_ptr(), t.numel())


def _as_index_tensor(item) -> torch.Tensor:
    """A list / tuple / range / ndarray index as a tensor (bools stay bools)."""
    if _np is not None and isinstance(item, _np.ndarray):
        t = torch.from_numpy(item)
    else:
        t = torch.as_tensor(item)
    if t.numel() == 0 and not (t.dtype is torch.bool or t.dtype in _INDEX_DTYPES):
        # torch.as_tensor([]) is float32; torch indexes with it as no positions.
        t = t.to(torch.int64)
    return t


def _index_tensor_error(t: torch.Tensor) -> IndexError:
    return IndexError(
        f"tensors used as indices must be long, int, byte or bool tensors (got {t.dtype})"
    )


def convert_index(index, batch_size) -> ConvertedIndex:
    """Convert ``index`` (anything ``TensorDict.__getitem__`` takes over batch
    dims) into native terms for a dict of batch shape ``batch_size``.

    Raises IndexError or ValueError as torch would for what it can see
    without the server; leaves bounds to the server.
    """
    keep: list = []
    # Fast paths: td[int] and td[tensor] are the hot sampling calls.
    if type(index) is int and batch_size:
        return ConvertedIndex([("int", index)], keep, None)
    if (
        isinstance(index, torch.Tensor)
        and index.dim() == 1
        and index.dtype in _INDEX_DTYPES[:-1]
        and batch_size
    ):
        return ConvertedIndex([_positions_term(index, keep)], keep, None)
    items = index if isinstance(index, tuple) else (index,)

    ndim = len(batch_size)
    terms = []
    has_none = False
    has_advanced = False
    ellipsis_at = None
    # Dims each item consumes, to check masks against the dims they cover and
    # to count "too many indices" the way torch does.
    consumed = []
    converted = []
    for item in items:
        if item is None:
            has_none = True
            converted.append(("none",))
            consumed.append(0)
            continue
        if item is Ellipsis:
            if ellipsis_at is not None:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = len(converted)
            converted.append(("ellipsis",))
            consumed.append(0)
            continue
        if isinstance(item, bool) or (_np is not None and isinstance(item, _np.bool_)):
            raise IndexError(
                "a bool scalar index (td[True]) is not supported by TensorDictStore; "
                "use td.to_local()[...] for it"
            )
        if isinstance(item, numbers.Integral):
            converted.append(("int", int(item)))
            consumed.append(1)
            continue
        if isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step
            step = 1 if step is None else int(step)
            # The rule is C++'s plan::CheckSliceStep (common/index.h), which
            # the native call applies too. Checked here as well so that the
            # error is torch's own for t[::0] (a plain ValueError with this
            # message) and comes from convert_index itself, before any native
            # call, as tests/python/test_index.py expects.
            if step <= 0:
                raise ValueError("step must be greater than zero")
            converted.append((
                "slice",
                None if start is None else int(start),
                None if stop is None else int(stop),
                step,
            ))
            consumed.append(1)
            continue
        if isinstance(item, torch.Tensor):
            t = item
        elif isinstance(item, (list, tuple, range)) or (
            _np is not None and isinstance(item, _np.ndarray)
        ):
            t = _as_index_tensor(item)
        else:
            raise IndexError(
                f"TensorDictStore cannot index with {type(item).__name__}: use ints, "
                "slices, lists, int or bool tensors, Ellipsis, or tuples of them"
            )
        has_advanced = True
        if t.dtype is torch.bool or t.dtype is torch.uint8:
            if t.dim() == 0:
                raise IndexError(
                    "a 0-d bool tensor index is not supported by TensorDictStore; "
                    "use td.to_local()[...] for it"
                )
            converted.append(("mask", t))
            consumed.append(t.dim())
        elif t.dtype in _INDEX_DTYPES:
            converted.append(("positions", t))
            consumed.append(1)
        else:
            raise _index_tensor_error(t)

    total = sum(consumed)
    if total > ndim:
        raise IndexError(
            f"too many indices for TensorDictStore with batch size {tuple(batch_size)}: "
            f"{total} dims indexed, {ndim} batch dims"
        )

    # The batch dim each item starts at: counted from the front before the
    # ellipsis, from the back after it (as torch does).
    dim = 0
    after = ellipsis_at is not None
    tail = sum(consumed[ellipsis_at + 1:]) if after else 0
    for i, item in enumerate(converted):
        kind = item[0]
        if kind == "ellipsis":
            dim = ndim - tail
            terms.append(("ellipsis",))
            continue
        if kind == "none":
            continue
        if kind == "mask":
            t = item[1]
            want = tuple(batch_size[dim:dim + t.dim()])
            if tuple(t.shape) != want:
                raise IndexError(
                    f"The shape of the mask {list(t.shape)} at index {dim} does not match "
                    f"the shape of the indexed TensorDictStore {list(batch_size)} at index {dim}"
                )
            if t.dim() == 1:
                terms.append(_mask_term(t, keep))
            else:
                # An N-D mask over several batch dims is the same index as the
                # tuple of its nonzero positions, one 1-D tensor per dim.
                for positions in t.nonzero(as_tuple=True):
                    terms.append(_positions_term(positions, keep))
        elif kind == "positions":
            terms.append(_positions_term(item[1], keep))
        else:
            terms.append(item)
        dim += consumed[i]

    post = None
    if has_none:
        if has_advanced:
            raise IndexError(
                "None (newaxis) together with list/tensor indices is not supported by "
                "TensorDictStore: index without None and unsqueeze the result, or use "
                "td.to_local()[...]"
            )
        # The server indexes without the Nones; the new dims are then added
        # locally: ints are gone from the result, slices and the ellipsis keep
        # their dims, so `:` stands for them.
        post = tuple(
            None if item[0] == "none" else Ellipsis if item[0] == "ellipsis" else slice(None)
            for item in converted
            if item[0] != "int"
        )
    return ConvertedIndex(terms, keep, post)
