"""Writes of a TensorDictStore (``StoreWrites``, a base of the store class):
whole leaves, rows selected by an index, ring appends, fills and updates.

Each public write becomes as few native calls as it can: one write for any
number of leaves (all visible together), values cast to the leaves' dtypes
and non-tensors made rows of their leaves from the client core's schema copy
(``describe()``, no round trip while it is watched). The store class brings
the state these methods use: ``_dict`` (the native Dict), ``_prefix``,
``_batch_size``, ``_describe_full()``.
"""

from __future__ import annotations

import torch
from torch.utils.dlpack import from_dlpack as _from_dlpack
from tensordict import TensorDict
from tensordict._td import _unravel_key_to_tuple
from tensordict.base import is_tensor_collection
from tensordict.utils import NestedKey

from . import _native, _ragged, _values
from ._dtypes import DTYPE_NAMES, DTYPES, element_bytes
from ._errors import InvalidArgumentError
from ._index import convert_index
from ._values import RAGGED, Values

from ._leaves import _flatten, _leading_rows, _leaf_from, _native_leaves, _path_str

_TO_LOCAL = "Call `to_local()` (or `to_tensordict()`) first and use the local TensorDict."


class StoreWrites:
    """The write methods of :class:`tdstore.TensorDictStore`."""

    def _in_place(self, path, value, leaf):
        """``value`` as a whole write into the existing ``leaf`` (a
        _describe_full entry) in place: cast and broadcast to a tensor leaf;
        cut into cells over the batch dims and cast to a ragged leaf's cell
        dtype; a non-tensor as it is."""
        dtype, shape, kind, spec = leaf
        if kind == RAGGED:
            spec = spec.decode()
            if isinstance(value, Values):
                return _ragged.from_tensors(_path_str(path), value.values, value.cells,
                                            DTYPES[spec]) if value.kind == RAGGED else value
            cells = self._batch_size
            n = len(cells)
            value = value.expand(tuple(cells) + tuple(value.shape[n:]))
            flat = value.reshape((cells.numel(),) + tuple(value.shape[n:]))
            return _ragged.from_tensors(_path_str(path), list(flat.unbind(0)), cells,
                                        DTYPES[spec])
        if isinstance(value, Values):
            return value
        return value.to(DTYPES[dtype]).expand(shape)

    # -- writes --

    def _write(self, items, terms=None, refuse_if_locked=False, ring=None, count=None,
               behind=False, batch_size=None):
        """One write of ``items``: whole leaves, or the rows ``terms`` select,
        or with ``ring`` ((cursor, rows, count)) a ring append, whose
        (start, count value) it returns; with ``count`` ((counter, add)) the
        rows ``terms`` select, counted in that dict counter, whose value
        afterwards it returns, or with ``behind`` None if the write returned
        before tdstored applied it (native write_counted_behind). Whole
        leaves take ``batch_size`` if given (the one the caller checked
        them against), else the dict's."""
        rows = terms is not None or ring is not None
        if not rows and batch_size is None:
            batch_size = self._batch_size
        leaves, keep = _native_leaves(items, None if rows else batch_size)
        result = None
        if ring is not None:
            result = self._dict.append_ring(leaves, *ring)
        elif count is not None and behind:
            result = self._dict.write_counted_behind(leaves, terms, *count)
        elif count is not None:
            result = self._dict.write_counted(leaves, terms, *count)
        else:
            self._dict.write(leaves, terms, refuse_if_locked=refuse_if_locked)
        del keep
        return result

    def _check_batch_dims(self, items):
        """Every leaf starts with the batch dims. A NonTensorData (one value)
        stands for every cell, as tensordict lets it: it takes the batch size.
        Returns the batch size checked against (one schema lookup a write)."""
        batch_size = self._batch_size
        bs = tuple(batch_size)
        n = len(bs)
        for i, (path, t) in enumerate(items):
            if isinstance(t, Values):
                if t.one:
                    items[i] = (path, t.at_cells(bs))
                    continue
                if tuple(t.cells) != bs:
                    raise RuntimeError(
                        f"batch dimension mismatch, got self.batch_size={batch_size} and "
                        f"a non-tensor stack of batch size {t.cells} (at {_path_str(path)!r}).")
                continue
            if tuple(t.shape[:n]) != bs:
                raise RuntimeError(
                    f"batch dimension mismatch, got self.batch_size={batch_size} and "
                    f"value.shape={t.shape} (at {_path_str(path)!r})."
                )
        return batch_size

    def _set_path(self, rel, value, inplace, ignore_lock=False):
        """set / set_ / td[key] = value. inplace False: replace (one write);
        True: the entries must exist, values are cast and broadcast to them
        (describe + one write); anything else (tensordict's BEST_ATTEMPT_INPLACE):
        in place where they exist."""
        path = self._prefix + rel
        items = _flatten(value, path, [])
        batch_size = self._check_batch_dims(items)
        if inplace is False:
            # A locked dict refuses this write in tdstored, whatever it writes
            # (tensordict's rule); new and reshaped leaves always.
            self._write(items, refuse_if_locked=not ignore_lock, batch_size=batch_size)
            return self
        existing = self._describe_full()
        out = []
        for p, t in items:
            if p in existing:
                t = self._in_place(p, t, existing[p])
            elif isinstance(t, Values) and inplace is not True:
                pass  # a new non-tensor is written whole: nothing to cast
            elif inplace is True:
                raise KeyError(f'key "{_path_str(p)}" not found in {type(self).__name__} '
                               f'{self.name!r} (set_ writes existing entries only)')
            out.append((p, t))  # a new key: a locked dict refuses it in tdstored
        self._write(out)
        return self

    def _set_str(self, key, value, *, inplace, validated, ignore_lock=False,
                 non_blocking=False):
        return self._set_path((key,), value, inplace, ignore_lock)

    def _set_tuple(self, key, value, *, inplace, validated, non_blocking=False):
        return self._set_path(tuple(key), value, inplace)

    def __setitem__(self, index, value) -> None:
        """``td[key] = v`` (one write) or ``td[idx] = td_or_dict`` (one indexed
        write; values broadcast server-side and are cast to each leaf's dtype)."""
        if isinstance(index, str):
            self._set_path((index,), value, False)
            return
        if isinstance(index, tuple) and index and isinstance(index[0], (str, tuple)):
            key = _unravel_key_to_tuple(index)
            if key:
                self._set_path(key, value, False)
                return
        conv = convert_index(index, self._batch_size)
        if conv.post is not None:
            raise IndexError("None (newaxis) in an indexed write is not supported by "
                             "TensorDictStore: index without it")
        if isinstance(value, torch.Tensor) or not (isinstance(value, dict)
                                                   or is_tensor_collection(value)):
            # td[idx] = 0 / tensor: every leaf gets it (tensordict's semantics).
            self._fill_at(conv.terms, value, ())
            return
        # A new key would be created zero-filled first: a locked dict refuses
        # that in tdstored.
        self._indexed_write(_flatten(value, self._prefix, []), conv.terms, index=index)

    def append_ring(self, rows, *, cursor: str, count: str | None = None) -> tuple[int, int]:
        """Appends ``rows`` (a TensorDict or dict whose batch size is ``[n]``,
        n >= 1) to this dict as to a ring buffer along batch dim 0, in one
        call: tdstored reserves n rows from the dict counter ``cursor`` (its
        value ``start`` before), writes the rows at positions ``(start + i) %
        batch_size[0]``, as ``td[positions] = rows`` would (missing keys are
        created zero-filled, values are cast to the leaves' dtypes), and then
        adds n to the counter ``count`` (if given), which so counts rows once
        they are written (with several writers at once, a total: a slower
        writer's earlier rows may still be in flight). Any number of
        processes, on any machines, can append to one ring: no two get the
        same rows of one turn.

        Returns ``(start, count value afterwards)`` (0 without ``count``).
        Refused rows (a bad shape, a key holding another kind of data) raise
        as ``td[idx] = rows`` does; nothing is written, and the reservation is
        given back unless another writer reserved after it."""
        items = _flatten(rows, self._prefix, [])
        if not items:
            raise ValueError("append_ring needs at least one key to write")
        n = _leading_rows(rows, items)
        return self._indexed_write(items, None, index=slice(0, n), ring=(cursor, n, count or ""))

    def _value_rows(self, items, existing):
        """Non-tensor values of an indexed write as rows of their leaves: one
        describe, for each leaf's kind and slot size. A leaf that cannot take
        them as they are is first rewritten whole (one more write): one value
        becoming a value per row (NonTensorData turning NonTensorStack, as in
        tensordict), text or bytes meeting other values (the leaf becomes
        JSON), or a value longer than the slots (they double until it fits).
        A row another process writes into that leaf during the rewrite can be
        lost (docs/python.md, "Non-tensor data"). ``existing``: the schema
        (_describe_full)."""
        out = []
        for p, v in items:
            if p not in existing:
                out.append((p, v.as_rows(v.kind, _values.slot_for(v.encoded()))))
                continue
            dtype, shape, kind, one_value = existing[p]
            if kind == "tensor":
                raise TypeError(f"{_path_str(p)} holds a tensor: non-tensor values cannot be "
                                "written into its rows")
            want = _values.widest_kind(kind, v.kind)
            spec = one_value.decode() if kind == RAGGED else ""
            if kind == RAGGED and v.spec != spec:
                v = _ragged.from_tensors(_path_str(p), v.values, v.cells, DTYPES[spec])
            slot = shape[-1]
            if not slot and want == kind:
                one = _values.decode_value(kind, one_value)
                if all(x == one and type(x) is type(one) for x in v.values):
                    continue  # rows of the one value: tensordict keeps it one value too
            if slot and want == kind and v.fits(kind, slot):
                out.append((p, v.as_rows(kind, slot)))
                continue
            # Rewrite the leaf whole: its values, re-encoded, in wider slots.
            if slot:
                _, read = self._dict.read([p], None, p, dlpack=True)
                old = _values.decode_rows(kind, _from_dlpack(read[0][3]), spec)
            else:
                old = [_values.decode_value(kind, one_value)] * torch.Size(shape[:-1]).numel()
            cells = torch.Size(shape[:-1])
            old_values = Values(want, False, old, cells, spec=spec)
            longest = max((len(b) for b in old_values.encoded() + v.encoded(want)
                           if b is not None), default=0)
            new_slot = max(slot, _native.value_slot_bytes(longest))
            self._write([(p, old_values.as_rows(want, new_slot))])
            out.append((p, v.as_rows(want, new_slot)))
        return out

    def _set_counted(self, index, rows, counter: str, add: int, behind: bool = False):
        """``td[index] = rows`` (a TensorDict or dict) and then ``add`` added
        to the dict counter ``counter``, in one call (the counter never
        counts rows not yet written); returns the counter's value after.
        For writers that keep a length, as torchrl's storages do. With
        ``behind``, a write the client core can check against the schema
        returns before tdstored applies it, and this returns None: the
        client's next call waits for it and raises its failure
        (docs/python.md, *Writes behind*)."""
        conv = convert_index(index, self._batch_size)
        if conv.post is not None:
            raise IndexError("None (newaxis) in an indexed write is not supported by "
                             "TensorDictStore: index without it")
        return self._indexed_write(_flatten(rows, self._prefix, []), conv.terms, index=index,
                                   count=(counter, add), behind=behind)

    def _indexed_write(self, items, terms, index=None, ring=None, count=None, behind=False):
        """One indexed write of ``items`` ((full path, tensor or Values)),
        prepared from the schema (_prepared: no round trip while the schema
        copy is watched). If tdstored refuses it, the schema copy is brought up
        to what tdstored saw (the refusal's reply names the version: causal
        reads), and if a leaf the write names changed dtype or kind meanwhile
        (another process replaced it), the write is prepared again and sent
        once more; otherwise tdstored's error stands."""
        schema = self._describe_full()
        try:
            return self._write(self._prepared(items, schema, index), terms, ring=ring,
                               count=count, behind=behind)
        except InvalidArgumentError:
            fresh = self._describe_full()

            def what(leaves, p):
                leaf = leaves.get(p)
                return None if leaf is None else (leaf[0], leaf[2])

            if all(what(fresh, p) == what(schema, p) for p, _ in items):
                raise
            return self._write(self._prepared(items, fresh, index), terms, ring=ring,
                               count=count)

    def _prepared(self, items, schema, index):
        """``items`` as the leaves they are written into are: a tensor aimed at
        a ragged leaf cut into one cell per row ``index`` selects (and cast to
        its cell dtype), non-tensor values made rows of their leaves
        (_value_rows), other tensors cast to their leaves' dtypes, as torch
        casts in ``t[idx] = x``. A new leaf takes the value's dtype."""
        if index is not None:
            items = self._ragged_items(items, index, schema)
        tensors = []
        for p, t in items:
            if isinstance(t, Values):
                continue
            leaf = schema.get(p)
            if leaf is not None and leaf[2] == "tensor" and DTYPE_NAMES.get(t.dtype) != leaf[0]:
                t = t.to(DTYPES[leaf[0]])
            tensors.append((p, t))
        values = [(p, t) for p, t in items if isinstance(t, Values)]
        return tensors + (self._value_rows(values, schema) if values else [])

    def _ragged_items(self, items, index, schema):
        """``items`` with each tensor aimed at a ragged leaf (per ``schema``)
        turned into that leaf's cells, one per row ``index`` selects."""
        ragged = {p for p, leaf in schema.items() if leaf[2] == RAGGED}
        if not any(p in ragged and isinstance(t, torch.Tensor) for p, t in items):
            return items
        # The shape of the selected cells, as torch indexes the batch dims
        # (the index's tensors on the CPU, where this stand-in lives).
        def on_cpu(i):
            return i.cpu() if isinstance(i, torch.Tensor) else i
        cpu_index = tuple(map(on_cpu, index)) if isinstance(index, tuple) else on_cpu(index)
        cells = torch.zeros(tuple(self._batch_size), dtype=torch.bool)[cpu_index].shape
        out = []
        for p, t in items:
            if p in ragged and isinstance(t, torch.Tensor):
                n = len(cells)
                t = t.expand(tuple(cells) + tuple(t.shape[n:])) if t.shape[:n] != cells else t
                flat = t.reshape((cells.numel(),) + tuple(t.shape[n:]))
                t = _ragged.from_tensors(_path_str(p), list(flat.unbind(0)), cells)
            out.append((p, t))
        return out

    def _set_at_path(self, rel, value, idx):
        """set_at_: one describe (the entries must exist; their dtypes) + one
        indexed write."""
        return self._write_existing_at(_flatten(value, self._prefix + rel, []), idx)

    def _write_existing_at(self, items, idx):
        """td[idx] = value for leaves that must exist already (KeyError naming
        the first that does not): one describe, for their dtypes, and one
        indexed write."""
        existing = self._describe_leaves()
        for p, _ in items:
            if p not in existing:
                raise KeyError(f'key "{_path_str(p)}" not found in {type(self).__name__} '
                               f'{self.name!r}')
        conv = convert_index(idx, self._batch_size)
        self._indexed_write(items, conv.terms, index=idx)
        return self

    def _set_at_str(self, key, value, idx, *, validated, non_blocking=False):
        return self._set_at_path((key,), value, idx)

    def _set_at_tuple(self, key, value, idx, *, validated, non_blocking=False):
        return self._set_at_path(tuple(key), value, idx)

    def update(self, input_dict_or_td=None, clone: bool = False, inplace: bool = False, *,
               non_blocking: bool = False, keys_to_update=None, is_leaf=None,
               update_batch_size: bool = False, ignore_lock: bool = False, **kwargs):
        """All of the input's leaves in ONE write (they become visible together).
        With inplace=True, existing leaves keep their dtype (describe first)."""
        if kwargs:
            input_dict_or_td = {**(input_dict_or_td or {}), **kwargs}
        if input_dict_or_td is None or input_dict_or_td is self:
            return self
        if update_batch_size:
            raise RuntimeError(f"update(update_batch_size=True): the batch size of a "
                               f"TensorDictStore is fixed. {_TO_LOCAL}")
        items = _flatten(input_dict_or_td, self._prefix, [])
        if keys_to_update is not None:
            wanted = [self._prefix + _unravel_key_to_tuple(k) for k in keys_to_update]
            items = [(p, t) for p, t in items
                     if any(p[:len(w)] == w for w in wanted)]
        if not items:
            return self
        self._check_batch_dims(items)
        if inplace:
            # In place where the keys exist; a new key is refused by a locked
            # dict in tdstored.
            existing = self._describe_leaves()
            items = [(p, t.to(DTYPES[existing[p][0]]).expand(existing[p][1]))
                     if p in existing and not isinstance(t, Values) else (p, t)
                     for p, t in items]
            self._write(items)
        else:
            self._write(items, refuse_if_locked=not ignore_lock)
        return self

    def _items_to_update(self, input_dict_or_td, keys_to_update):
        """The (path, tensor) leaves of an update_/update_at_ input, only those
        under ``keys_to_update`` when it is given."""
        items = _flatten(input_dict_or_td, self._prefix, [])
        if keys_to_update is not None:
            wanted = [self._prefix + _unravel_key_to_tuple(k) for k in keys_to_update]
            items = [(p, t) for p, t in items if any(p[:len(w)] == w for w in wanted)]
        return items

    def update_(self, input_dict_or_td, clone: bool = False, *, non_blocking: bool = False,
                keys_to_update=None):
        """In place: every entry must exist (KeyError), values are cast and
        broadcast to it; describe + ONE write."""
        items = self._items_to_update(input_dict_or_td, keys_to_update)
        if not items:
            return self
        self._check_batch_dims(items)
        existing = self._describe_full()
        out = []
        for p, t in items:
            if p not in existing:
                raise KeyError(f'key "{_path_str(p)}" not found in {type(self).__name__} '
                               f'{self.name!r}')
            out.append((p, self._in_place(p, t, existing[p])))
        self._write(out)
        return self

    def update_at_(self, input_dict_or_td, idx, clone: bool = False, *,
                   non_blocking: bool = False, keys_to_update=None):
        """td[idx] = input for existing entries only (KeyError otherwise):
        describe + ONE indexed write."""
        items = self._items_to_update(input_dict_or_td, keys_to_update)
        if not items:
            return self
        return self._write_existing_at(items, idx)

    def _fill_at(self, terms, value, rel):
        """Every leaf under ``rel`` set to ``value`` at ``terms`` (``[ellipsis]``:
        whole leaves): describe + one fill that tdstored does itself, no leaf
        bytes sent. A tensor value of more than one element is an indexed
        write that tdstored broadcasts."""
        path = self._prefix + rel
        n = len(path)
        existing = self._describe_full()
        under = {p: leaf for p, leaf in existing.items() if p[:n] == path}
        if not under:
            raise KeyError(f'key "{_path_str(rel)}" not found in {type(self).__name__} '
                           f'{self.name!r}')
        # Non-tensors are left alone, as tensordict's fills leave them; a
        # ragged leaf's cells are tensors, filled as a lazy stack fills them.
        targets = {p: (d, shape) for p, (d, shape, kind, _) in under.items() if kind == "tensor"}
        ragged = [p for p, (_, _, kind, _) in under.items() if kind == RAGGED]
        if ragged:
            self._fill_ragged(ragged, terms, value)
        if not targets:
            if path in under and not ragged:
                raise TypeError(f"{_path_str(rel)} holds non-tensor values: it cannot be filled "
                                "with a number")
            return
        if isinstance(value, int) and not -2**63 <= value < 2**63:
            # Past int64 (a uint64 fill): torch makes such a number only at
            # the target dtype, and refuses it for any dtype it overflows.
            fills = [(p, d, torch.tensor([value], dtype=DTYPES[d]).view(torch.uint8)
                      .numpy().tobytes()) for p, (d, _) in targets.items()]
            self._dict.fill(fills, None if terms == [("ellipsis",)] else terms)
            return
        value = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        if value.dim() > 0:
            self._write([(p, value.to(DTYPES[d])) for p, (d, _) in targets.items()], terms)
            return
        fills = [(p, d, element_bytes(value, d)) for p, (d, _) in targets.items()]
        whole = terms == [("ellipsis",)]
        self._dict.fill(fills, None if whole else terms)

    def _fill_ragged(self, paths, terms, value):
        """Ragged leaves filled as tensordict fills a lazy stack's tensors:
        every element of every cell (of the rows ``terms`` selects) set to
        ``value``. Their cells share no shape tdstored could fill, so each
        leaf is read (those rows) and written back: one read and one indexed
        write a leaf."""
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise RuntimeError("fill_ of a ragged leaf (a lazy stack's tensors) takes a "
                                   f"number or a 1-element tensor, got shape {list(value.shape)}")
            value = value.item()
        for p in paths:
            _, leaves = self._dict.read([p], terms, p, dlpack=True)
            cells = _leaf_from(*leaves[0][1:])
            filled = [torch.empty_like(t).fill_(value) for t in cells.tensors]
            self._indexed_write([(p, _ragged.from_tensors(_path_str(p), filled, cells.cells))],
                                terms)

    def fill_(self, key: NestedKey, value):
        """Every element of leaf (or sub-dict) ``key`` set to ``value``."""
        self._fill_at([("ellipsis",)], value, _unravel_key_to_tuple(key))
        return self

    def zero_(self):
        """Every leaf set to zero (one describe + one write)."""
        if self._leaf_paths_exist():
            self._fill_at([("ellipsis",)], 0, ())
        return self

    def _leaf_paths_exist(self) -> bool:
        return bool(self._leaf_paths())

    def masked_fill_(self, mask, value):
        """Every leaf set to ``value`` where the batch ``mask`` is True (one
        describe + one indexed write)."""
        conv = convert_index(mask, self._batch_size)
        self._fill_at(conv.terms, value, ())
        return self

    def masked_fill(self, mask, value) -> TensorDict:
        return self.to_local().masked_fill(mask, value)

    def masked_select(self, mask) -> TensorDict:
        return self[mask]

    def where(self, condition, other, *, out=None, pad=None, update_batch_size=False):
        return self.to_local().where(condition, other, out=out, pad=pad,
                                     update_batch_size=update_batch_size)
