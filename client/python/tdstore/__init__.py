"""tdstore: an out-of-process tensor store for PyTorch, from Python.

    import tdstore
    td = tdstore.TensorDictStore(batch_size=[1000], addr="127.0.0.1:50051")
    td["obs"] = torch.randn(1000, 84)
    batch = td[torch.randint(1000, (256,))]     # a local TensorDict of 256 rows

``TensorDictStore`` is a tensordict ``TensorDictBase``: a drop-in for
``tensordict.store.TensorDictStore`` (swap the import, ``host=``/``port=``
becomes ``addr=``). ``Client`` is the connection (list, drop, rename dicts).
Errors are ``tdstore.Error`` subclasses that are also the builtin a
tensordict user expects (KeyError, IndexError, ValueError/RuntimeError, ...):
see ``tdstore._errors`` and docs/python.md.
"""

from . import _native
from ._errors import *  # noqa: F401,F403 - the exception classes
from ._errors import ERROR_CLASSES, Error, error_from_status
from ._errors import __all__ as _error_names
from ._append import Appender
from ._client import Client
from ._store import TensorDictStore, from_store, open_handle
from ._lazy import LazyStackedTensorDictStore

# Every error the native core raises becomes one of our classes (one table:
# tdstore._errors.ERROR_CLASSES).
_native.set_error_factory(error_from_status)

__all__ = ["Appender", "Client", "LazyStackedTensorDictStore", "TensorDictStore", "from_store",
           "open_handle", *_error_names]
