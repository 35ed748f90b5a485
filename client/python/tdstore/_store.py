"""``tdstore.TensorDictStore``: a tensordict ``TensorDictBase`` whose leaves live in tdstored.

A drop-in for ``tensordict.store.TensorDictStore``: swap the import and pass
``addr=`` instead of ``host=``/``port=``. Every method maps onto as few native
calls as it can (one per method for the common ones, written next to each),
and data crosses as raw memory:

* writes hand the native module ``data_ptr()``/``nbytes`` of contiguous CPU
  tensors, kept referenced until the call returns;
* reads get one writable buffer per leaf from the native module, viewed with
  ``torch.frombuffer`` (no copy), then moved to ``device`` when one is set.

Whole leaves and sub-dicts are addressed by paths (tuples of str). A
*view* (``td["nested"]``) is a TensorDictStore on the same native dict with a
path prefix: reads and writes through it land in the same store.

The store keeps no schema cache that could make a result wrong: a cached
dtype per leaf only decides how an indexed write's values are cast, and
tdstored rejects a cast to a stale dtype (the dtype must equal the leaf's),
after which the cache is refreshed and the write retried once.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import uuid
import warnings
from typing import Callable

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, is_tensorclass
from tensordict._td import _TensorDictKeysView, _unravel_key_to_tuple
from tensordict.base import (
    _default_is_leaf,
    _register_tensor_class,
    is_tensor_collection,
    NO_DEFAULT,
    TensorDictBase,
)
from tensordict.utils import (
    _as_context_manager,
    _LOCK_ERROR,
    NestedKey,
)

from . import _fork, _native
from ._attrs import StoreAttrs
from ._append import Appender
from ._client import Client
from ._connect import client_for, handle_options
from ._errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
)
from ._dtypes import DTYPE_NAMES, DTYPES
from ._index import convert_index
from ._leaves import (_flatten, _key_of, _leaf_from, _native_leaves, _nest, _node_paths,
                      _path_str, _selects_all, _to_tensordict, _unwrap)
from . import _ragged
from ._values import RAGGED, Values
from ._writes import StoreWrites

# The one dtype table (_dtypes.py), under the names this module has used.
_DTYPE_NAMES = DTYPE_NAMES
_DTYPES = DTYPES

_TO_LOCAL = "Call `to_local()` (or `to_tensordict()`) first and use the local TensorDict."

_HANDLE_PREFIX = "tdstore1|"

# The dict attribute that names the tensorclass a dict was made from
# ("module:qualname"), so from_store can give an instance of it back.
TENSORCLASS_ATTR = "tdstore.tensorclass"


def _class_path(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _find_class(path: str, allow_import: bool):
    """The object ``path`` names: ``"module:qualname"`` (as stored) or
    ``"module.Class"`` (the seed's spelling: the longest module prefix that
    resolves). Looks only in modules already imported unless
    ``allow_import``. Raises ImportError/AttributeError."""
    import sys

    if ":" in path:
        candidates = [tuple(path.split(":", 1))]
    else:
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    last = None
    for module_name, qualname in candidates:
        module = sys.modules.get(module_name)
        if module is None and allow_import:
            try:
                module = importlib.import_module(module_name)
            except ImportError as err:
                last = err
                continue
        if module is None:
            continue
        obj = module
        try:
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except AttributeError as err:
            last = err
            continue
        return obj
    raise last or ImportError(f"module of {path!r} is not imported")


def _tensorclass_for(store, tensorclass_cls):
    """What from_store wraps ``store`` in: ``tensorclass_cls`` if a class; the
    class a string names (imported: the caller asked for it); for None, the
    class the dict was made from, only if its module is already imported
    (data in a store never makes this process import code), else None with a
    warning; for False, None."""
    if tensorclass_cls is False:
        return None
    if tensorclass_cls is None:
        path = store.attrs.get(TENSORCLASS_ATTR)
        if not path:
            return None
        try:
            cls = _find_class(path, allow_import=False)
        except (ImportError, AttributeError):
            warnings.warn(f"the dict was made from tensorclass {path}, whose module is not "
                          f"imported; returning the TensorDictStore (import it, or pass "
                          f"tensorclass_cls={path!r} to import it)", stacklevel=3)
            return None
        if not (isinstance(cls, type) and is_tensorclass(cls)):
            warnings.warn(f"the dict names {path} as its tensorclass, which is not a "
                          "tensorclass; returning the TensorDictStore", stacklevel=3)
            return None
        return cls
    elif isinstance(tensorclass_cls, str):
        try:
            cls = _find_class(tensorclass_cls, allow_import=True)
        except (ImportError, AttributeError) as err:
            raise ImportError(f"tensorclass_cls={tensorclass_cls!r} cannot be imported: "
                              f"{err}") from None
    else:
        cls = tensorclass_cls
    if not (isinstance(cls, type) and is_tensorclass(cls)):
        raise TypeError(f"tensorclass_cls: {cls!r} is not a tensorclass")
    return cls


def _as_size(batch_size) -> torch.Size:
    if batch_size is None:
        return torch.Size(())
    if isinstance(batch_size, int):
        return torch.Size((batch_size,))
    return torch.Size(batch_size)


def _fresh_name() -> str:
    return f"td-{uuid.uuid4().hex}"


class _Closed:
    """Stands in for the native dict after close(): any use says so."""

    def __getattr__(self, name):
        raise RuntimeError("this TensorDictStore was closed; open it again with "
                           "TensorDictStore.from_store(handle)")


# ---- keys view ----------------------------------------------------------------

class _StoreKeysView(_TensorDictKeysView):
    """``TensorDictStore.keys()``: one native call per iteration (or per ``in``).

    Order: sorted by path (tdstored's ListKeys order), so a nested key follows
    its sub-dict: ``next``, ``("next", "done")``, ``("next", "obs")``, ``obs``.
    """

    def _paths(self, leaves=None):
        """The listed paths, sorted; derived from ``leaves`` (every leaf path
        under the view) when the caller has them, else one native call."""
        td = self.tensordict
        is_leaf = self.is_leaf
        if is_leaf is _default_is_leaf:
            # A tensor is a leaf, a sub-dict is not (no call needed to know).
            tensor_leaf, node_leaf = True, False
        else:
            tensor_leaf = is_leaf(torch.Tensor)
            node_leaf = is_leaf(TensorDictStore)
        if leaves is None and not td._prefix and tensor_leaf and not node_leaf:
            # The common case: tdstored (or the watched schema copy) answers
            # exactly this question.
            return td._dict.keys(self.include_nested, self.leaves_only)
        if leaves is None:
            leaves = td._leaf_paths()
        nodes = _node_paths(leaves)
        if self.include_nested:
            paths = list(leaves) + list(nodes)
        else:
            paths = {p[:1] for p in leaves}
        if self.leaves_only:
            leaf_set = set(leaves)
            paths = [p for p in paths
                     if (tensor_leaf if p in leaf_set else node_leaf)]
        return sorted(paths)

    _handoff = None

    def __iter__(self):
        td = self.tensordict
        if (not self.include_nested and not td._prefix
                and self.is_leaf is _default_is_leaf):
            # The common case, list(td.keys()): tdstored's (or the watched
            # schema copy's) listing as str, already sorted by name.
            keys = td._dict.key_names(self.leaves_only)
        else:
            paths = self._paths()
            if self.sort:
                paths = sorted(paths, key=".".join)
            keys = [p[0] if len(p) == 1 else p for p in paths]  # _key_of, inlined
        it = iter(keys)
        self._handoff = (it, len(keys))
        return it

    def __len__(self):
        # list(td.keys()) calls iter() and then len() for a size hint: while
        # the iterator just handed out is untouched, its listing answers, so
        # the pair costs one call. Any other len() lists again (views are live).
        handoff, self._handoff = self._handoff, None
        if handoff is not None and handoff[0].__length_hint__() == handoff[1]:
            return handoff[1]
        return len(self._paths())

    def __contains__(self, key):
        key = _unravel_key_to_tuple(key)
        if not key:
            raise TypeError("keys of a TensorDictStore are str or tuples of str")
        if len(key) > 1 and not self.include_nested:
            # As tensordict: a nested key is in keys() only with include_nested.
            return False
        td = self.tensordict
        if self.leaves_only:
            return key in set(td._leaf_paths())
        return td._dict.contains(td._prefix + key)

    def __repr__(self):
        return (f"{type(self).__name__}({list(self)}, include_nested="
                f"{self.include_nested}, leaves_only={self.leaves_only})")


# ---- the store ----------------------------------------------------------------

class TensorDictStore(StoreWrites, TensorDictBase):
    """A TensorDict whose leaves live in tdstored (and Redis behind it).

    ``TensorDictStore(batch_size=..., addr=None, name=None, device=None,
    client=None, **options)`` creates a dict in the store (ALREADY_EXISTS if
    ``name`` is taken; a fresh unique name by default). ``addr`` defaults to
    ``$TDSTORE_ADDR``, then ``127.0.0.1:50051``; ``client`` reuses a
    :class:`tdstore.Client`'s connection; ``options`` are the Client's
    (token, tls..., timeout, retry_for). ``rows_per_block``/``part_bytes``
    set the storage blocks (0: tdstored's defaults). ``layout="record"``
    keeps each row's leaves together, one range per row, for sample-heavy
    dicts such as replay buffers: the record holds the leaves of its first
    indexed write (or :meth:`from_schema`), written by rows (``td[:] =
    ...``), not whole; a key written later keeps rows of its own beside it
    (docs/python.md, *Record dicts*).

    ``device``: where read tensors land (``None``: CPU). Writes accept
    tensors on any device.

    Open an existing dict with :meth:`from_store`; fill one from local data
    with :meth:`from_dict` / :meth:`from_tensordict`. ``td.handle`` is a
    string any process can open; pickling carries it.
    """

    _td_dim_names = None
    _is_shared = False
    _is_memmap = False
    _native_attrs = ("_dict",)  # replaced in a forked child (see _fork)

    def __init__(self, *, batch_size=None, addr: str | None = None, name: str | None = None,
                 device=None, client: Client | None = None, rows_per_block: int = 0,
                 part_bytes: int = 0, layout: str = "leaves", td_id: str | None = None,
                 **options):
        # td_id= is the seed's name for an existing dict's identity: the
        # constructor reopens it (the batch size must agree, if given) or
        # creates it under that name.
        if td_id is not None and name is not None and td_id != name:
            raise TypeError(f"name={name!r} and td_id={td_id!r} name two dicts: pass one")
        client = self._client_for(addr, client, options)
        name = name or td_id
        batch = None if batch_size is None else _as_size(batch_size)
        # Whether this call made the dict (an upload that fails drops only a
        # dict it made: never one td_id= reopened).
        self._made_here = False
        if td_id is not None:
            native_dict = self._reopened(client, td_id, batch)
            if native_dict is not None:
                self._init(native_dict, client, native_dict.batch_size(), device, ())
                return
        try:
            native_dict = client.create(name or _fresh_name(), batch or torch.Size(()),
                                        rows_per_block=rows_per_block, part_bytes=part_bytes,
                                        layout=layout)
        except AlreadyExistsError:
            if td_id is None:
                raise
            # Another process made it between our open and our create.
            native_dict = self._reopened(client, td_id, batch)
            if native_dict is None:
                raise
            self._init(native_dict, client, native_dict.batch_size(), device, ())
            return
        self._made_here = True
        self._init(native_dict, client, batch or torch.Size(()), device, ())

    @staticmethod
    def _reopened(client, td_id, batch):
        """The dict ``td_id`` names, or None if there is none; ValueError if
        its batch size is not ``batch`` (when given)."""
        try:
            native_dict = client.open(td_id)
        except NotFoundError:
            return None
        stored = torch.Size(native_dict.describe()["batch_size"])
        if batch is not None and batch != stored:
            raise ValueError(f"td_id={td_id!r} holds batch size {list(stored)}, "
                             f"not {list(batch)}")
        return native_dict

    # -- construction helpers --

    @staticmethod
    def _client_for(addr, client, options) -> Client:
        return client_for(addr, client, options)

    def _init(self, native_dict, client, batch_size, device, prefix):
        self._dict = native_dict
        _fork.register(self)
        self._client = client
        self._device = torch.device(device) if device is not None else None
        self._prefix = tuple(prefix)
        # Reads of "everything under this view": [] is the whole dict.
        self._read_paths = [self._prefix] if self._prefix else []
        # No schema state here: dtypes, shapes and kinds come from the client
        # core's schema copy (describe(), no round trip while it is watched).
        self._td_dim_names = None

    @classmethod
    def _wrap(cls, native_dict, client, batch_size, device=None, prefix=()):
        obj = cls.__new__(cls)
        obj._init(native_dict, client, batch_size, device, prefix)
        return obj

    def _subview(self, prefix) -> "TensorDictStore":
        """A live view on the sub-dict at ``prefix`` (a full path)."""
        obj = type(self).__new__(type(self))
        obj._init(self._dict, self._client, self._batch_size, self._device, prefix)
        return obj

    @classmethod
    def from_store(cls, name_or_handle: str | None = None, *, addr: str | None = None,
                   device=None, client: Client | None = None, td_id: str | None = None,
                   tensorclass_cls=None, **options) -> "TensorDictStore":
        """Open an existing dict by name, or by a ``handle`` string (which holds
        its address and id, so it never opens a namesake created after it was
        deleted). ``td_id=`` is accepted as the seed's spelling of the name.
        Costs one call: the open, whose answer also gives the batch size
        (with the schema copy on; else a describe more). KeyError if it does
        not exist.

        A dict made from a tensorclass (``from_tensordict(tc)``) comes back as
        an instance of that class wrapping the store when the class's module
        is already imported (what a store holds never makes this process
        import code: otherwise a warning, and the store). ``tensorclass_cls=``
        takes the class, or a string naming it (``"module.Class"`` or
        ``"module:Class"``, imported because the caller asked),
        and ``tensorclass_cls=False`` returns the store itself.
        """
        store = cls._open(name_or_handle, addr, device, client, td_id, options)
        wrapper = _tensorclass_for(store, tensorclass_cls)
        return store if wrapper is None else wrapper._from_tensordict(store)

    @classmethod
    def _open(cls, name_or_handle, addr, device, client, td_id, options) -> "TensorDictStore":
        name = name_or_handle if name_or_handle is not None else td_id
        if name is None:
            raise TypeError("from_store() needs a dict name or handle")
        if name.startswith(_HANDLE_PREFIX):
            options = handle_options(client, options)
            _fork.before_native_call()
            native_dict = _native.open_handle(name, **options)
            client = Client._wrap(native_dict.client, options)
        else:
            client = cls._client_for(addr, client, options)
            try:
                native_dict = client.open(name)
            except NotFoundError as err:
                # The seed's phrase, then which tdstored was asked.
                raise NotFoundError(f"No TensorDictStore with td_id={name!r} found at "
                                    f"{client.address} ({err.message})") from None
        batch_size = native_dict.describe()["batch_size"]
        return cls._wrap(native_dict, client, batch_size, device)

    from_redis = from_store

    @classmethod
    def from_dict(cls, input_dict, *, batch_size=None, auto_batch_size: bool = False,
                  batch_dims=None, device=None, names=None, addr: str | None = None,
                  name: str | None = None, client: Client | None = None,
                  **options) -> "TensorDictStore":
        """A new dict holding ``input_dict`` (dict or TensorDict): create + one write.

        ``batch_size`` defaults to the input's (a TensorDict) or ``[]``;
        ``auto_batch_size=True`` infers it as TensorDict.from_dict does.
        """
        if is_tensor_collection(input_dict) and not isinstance(input_dict, TensorDictStore):
            local = input_dict
            if batch_size is not None:
                local = local.clone(False)
                local.batch_size = batch_size
        elif isinstance(input_dict, TensorDictStore):
            local = input_dict.to_local()
        elif auto_batch_size or batch_dims is not None:
            local = TensorDict.from_dict(input_dict, batch_size=batch_size,
                                         auto_batch_size=auto_batch_size,
                                         batch_dims=batch_dims)
        else:
            local = TensorDict(input_dict, batch_size=[] if batch_size is None else batch_size)
        return cls._upload(local, local.batch_size, device, addr, name, client, options)

    @classmethod
    def from_tensordict(cls, td: TensorDictBase, *, device=NO_DEFAULT, addr: str | None = None,
                        name: str | None = None, client: Client | None = None,
                        **options) -> "TensorDictStore":
        """A new dict holding ``td``'s leaves (nested TensorDicts become nested
        paths): create + one write. ``device`` defaults to ``td.device``.

        A tensorclass instance is stored as its fields (non-tensor fields as
        non-tensor leaves), with its class recorded in the dict's attributes
        (``TENSORCLASS_ATTR``); as in tensordict, the result is the
        TensorDictStore, and ``from_store`` gives the class back."""
        if device is NO_DEFAULT:
            device = td.device
        if is_tensorclass(td):
            return cls._upload(td._tensordict, td.batch_size, device, addr, name, client,
                               options, attrs={TENSORCLASS_ATTR: _class_path(type(td))})
        return cls._upload(td, td.batch_size, device, addr, name, client, options)

    @classmethod
    def from_schema(cls, schema: dict, *, batch_size=None, device=None, addr: str | None = None,
                    name: str | None = None, client: Client | None = None, rows_per_block: int = 0,
                    part_bytes: int = 0, layout: str = "leaves", **options) -> "TensorDictStore":
        """A new dict with zero-filled leaves, allocated by tdstored (no data
        crosses): ``schema`` maps a key to ``(element_shape, dtype)``. One call."""
        specs = []
        for key, (elem_shape, dtype) in schema.items():
            path = _unravel_key_to_tuple(key)
            if not path:
                raise TypeError(f"schema keys must be str or tuples of str, got {key!r}")
            if dtype not in _DTYPE_NAMES:
                raise TypeError(f"{_path_str(path)}: dtype {dtype} cannot be stored")
            specs.append((path, _DTYPE_NAMES[dtype], [int(s) for s in elem_shape]))
        client = cls._client_for(addr, client, options)
        batch_size = _as_size(batch_size)
        native_dict = client.create(name or _fresh_name(), batch_size, specs,
                                    rows_per_block=rows_per_block, part_bytes=part_bytes,
                                    layout=layout)
        return cls._wrap(native_dict, client, batch_size, device)

    @classmethod
    def _upload(cls, local, batch_size, device, addr, name, client, options, attrs=None):
        items = _flatten(local, (), [])
        leaves, keep = _native_leaves(items, batch_size)  # validate before creating anything
        out = cls(batch_size=batch_size, addr=addr, name=name, device=device,
                  client=client, **options)
        try:
            if attrs:
                out.attrs.update(attrs)
            if leaves:
                out._dict.write(leaves)
        except BaseException:
            if out._made_here:
                out.drop()  # a refused upload leaves no empty dict behind
            raise
        del keep
        return out

    from_dict_instance = TensorDict.from_dict_instance

    # -- identity --

    @property
    def name(self) -> str:
        """The dict's name in the store."""
        return self._dict.name

    @property
    def handle(self) -> str:
        """A string :meth:`from_store` (in any process) opens this dict with."""
        return self._dict.handle

    @property
    def layout(self) -> str:
        """How the dict keeps its rows: ``"leaves"`` or ``"record"`` (fixed
        when it was created)."""
        return self._dict.describe()["layout"]

    @property
    def _td_id(self) -> str:
        # The seed's identifier attribute; from_store(td_id=...) takes it back.
        return self._dict.name

    @property
    def client(self) -> Client:
        return self._client

    @property
    def prefix(self) -> tuple:
        """The path of this view's sub-dict (``()`` for the whole dict)."""
        return self._prefix

    # -- batch size, device, names --

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value):
        self._change_batch_size(torch.Size(value))

    @property
    def _batch_size(self) -> torch.Size:
        # The server's, so a resize_ by any process shows here: read from the
        # watched schema copy (no round trip) or, without one, by a describe.
        return torch.Size(self._dict.batch_size())

    @_batch_size.setter
    def _batch_size(self, value):
        self._change_batch_size(torch.Size(value))

    def _change_batch_size(self, new_size) -> None:
        if torch.Size(new_size) != self._batch_size:
            raise RuntimeError(
                f"the batch dims of a TensorDictStore are fixed when it is created "
                f"({tuple(self._batch_size)}); `resize_(n)` changes dim 0 in place, "
                f"otherwise {_TO_LOCAL}"
            )

    def resize_(self, n: int) -> "TensorDictStore":
        """Set batch dim 0 of the dict, and of every leaf, to ``n`` in
        tdstored, for every process at once; returns ``self``.

        Rows below ``min(old, n)`` keep their values and new rows read zeros;
        no leaf data moves through the client or inside Redis. A view
        resizes the dict it belongs to (its batch dims are the dict's).
        ValueError for ``n < 0`` or a dict without batch dims; RuntimeError
        while the dict is locked."""
        if isinstance(n, bool) or not isinstance(n, int):
            if isinstance(n, torch.Tensor) and n.numel() == 1 and not n.is_floating_point():
                n = int(n)
            else:
                raise TypeError(f"resize_(n): n must be an int, got {type(n).__name__}")
        self._dict.resize(n)
        return self

    @property
    def device(self):
        """Where reads land (None: CPU). Writes accept any device."""
        return self._device

    @device.setter
    def device(self, value):
        self._device = torch.device(value) if value is not None else None

    def _check_device(self, *, raise_exception: bool = True):
        return True  # every read is moved to self.device

    def _check_is_shared(self) -> bool:
        return False

    _erase_names = TensorDict._erase_names
    _has_names = TensorDict._has_names
    _set_names = TensorDict._set_names
    names = TensorDict.names
    _get_names_idx = TensorDict._get_names_idx
    _convert_to_tensordict = TensorDict._convert_to_tensordict

    def _rename_subtds(self, names):
        pass  # views are made on demand and carry no names

    # -- lock, attributes, counters: stored with the dict in tdstored --

    @property
    def is_locked(self) -> bool:
        """Whether the dict is locked, for every process and machine (the
        lock is stored with it; views share their root's)."""
        return self._dict.is_locked()

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        self._dict.set_locked(bool(value))

    @property
    def _is_locked(self) -> bool:
        return self._dict.is_locked()

    @_as_context_manager("is_locked")
    def lock_(self):
        """Lock the dict for everyone: adding, replacing or removing entries
        raises RuntimeError (tensordict's rules, here; tdstored refuses the
        changes for every other client too), in-place writes stay allowed."""
        self._dict.set_locked(True)
        return self

    @_as_context_manager("is_locked")
    def unlock_(self):
        self._dict.set_locked(False)
        return self

    def _propagate_lock(self, lock_parents_weakrefs=None, *, is_compiling=False):
        self._dict.set_locked(True)

    def _propagate_unlock(self):
        self._dict.set_locked(False)
        return []

    def _check_unlocked(self):
        if self._dict.is_locked():
            raise RuntimeError(_LOCK_ERROR)

    @property
    def attrs(self) -> StoreAttrs:
        """The dict's attributes: a mutable mapping of str to str stored
        with it (tdstore._attrs). Calling it is tensordict's ``attrs()``."""
        return StoreAttrs(self)

    def counter_add(self, name: str, delta: int = 1) -> int:
        """Adds ``delta`` to the dict's counter ``name`` atomically (across
        processes, machines and daemons) and returns the new value."""
        return self._dict.counter_add(name, delta)

    def counter_get(self, name: str) -> int:
        """The counter's value; 0 if it was never set."""
        return self._dict.counter_get(name)

    def counter_cas(self, name: str, expected: int, new: int) -> bool:
        """Sets the counter to ``new`` if it equals ``expected``, atomically;
        whether it did."""
        return self._dict.counter_cas(name, expected, new)

    # -- listing --

    def _leaf_paths(self):
        """Leaf paths under this view, relative to it, sorted (one call)."""
        if not self._prefix:
            return self._dict.keys(True, True)
        try:
            return [tuple(p) for p in self._dict.keys(True, True, prefix=self._prefix)]
        except (KeyError, ValueError):
            return []  # the sub-dict is gone (or is a leaf now): no keys under it

    def keys(self, include_nested: bool = False, leaves_only: bool = False,
             is_leaf: Callable | None = None, *, sort: bool = False) -> _StoreKeysView:
        """As TensorDict.keys(); each iteration is one native call."""
        return _StoreKeysView(self, include_nested=include_nested, leaves_only=leaves_only,
                              is_leaf=is_leaf, sort=sort)

    def items(self, include_nested: bool = False, leaves_only: bool = False,
              is_leaf: Callable | None = None, *, sort: bool = False):
        """As TensorDict.items(): one listing + ONE read of the leaves it yields
        (sub-dicts come as live views)."""
        view = _StoreKeysView(self, include_nested=include_nested, leaves_only=leaves_only,
                              is_leaf=is_leaf, sort=sort)
        leaves = self._leaf_paths()
        paths = view._paths(leaves)
        if sort:
            paths = sorted(paths, key=".".join)
        leaves = set(leaves)
        wanted = [p for p in paths if p in leaves]
        values = {}
        if wanted:
            _, read = self._dict.read([self._prefix + p for p in wanted], dlpack=True)
            n = len(self._prefix)
            for path, *leaf in read:
                values[path[n:]] = self._on_device_leaf(_leaf_from(*leaf))
        for p in paths:
            yield _key_of(p), (values[p] if p in values else self._subview(self._prefix + p))

    def values(self, include_nested: bool = False, leaves_only: bool = False,
               is_leaf: Callable | None = None, *, sort: bool = False):
        for _, value in self.items(include_nested, leaves_only, is_leaf, sort=sort):
            yield value

    def __contains__(self, key) -> bool:
        """``key in td``: one native call."""
        path = _unravel_key_to_tuple(key)
        if not path:
            raise RuntimeError("key must be a NestedKey (a str or a possibly tuple of str).")
        return self._dict.contains(self._prefix + path)

    def entry_class(self, key: NestedKey) -> type:
        """torch.Tensor for a leaf, TensorDictStore for a sub-dict (one listing)."""
        path = _unravel_key_to_tuple(key)
        leaves = self._leaf_paths()
        if path in leaves:
            _, shape, kind, _ = self._describe_full()[self._prefix + path]
            if kind in ("tensor", RAGGED):
                return torch.Tensor
            return NonTensorData if shape[-1] == 0 else NonTensorStack
        if path in _node_paths(leaves):
            return TensorDictStore
        raise KeyError(f'key "{key}" not found in {type(self).__name__} {self.name!r}')

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of a leaf (or a sub-dict's batch size) without reading
        its data: one describe."""
        path = self._prefix + _unravel_key_to_tuple(key)
        leaves = self._describe_full()
        if path in leaves:
            _, shape, kind, _ = leaves[path]
            # A non-tensor's shape is its batch size (the slots are storage).
            return torch.Size(shape if kind == "tensor" else shape[:-1])
        n = len(path)
        if any(p[:n] == path for p in leaves):
            return self._batch_size
        raise KeyError(f'key "{key}" not found in {type(self).__name__} {self.name!r}')

    def _describe_leaves(self):
        """Full path -> (dtype name, shape) of every leaf (one describe)."""
        return {p: (d, shape) for p, (d, shape, _, _) in self._describe_full().items()}

    def _describe_full(self):
        """Full path -> (dtype name, shape, kind, one value) of every leaf: one
        describe, answered by the client core's schema copy with no round trip
        while it is watched, and never older than anything this process has
        seen (docs/protocol.md, *Causal schema reads*)."""
        return {tuple(path): (dtype, tuple(shape), kind, value)
                for path, dtype, shape, _, kind, value in self._dict.describe()["leaves"]}

    # -- reads --

    def _on_device(self, t):
        device = self._device
        if device is not None and t.device != device:
            return t.to(device)
        return t

    def _get_path(self, rel, default):
        """td[key] / td.get(key): a leaf in one read; a sub-dict (a view) in two
        calls (the exact-leaf read refuses it, then contains)."""
        path = self._prefix + rel
        try:
            _, leaves = self._dict.read([path], None, path, dlpack=True)
        except NotFoundError:
            if default is NO_DEFAULT:
                raise
            return default
        except InvalidArgumentError:
            if self._dict.contains(path):
                return self._subview(path)
            raise
        _, dtype, shape, buf, kind, value = leaves[0]
        return self._on_device_leaf(_leaf_from(dtype, shape, buf, kind, value))

    def _on_device_leaf(self, leaf):
        """A leaf as read, on this store's device; a ragged leaf's cells as
        ``td["key"]`` gives them (_ragged.RaggedCells.public)."""
        if isinstance(leaf, _ragged.RaggedCells):
            if self._device is not None:
                leaf = leaf.to(self._device)
            return leaf.public()
        return self._on_device(leaf)

    def _get_str(self, key, default=NO_DEFAULT, **kwargs):
        return self._get_path((key,), default)

    def _get_tuple(self, key, default=NO_DEFAULT, **kwargs):
        return self._get_path(tuple(key), default)

    def _get_at_str(self, key, idx, default=NO_DEFAULT, **kwargs):
        return self._get_at_path((key,), idx, default)

    def _get_at_tuple(self, key, idx, default=NO_DEFAULT, **kwargs):
        return self._get_at_path(tuple(key), idx, default)

    def _get_at_path(self, rel, idx, default):
        """td.get_at(key, idx): one indexed read of that leaf (or sub-dict)."""
        path = self._prefix + rel
        items = idx if isinstance(idx, tuple) else (idx,)
        if (len(items) > len(self._batch_size)
                or any(i is Ellipsis or i is None for i in items)):
            # get_at is get(key)[idx]: an Ellipsis then spans the leaf's
            # element dims too, and an index may reach into them. The server
            # indexes batch dims only, so read the leaf and index it here.
            value = self._get_path(rel, default)
            return value if value is default else value[idx]
        conv = convert_index(idx, self._batch_size)
        try:
            batch, leaves = self._dict.read([path], conv.terms, dlpack=True)
        except NotFoundError:
            if default is NO_DEFAULT:
                raise
            return default
        if len(leaves) == 1 and tuple(leaves[0][0]) == path:
            out = self._on_device_leaf(_leaf_from(*leaves[0][1:]))
        else:
            out = _to_tensordict(_nest(leaves, len(path)), batch, self._device)
        return out[conv.post] if conv.post is not None else out

    def __getitem__(self, index):
        """``td["key"]``/``td["a", "b"]``: a leaf (one read) or a live view;
        ``td[idx]``: a local TensorDict of the selected rows (one indexed read)."""
        if isinstance(index, str):
            return _unwrap(self._get_path((index,), NO_DEFAULT))
        if isinstance(index, tuple) and index and isinstance(index[0], (str, tuple)):
            key = _unravel_key_to_tuple(index)
            if key:
                return _unwrap(self._get_path(key, NO_DEFAULT))
        if _selects_all(index):
            return self  # as TensorDict: td[...], td[:] are td itself
        return self._index_read(index)

    __getitems__ = __getitem__

    def _index_read(self, index, paths=None) -> TensorDict:
        """td[index]: the rows of every leaf, or of the leaves under each of
        ``paths`` (full paths), in one indexed read."""
        conv = convert_index(index, self._batch_size)
        paths = self._read_paths if paths is None else paths
        batch, leaves = self._dict.read(paths, conv.terms, dlpack=True)
        out = _to_tensordict(_nest(leaves, len(self._prefix)), batch, self._device)
        return out[conv.post] if conv.post is not None else out

    def get_async(self, index) -> concurrent.futures.Future:
        """``td[index]`` without waiting: a Future of the local TensorDict of
        those rows (or of the leaf, for a key). The read runs on a thread of
        this process's prefetch pool (4 threads; the native call releases the
        GIL), so a trainer keeps a few batches in flight while it computes:

            nxt = td.get_async(idx1)
            for step in ...:
                batch, nxt = nxt.result(), td.get_async(next_idx)
                train(batch)

        Errors are raised by ``result()``, as ``td[index]`` raises them."""
        return _prefetch_pool().submit(self.__getitem__, index)

    def _index_tensordict(self, index, new_batch_size=None, names=None):
        return self._index_read(index)

    def to_local(self) -> TensorDict:
        """Every leaf of this dict (or view) in a local TensorDict: one read."""
        batch, leaves = self._dict.read(self._read_paths, dlpack=True)
        return _to_tensordict(_nest(leaves, len(self._prefix)), self._batch_size, self._device)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        return self.to_local()

    def contiguous(self, *, canonical: bool = False) -> TensorDict:
        return self.to_local()

    def is_contiguous(self) -> bool:
        return False

    # -- removing and renaming --

    def del_(self, key: NestedKey):
        """Remove a leaf or a whole sub-dict (one call; KeyError if absent;
        a locked dict refuses it in tdstored: RuntimeError)."""
        path = self._prefix + _unravel_key_to_tuple(key)
        self._dict.erase(path)
        return self

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False):
        """Move a leaf or sub-dict in one step in tdstored, no data moved
        (KeyError if ``old_key`` is absent, or if ``safe`` and ``new_key``
        exists; RuntimeError if the dict is locked)."""
        old = self._prefix + _unravel_key_to_tuple(old_key)
        new = self._prefix + _unravel_key_to_tuple(new_key)
        if old == new:
            return self
        try:
            self._dict.rename(old, new, replace=not safe)
        except AlreadyExistsError:
            raise KeyError(f"key {new_key} already present in {type(self).__name__}.") from None
        return self

    def popitem(self):
        """Remove and return the last key (in keys() order) and its value."""
        self._check_unlocked()  # before reading it: a locked dict keeps it
        paths = self.keys()._paths()  # top-level keys, relative to this view
        if not paths:
            raise KeyError(f"popitem(): {type(self).__name__} is empty")
        rel = tuple(paths[-1])
        value = self._get_path(rel, NO_DEFAULT)
        if isinstance(value, TensorDictStore):
            value = value.to_local()
        self.del_(rel)
        return _key_of(rel), value

    # -- copies --

    def _clone(self, recurse: bool = True):
        """recurse=True: a NEW dict in the store (fresh name, same batch size
        and layout) with this view's leaves, copied inside tdstored in one
        call (no data through this process). It appears only once every leaf
        is in place, and a copy that fails leaves no dict; drop() it when
        done. recurse=False: another wrapper on the same dict."""
        if not recurse:
            return self._subview(self._prefix)
        native = self._dict.clone(_fresh_name(), self._prefix)
        return type(self)._wrap(native, self._client, native.batch_size(), self._device)

    def empty(self, recurse=False, *, batch_size=None, device=NO_DEFAULT, names=None):
        """A local, empty TensorDict of the same batch size and device (as the
        seed); with recurse=True it keeps the sub-dict structure."""
        batch_size = self._batch_size if batch_size is None else batch_size
        device = self._device if device is NO_DEFAULT else device
        out = TensorDict({}, batch_size=batch_size, device=device, names=names)
        if recurse:
            for node in sorted(_node_paths(self._leaf_paths())):
                out.set(node, TensorDict({}, batch_size=batch_size, device=device))
        return out

    def to(self, *args, **kwargs):
        """``to(device)``: a wrapper on the same dict whose reads land on
        ``device`` (no data moves). ``to(TensorDict)``: ``to_local()``. Dtype
        casts: call to_local().to(...)."""
        if args and isinstance(args[0], type):
            if issubclass(args[0], TensorDict):
                return self.to_local()
            raise TypeError(f"TensorDictStore.to({args[0].__name__}) is not supported. "
                            f"{_TO_LOCAL}")
        if kwargs.pop("batch_size", None) is not None:
            raise RuntimeError(f"the batch size of a TensorDictStore is fixed. {_TO_LOCAL}")
        kwargs.pop("non_blocking_pin", None)
        kwargs.pop("num_threads", None)
        if kwargs.pop("inplace", False):
            raise RuntimeError("TensorDictStore.to(..., inplace=True) is not supported; "
                               "set td.device instead")
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if dtype is not None:
            raise RuntimeError(f"TensorDictStore.to(dtype) would rewrite the store. {_TO_LOCAL}")
        if device is None or device == self._device:
            return self
        out = self._subview(self._prefix)
        out._device = torch.device(device)
        return out

    # -- whole-dict ops served from a local copy --

    def _write_back(self, local) -> None:
        """Write every leaf of ``local`` (a to_local() copy of this store,
        modified in place) back in one write. Not atomic against another
        writer's change made between the read and this write."""
        # Non-tensors are left as they are, as tensordict's in-place ops
        # leave them (and a rewrite could change a locked leaf's slots).
        self._write([(p, t) for p, t in _flatten(local, self._prefix, [])
                     if not isinstance(t, Values)])

    def _apply_nest(self, fn, *others, inplace=False, **kwargs):
        # apply()/named_apply()/arithmetic: computed on one local copy (one
        # read); in place, the result is written back in one write.
        local = self.to_local()
        others = tuple(o.to_local() if isinstance(o, TensorDictStore) else o for o in others)
        if not inplace:
            return local._apply_nest(fn, *others, **kwargs)
        local._apply_nest(fn, *others, inplace=True, **kwargs)
        self._write_back(local)
        return self

    def _local_inplace(name):  # noqa: N805 - a factory used in the class body
        def method(self, *args, **kwargs):
            # tensordict's in-place pointwise ops (add_, clamp_min_, ...)
            # mutate the leaves' memory; a store's leaves are copies, so the
            # op would silently change nothing. Run it on one local copy (one
            # read) and write every leaf back (one write).
            args = tuple(a.to_local() if isinstance(a, TensorDictStore) else a for a in args)
            local = self.to_local()
            getattr(local, name)(*args, **kwargs)
            self._write_back(local)
            return self
        method.__name__ = name
        method.__doc__ = f"TensorDict.{name} on a local copy, written back (read + write)."
        return method

    for _name in ("abs_", "acos_", "add_", "addcdiv_", "addcmul_", "asin_", "atan_", "ceil_",
                  "clamp_max_", "clamp_min_", "cos_", "cosh_", "div_", "erf_", "erfc_", "exp_",
                  "expm1_", "floor_", "frac_", "lerp_", "lgamma_", "log10_", "log1p_", "log2_",
                  "log_", "maximum_", "minimum_", "mul_", "neg_", "pow_", "reciprocal_",
                  "round_", "sigmoid_", "sign_", "sin_", "sinh_", "sqrt_", "sub_", "tan_",
                  "tanh_", "trunc_"):
        locals()[_name] = _local_inplace(_name)
    del _name, _local_inplace

    def copy_at_(self, tensordict, idx, non_blocking: bool = False, *, fast=None):
        """``td[idx] = tensordict`` for existing entries (update_at_)."""
        return self.update_at_(tensordict, idx)

    def requires_grad_(self, requires_grad=True):
        raise RuntimeError("a TensorDictStore's leaves cannot require grad (every read is a "
                           "new tensor): call requires_grad_() on what you read, e.g. "
                           "td.to_local().requires_grad_()")

    def pin_memory_(self, *args, **kwargs):
        raise RuntimeError(f"Cannot pin the memory of a TensorDictStore. {_TO_LOCAL}")

    def _cast_reduction(self, *args, **kwargs):
        return self.to_local()._cast_reduction(*args, **kwargs)

    def _multithread_apply_flat(self, *args, **kwargs):
        return self.to_local()._multithread_apply_flat(*args, **kwargs)

    def _multithread_rebuild(self, *args, **kwargs):
        return self.to_local()._multithread_rebuild(*args, **kwargs)

    def _to_module(self, *args, **kwargs):
        return self.to_local()._to_module(*args, **kwargs)

    def _unbind(self, dim: int):
        return self.to_local().unbind(dim)

    def all(self, dim=None):
        return self.to_local().all(dim) if dim is not None else self.to_local().all()

    def any(self, dim=None):
        return self.to_local().any(dim) if dim is not None else self.to_local().any()

    def split(self, split_size, dim: int = 0):
        """Local TensorDicts, one indexed read each."""
        dim = dim + self.batch_dims if dim < 0 else dim
        size = self._batch_size[dim]
        if isinstance(split_size, int):
            bounds = list(range(0, size, split_size)) + [size]
        else:
            bounds = [0]
            for s in split_size:
                bounds.append(bounds[-1] + s)
            if bounds[-1] != size:
                raise RuntimeError(f"split sizes {list(split_size)} do not add up to {size}")
        lead = (slice(None),) * dim
        return tuple(self._index_read(lead + (slice(a, b),)) for a, b in zip(bounds, bounds[1:]))

    def chunk(self, chunks: int, dim: int = 0):
        size = self._batch_size[dim]
        return self.split(-(size // -chunks), dim)

    def __eq__(self, other):
        return self.to_local() == (other.to_local() if isinstance(other, TensorDictStore)
                                   else other)

    def __ne__(self, other):
        return self.to_local() != (other.to_local() if isinstance(other, TensorDictStore)
                                   else other)

    def __xor__(self, other):
        return self.to_local() ^ other

    def __or__(self, other):
        return self.to_local() | other

    def __ge__(self, other):
        return self.to_local() >= other

    def __gt__(self, other):
        return self.to_local() > other

    def __le__(self, other):
        return self.to_local() <= other

    def __lt__(self, other):
        return self.to_local() < other

    __hash__ = object.__hash__

    def detach_(self):
        return self  # stored tensors carry no autograd history

    # -- what a store cannot do --

    def _shape_op(name):  # noqa: N805 - a factory used in the class body
        def method(self, *args, **kwargs):
            raise RuntimeError(
                f"Cannot call `{name}` on a TensorDictStore: the store keeps the batch "
                f"shape it was created with. {_TO_LOCAL}"
            )
        method.__name__ = name
        return method

    _view = _shape_op("view")  # type: ignore[assignment]
    _transpose = _shape_op("transpose")
    _permute = _shape_op("permute")
    _squeeze = _shape_op("squeeze")
    _unsqueeze = _shape_op("unsqueeze")
    reshape = _shape_op("reshape")
    expand = _shape_op("expand")
    flatten = _shape_op("flatten")
    unflatten = _shape_op("unflatten")
    _repeat = _shape_op("repeat")
    repeat_interleave = _shape_op("repeat_interleave")
    _add_batch_dim = _shape_op("vmap")
    del _shape_op

    def _remove_batch_dim(self, vmap_level, batch_size, out_dim):
        raise RuntimeError(f"TensorDictStore cannot be used with vmap. {_TO_LOCAL}")

    def _maybe_remove_batch_dim(self, funcname, vmap_level, batch_size, out_dim):
        raise RuntimeError(f"TensorDictStore cannot be used with vmap. {_TO_LOCAL}")

    def share_memory_(self):
        raise NotImplementedError(
            "share_memory_() on a TensorDictStore: it is already shared through tdstored; "
            "pass the store itself (it pickles as a handle) or td.handle to other processes"
        )

    def pin_memory(self, *args, **kwargs):
        raise RuntimeError(f"Cannot pin the memory of a TensorDictStore. {_TO_LOCAL}")

    def _memmap_(self, **kwargs):
        raise RuntimeError(f"Cannot memory-map a TensorDictStore in place. Use "
                           f"td.to_local().memmap(...)")

    def memmap_(self, *args, **kwargs):
        raise RuntimeError("Cannot memory-map a TensorDictStore in place. Use "
                           "td.to_local().memmap(...)")

    def make_memmap(self, *args, **kwargs):
        raise RuntimeError("Cannot make a memory-mapped tensor in a TensorDictStore; "
                           "write a tensor with td[key] = tensor")

    make_memmap_from_storage = make_memmap
    make_memmap_from_tensor = make_memmap

    @classmethod
    def _load_memmap(cls, *args, **kwargs):
        raise RuntimeError("TensorDictStore cannot be loaded from a memmap; use "
                           "TensorDictStore.from_tensordict(TensorDict.load_memmap(path))")

    def _select(self, *keys, inplace=False, strict=True, set_shared=True):
        if inplace:
            raise RuntimeError(f"select(inplace=True) on a TensorDictStore: delete the "
                               f"other keys with del_(), or {_TO_LOCAL}")
        return self.to_local()._select(*keys, inplace=False, strict=strict)

    def _exclude(self, *keys, inplace=False, set_shared=True):
        if inplace:
            for key in keys:
                if key in self:
                    self.del_(key)
            return self
        return self.to_local()._exclude(*keys, inplace=False)

    def _set_non_tensor(self, key, value):
        """set_non_tensor(key, value): one NonTensorData for the whole dict."""
        self._set_path(_unravel_key_to_tuple(key),
                       NonTensorData(value, batch_size=self._batch_size), False)
        return self

    def _stack_onto_(self, list_item, dim):
        raise RuntimeError(f"Cannot stack onto a TensorDictStore. {_TO_LOCAL}")

    @_as_context_manager()
    def flatten_keys(self, separator=".", inplace=False):
        if inplace:
            raise RuntimeError(f"flatten_keys(inplace=True) on a TensorDictStore. {_TO_LOCAL}")
        return self.to_local().flatten_keys(separator)

    @_as_context_manager()
    def unflatten_keys(self, separator=".", inplace=False):
        if inplace:
            raise RuntimeError(f"unflatten_keys(inplace=True) on a TensorDictStore. {_TO_LOCAL}")
        return self.to_local().unflatten_keys(separator)

    # -- lifetime, pickling, repr --

    def __reduce__(self):
        # A handle (address + name + id), not the data: unpickling in another
        # process (spawn, DataLoader worker) opens the same dict.
        return (_unpickle, (self.handle, self._client.options, self._prefix,
                            tuple(self._batch_size),
                            None if self._device is None else str(self._device), type(self)))

    def appender(self, keys=None, *, batch_rows: int = 256, window: int = 8):
        """Row writes over one open stream (``tdstore.Appender``): ``out[i] =
        row`` / ``out.append(start, rows)``, consecutive rows coalesced into
        batches, every batch acknowledged; ``keys`` default to every leaf.
        Writes existing leaves in place, so a locked store allows it."""
        return Appender(self, keys, batch_rows, window)

    def close(self) -> None:
        """Release this wrapper's connection (the dict stays in the store)."""
        self._dict = _Closed()

    def drop(self) -> None:
        """Delete the whole dict from the store (all views of it included).

        Deletes the dict this store opened, by its id: if it was deleted
        and another dict took its name since, that one is left alone and
        this raises KeyError."""
        self._dict.drop()

    clear_redis = drop

    def __repr__(self) -> str:
        # One describe: shapes and dtypes, no data.
        try:
            info = self._dict.describe()
        except Exception as err:  # noqa: BLE001 - a repr must not raise
            return f"TensorDictStore(name=?, error={err})"
        n = len(self._prefix)
        fields = []
        for path, dtype, shape, _, kind, _ in info["leaves"]:
            path = tuple(path)
            if path[:n] != self._prefix:
                continue
            if kind == "tensor":
                fields.append(f"{_path_str(path[n:])}: Tensor(shape={list(shape)}, "
                              f"dtype={dtype})")
            else:
                form = "NonTensorData" if shape[-1] == 0 else "NonTensorStack"
                fields.append(f"{_path_str(path[n:])}: {form}({kind}, "
                              f"batch_size={list(shape[:-1])})")
        body = ",\n        ".join(fields)
        where = f"{info['name']!r}" + (f", prefix={_path_str(self._prefix)!r}" if n else "")
        return (f"TensorDictStore(\n    name={where},\n    backend='tdstore',\n"
                f"    addr={self._client.address!r},\n"
                f"    fields={{\n        {body}}},\n    batch_size={self._batch_size},\n"
                f"    device={self._device})")


def _unpickle(handle, options, prefix, batch_size, device, cls=None):
    _fork.before_native_call()
    native_dict = _native.open_handle(handle, **options)
    client = Client._wrap(native_dict.client, options)
    return (cls or TensorDictStore)._wrap(native_dict, client, batch_size, device, prefix)


_POOL: tuple | None = None  # (pid, ThreadPoolExecutor) of get_async


def _prefetch_pool() -> concurrent.futures.ThreadPoolExecutor:
    """This process's pool for get_async (a forked child makes its own: the
    parent's threads do not exist there)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="tdstore-prefetch"))
    return _POOL[1]


def open_handle(handle: str, *, device=None, **options) -> TensorDictStore:
    """Open the dict a ``td.handle`` string names (in any process)."""
    return TensorDictStore.from_store(handle, device=device, **options)


def from_store(name_or_handle: str, **kwargs) -> TensorDictStore:
    """``TensorDictStore.from_store``."""
    return TensorDictStore.from_store(name_or_handle, **kwargs)


_register_tensor_class(TensorDictStore)
