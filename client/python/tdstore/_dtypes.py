"""The package's one dtype table: the dtypes tdstore stores, named as the
native module names them (common/dtype.cc, torch's names without "torch."),
and torch's dtype of each name; and the memory form a tensor of one of them
crosses to the native module in.

A name this torch has no dtype of is left out: such leaves cannot be read
into tensors here (reading one is a KeyError naming the dtype).
"""

from __future__ import annotations

import torch

from . import _native

DTYPES: dict = {name: getattr(torch, name) for name in _native.dtype_names()
                if isinstance(getattr(torch, name, None), torch.dtype)}
DTYPE_NAMES: dict = {dtype: name for name, dtype in DTYPES.items()}


def cpu_contiguous(where: str, t: torch.Tensor) -> torch.Tensor:
    """``t`` as plain contiguous CPU memory the native module can read in
    place; TypeError (naming ``where``) for what cannot be stored."""
    if t.layout is not torch.strided:
        raise TypeError(f"{where}: TensorDictStore stores dense tensors only, "
                        f"not {t.layout}; call .to_dense() first")
    if t.dtype not in DTYPE_NAMES:
        raise TypeError(
            f"{where}: dtype {t.dtype} cannot be stored; supported: "
            f"{', '.join(str(d) for d in DTYPE_NAMES)}"
        )
    if t.requires_grad:
        t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    # Conjugate / negative bits are lazy flags: the memory holds the
    # un-conjugated values, so they must be applied before sending the bytes.
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if not t.is_contiguous():
        t = t.contiguous()
    return t


def element_bytes(value: torch.Tensor, dtype_name: str) -> bytes:
    """One element of ``value`` cast to the dtype (as fill_ casts), as bytes."""
    element = value.reshape(1).to(DTYPES[dtype_name])
    return element.view(torch.uint8).numpy().tobytes()
